package provider

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// source_snapshot replaces the VM only when it changes from one snapshot
// to another.
func TestSourceSnapshotReplace(t *testing.T) {
	schemaType := tftypes.Object{AttributeTypes: map[string]tftypes.Type{"source_snapshot": tftypes.String}}
	state := func(v tftypes.Value) tfsdk.State {
		return tfsdk.State{Raw: tftypes.NewValue(schemaType, map[string]tftypes.Value{"source_snapshot": v})}
	}
	str := func(s string) types.String { return types.StringValue(s) }
	null := types.StringNull()
	for _, c := range []struct {
		from, to types.String
		replace  bool
	}{
		{str("a"), str("b"), true},
		{null, str("a"), false},
		{str("a"), null, false},
		{str("a"), types.StringUnknown(), true},
	} {
		from, _ := c.from.ToTerraformValue(context.Background())
		req := planmodifier.StringRequest{
			Path: path.Root("source_snapshot"), StateValue: c.from, PlanValue: c.to, ConfigValue: c.to,
			State: state(from), Plan: tfsdk.Plan{Raw: tftypes.NewValue(schemaType, map[string]tftypes.Value{"source_snapshot": from})},
		}
		var resp planmodifier.StringResponse
		resp.PlanValue = c.to
		sourceSnapshotReplace().PlanModifyString(context.Background(), req, &resp)
		if resp.RequiresReplace != c.replace {
			t.Errorf("%s → %s: replace %v, want %v", c.from, c.to, resp.RequiresReplace, c.replace)
		}
	}
}

// planFor runs ModifyPlan on state → plan and returns the response.
func planFor(t *testing.T, state, plan vmResourceModel) resource.ModifyPlanResponse {
	t.Helper()
	return modifyPlan(t, NewVMResource(), state, plan)
}

// modifyPlan runs r's real ModifyPlan from state to plan (models of r's
// schema) and returns the response.
func modifyPlan[M any](t *testing.T, r resource.Resource, state, plan M) resource.ModifyPlanResponse {
	t.Helper()
	ctx := context.Background()
	var sr resource.SchemaResponse
	r.Schema(ctx, resource.SchemaRequest{}, &sr)
	st := tfsdk.State{Schema: sr.Schema}
	if d := st.Set(ctx, &state); d.HasError() {
		t.Fatal(d)
	}
	pl := tfsdk.Plan{Schema: sr.Schema}
	if d := pl.Set(ctx, &plan); d.HasError() {
		t.Fatal(d)
	}
	resp := resource.ModifyPlanResponse{Plan: pl}
	r.(resource.ResourceWithModifyPlan).ModifyPlan(ctx, resource.ModifyPlanRequest{State: st, Plan: pl}, &resp)
	return resp
}

// runningState is a VM as Read leaves it: running, with status.
func runningState(t *testing.T) vmResourceModel {
	t.Helper()
	m := fullModel(t)
	m.RunStrategy = types.StringValue("Always")
	vm, d := vmFromModel(context.Background(), &m)
	if d.HasError() {
		t.Fatal(d)
	}
	stored := stored(t, vm)
	stored.Status = &apiv1.VirtualMachineStatus{PrintableStatus: "Running", Ready: true}
	read, d := vmToModel(context.Background(), stored, vmiWith("a", "Running", true), readOptions{prior: &m})
	if d.HasError() {
		t.Fatal(d)
	}
	return vmResourceModel{
		vmModel:      read,
		UpdatePolicy: types.StringValue("restart"),
		Timeouts:     timeouts.Value{Object: types.ObjectNull(map[string]attr.Type{"create": types.StringType, "update": types.StringType, "delete": types.StringType})},
	}
}

func warnings(resp resource.ModifyPlanResponse) string {
	var out []string
	for _, w := range resp.Diagnostics.Warnings() {
		out = append(out, w.Summary()+": "+w.Detail())
	}
	return strings.Join(out, "\n")
}

func TestModifyPlanSaysWhatApplyDoes(t *testing.T) {
	ctx := context.Background()
	state := runningState(t)

	// Another spelling of the same memory: the plan is the state.
	plan := state
	plan.Memory = quantityOf("1Gi") // state has the canonical 1Gi; config says 1Gi too
	plan.Status = types.ObjectUnknown(statusAttrTypes)
	plan.RestartRequired = types.BoolUnknown()
	resp := planFor(t, state, plan)
	var got vmResourceModel
	resp.Plan.Get(ctx, &got)
	if got.Status.IsUnknown() || got.RestartRequired.IsUnknown() || resp.Diagnostics.HasError() {
		t.Errorf("a plan without changes kept unknowns: status %v restart_required %v %v", got.Status, got.RestartRequired, resp.Diagnostics)
	}

	// A memory change on a running VM restarts it.
	plan.Memory = quantityOf("2Gi")
	if w := warnings(planFor(t, state, plan)); !strings.Contains(w, "Apply restarts virtual machine prod/web: Changing memory takes effect only when the guest restarts") {
		t.Errorf("memory change warnings: %q", w)
	}
	// ... or waits for one.
	plan.UpdatePolicy = types.StringValue("none")
	if w := warnings(planFor(t, state, plan)); !strings.Contains(w, "waits for a restart") || strings.Contains(w, "Apply restarts") {
		t.Errorf("update_policy none warnings: %q", w)
	}
	// Labels never restart.
	plan = state
	plan.Labels = types.MapNull(types.StringType)
	plan.Status = types.ObjectUnknown(statusAttrTypes)
	if w := warnings(planFor(t, state, plan)); w != "" {
		t.Errorf("label change warned: %q", w)
	}

	// restart_required left by update_policy none: switching to restart
	// plans the restart.
	state.RestartRequired = types.BoolValue(true)
	state.UpdatePolicy = types.StringValue("none")
	plan = state
	plan.UpdatePolicy = types.StringValue("restart")
	plan.Status = types.ObjectUnknown(statusAttrTypes)
	plan.RestartRequired = types.BoolUnknown()
	resp = planFor(t, state, plan)
	resp.Plan.Get(ctx, &got)
	if got.RestartRequired.IsUnknown() || got.RestartRequired.ValueBool() {
		t.Errorf("restart_required planned %v, want false", got.RestartRequired)
	}
	if w := warnings(resp); !strings.Contains(w, "restart_required is true") {
		t.Errorf("warnings: %q", w)
	}
}

// A persistent disk that shrinks or gets another image is refused at plan
// time, on its attribute, with the agent's words; one that grows is
// planned without a restart.
func TestModifyPlanPersistentDisks(t *testing.T) {
	state := runningState(t)
	withDisk := func(size, image string) vmResourceModel {
		plan := state
		plan.Disks = append([]diskModel(nil), state.Disks...)
		plan.Disks[0].Persistent = &persistentModel{Size: quantityOf(size), Image: types.StringValue(image), StorageClass: state.Disks[0].Persistent.StorageClass}
		plan.Status = types.ObjectUnknown(statusAttrTypes)
		plan.RestartRequired = types.BoolUnknown()
		return plan
	}
	errorsOf := func(resp resource.ModifyPlanResponse) string {
		var out []string
		for _, e := range resp.Diagnostics.Errors() {
			p := ""
			if a, ok := e.(diag.DiagnosticWithPath); ok {
				p = a.Path().String()
			}
			out = append(out, p+" | "+e.Summary()+" | "+e.Detail())
		}
		return strings.Join(out, "\n")
	}

	resp := planFor(t, state, withDisk("20Gi", "debian.qcow2"))
	if resp.Diagnostics.HasError() || warnings(resp) != "" {
		t.Errorf("growth: %s; warnings %q", errorsOf(resp), warnings(resp))
	}
	for _, c := range []struct{ size, image, want string }{
		{"5Gi", "debian.qcow2", "disk[0].persistent.size | Persistent disk cannot shrink | disk[0].persistent.size: " +
			"may not shrink from 10Gi to 5Gi: a persistent volume only grows (rename the disk to get a new, smaller volume)."},
		{"10Gi", "ubuntu.qcow2", "disk[0].persistent.image | Persistent disk image cannot change | disk[0].persistent.image: " +
			`may not change from "debian.qcow2" to "ubuntu.qcow2": the image is copied in only when the volume is made ` +
			"(rename the disk to get a new volume from another image)."},
	} {
		if got := errorsOf(planFor(t, state, withDisk(c.size, c.image))); got != c.want {
			t.Errorf("%s %s:\n got %s\nwant %s", c.size, c.image, got, c.want)
		}
	}
	// Not known yet: the agent judges it at apply.
	plan := withDisk("5Gi", "debian.qcow2")
	plan.Disks[0].Persistent.Size = quantityValue{StringValue: types.StringUnknown()}
	if resp := planFor(t, state, plan); resp.Diagnostics.HasError() {
		t.Errorf("unknown size refused: %s", errorsOf(resp))
	}
}

// A live migration moves a VM's instance to another node without
// touching the VM's spec: the next refresh reads a new status.node, and
// the plan that follows must not turn that into a change. status is
// computed only, with no plan modifier, so Terraform proposes the
// refreshed value and the provider must plan it as is. This drives the
// provider's real PlanResourceChange, as terraform plan does.
func TestVMStatusNodeChangeIsNoPlanDiff(t *testing.T) {
	ctx := context.Background()
	srv, err := providerserver.NewProtocol6WithError(New("test")())()
	if err != nil {
		t.Fatal(err)
	}
	r := NewVMResource()
	var sresp resource.SchemaResponse
	r.Schema(ctx, resource.SchemaRequest{}, &sresp)
	if sresp.Diagnostics.HasError() {
		t.Fatal(sresp.Diagnostics)
	}
	sch := sresp.Schema
	typ := sch.Type().TerraformType(ctx)

	// raw renders m in the resource's schema.
	raw := func(m *vmResourceModel) tftypes.Value {
		t.Helper()
		st := tfsdk.State{Schema: sch, Raw: tftypes.NewValue(typ, nil)}
		if d := st.Set(ctx, m); d.HasError() {
			t.Fatal(d)
		}
		return st.Raw
	}
	dyn := func(v tftypes.Value) *tfprotov6.DynamicValue {
		t.Helper()
		dv, err := tfprotov6.NewDynamicValue(typ, v)
		if err != nil {
			t.Fatal(err)
		}
		return &dv
	}
	// state is a running VM as refresh records it, on node; config is
	// what the configuration says (computed-only attributes null).
	state := func(node, memory string) *vmResourceModel {
		status, d := types.ObjectValue(statusAttrTypes, map[string]attr.Value{
			"printable_status": types.StringValue(apiv1.PrintableRunning),
			"phase":            types.StringValue(apiv1.PhaseRunning),
			"ready":            types.BoolValue(true),
			"node":             types.StringValue(node),
			"conditions":       types.ListValueMust(types.ObjectType{AttrTypes: conditionAttrTypes}, []attr.Value{}),
			"interfaces":       types.ListValueMust(types.ObjectType{AttrTypes: interfaceStatusAttrTypes}, []attr.Value{}),
		})
		if d.HasError() {
			t.Fatal(d)
		}
		return &vmResourceModel{
			vmModel: vmModel{
				ID: types.StringValue("default/web"), Name: types.StringValue("web"), Namespace: types.StringValue("default"),
				UID: types.StringValue("uid-1"),
				vmSpecModel: vmSpecModel{
					Labels: types.MapNull(types.StringType), Annotations: types.MapNull(types.StringType),
					RunStrategy:       types.StringValue(apiv1.RunStrategyAlways),
					NodeFailurePolicy: types.StringValue(apiv1.DefaultNodeFailurePolicy),
					instanceSpecModel: instanceSpecModel{
						Memory: quantityOf(memory),
						// Terraform holds absent list blocks as empty lists.
						Disks: []diskModel{}, Interfaces: []interfaceModel{},
						NodeSelector:           types.MapValueMust(types.StringType, map[string]attr.Value{"zone": types.StringValue("a")}),
						TerminationGracePeriod: types.Int64Value(apiv1.DefaultTerminationGracePeriodSeconds),
					},
				},
				RestartRequired: types.BoolValue(false), Status: status,
			},
			UpdatePolicy: types.StringValue(defaultUpdatePolicy),
			Timeouts: timeouts.Value{Object: types.ObjectNull(map[string]attr.Type{
				"create": types.StringType, "update": types.StringType, "delete": types.StringType,
			})},
		}
	}
	config := func(m *vmResourceModel) *vmResourceModel {
		c := *m
		c.ID, c.UID, c.RestartRequired = types.StringNull(), types.StringNull(), types.BoolNull()
		c.Status = types.ObjectNull(statusAttrTypes)
		return &c
	}
	// proposed is Terraform's proposed new state: the configuration, and
	// the prior state's values where the configuration has none.
	proposed := func(prior, cfg *vmResourceModel) *vmResourceModel {
		p := *cfg
		p.ID, p.UID, p.RestartRequired, p.Status = prior.ID, prior.UID, prior.RestartRequired, prior.Status
		return &p
	}
	plan := func(prior, cfg *vmResourceModel) (planned, priorRaw tftypes.Value) {
		t.Helper()
		priorRaw = raw(prior)
		resp, err := srv.PlanResourceChange(ctx, &tfprotov6.PlanResourceChangeRequest{
			TypeName:         "virtplane_virtual_machine",
			PriorState:       dyn(priorRaw),
			ProposedNewState: dyn(raw(proposed(prior, cfg))),
			Config:           dyn(raw(cfg)),
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range resp.Diagnostics {
			if d.Severity == tfprotov6.DiagnosticSeverityError {
				t.Fatalf("plan: %s: %s", d.Summary, d.Detail)
			}
		}
		if len(resp.RequiresReplace) > 0 {
			t.Errorf("plan replaces the VM for %v", resp.RequiresReplace)
		}
		planned, err = resp.PlannedState.Unmarshal(typ)
		if err != nil {
			t.Fatal(err)
		}
		return planned, priorRaw
	}

	// Refreshed after the migration: node-b, the configuration unchanged.
	migrated := state("node-b", "160Mi")
	planned, prior := plan(migrated, config(migrated))
	if !planned.Equal(prior) {
		diffs, _ := planned.Diff(prior)
		t.Errorf("a refreshed status.node plans a change: %v", diffs)
	}

	// The control: a real change (memory) plans status anew, so the
	// comparison above would see a status the provider did not keep.
	planned, prior = plan(migrated, config(state("node-b", "192Mi")))
	if planned.Equal(prior) {
		t.Fatal("a memory change planned nothing")
	}
	var m vmResourceModel
	if d := (tfsdk.Plan{Schema: sch, Raw: planned}).Get(ctx, &m); d.HasError() {
		t.Fatal(d)
	}
	if !m.Status.IsUnknown() {
		t.Errorf("with a memory change status is planned as %v, want unknown (known after apply)", m.Status)
	}
}

// A hotpluggable disk added to or removed from a running VM is planned in
// place: the plan says it is plugged or unplugged, with no restart
// warning; a plain disk added still warns of a restart.
func TestModifyPlanHotplug(t *testing.T) {
	state := runningState(t)
	withHot := func(base vmResourceModel, name string, hot bool) vmResourceModel {
		plan := base
		plan.Disks = append(append([]diskModel(nil), base.Disks...), diskModel{
			Name: types.StringValue(name), Bus: types.StringValue("virtio"),
			Persistent: &persistentModel{Size: quantityOf("1Gi"), Hotpluggable: types.BoolValue(hot)},
		})
		plan.Status = types.ObjectUnknown(statusAttrTypes)
		plan.RestartRequired = types.BoolUnknown()
		return plan
	}
	w := warnings(planFor(t, state, withHot(state, "extra", true)))
	if !strings.Contains(w, "Apply changes the disks of running virtual machine prod/web in place: Apply plugs disk extra into the running guest without a restart") ||
		strings.Contains(w, "restart virtual machine") || strings.Contains(w, "Apply restarts") {
		t.Errorf("hotpluggable disk added: %q", w)
	}
	hotState := withHot(state, "extra", true)
	hotState.Status, hotState.RestartRequired = state.Status, state.RestartRequired
	removed := state
	removed.Status = types.ObjectUnknown(statusAttrTypes)
	removed.RestartRequired = types.BoolUnknown()
	if w := warnings(planFor(t, hotState, removed)); !strings.Contains(w, "unplugs disk extra from the running guest") || strings.Contains(w, "Apply restarts") {
		t.Errorf("hotpluggable disk removed: %q", w)
	}
	if w := warnings(planFor(t, state, withHot(state, "cold", false))); !strings.Contains(w, "Apply restarts virtual machine prod/web: Changing disk") || strings.Contains(w, "plugs") {
		t.Errorf("plain disk added: %q", w)
	}
}
