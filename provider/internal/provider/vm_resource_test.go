package provider

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/attr/xattr"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	rschema "github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

func TestVMSchemasDocumentEveryAttribute(t *testing.T) {
	rs := documentedResource(t, NewVMResource())
	ds := documentedDataSource(t, NewVMDataSource())
	documentedDataSource(t, NewVMsDataSource())
	mirrorsResource(t, rs, ds, "update_policy", "wait_for_ip", "source_snapshot")

	ud := rs.Blocks["disk"].(rschema.ListNestedBlock).NestedObject.Blocks["cloud_init"].(rschema.SingleNestedBlock).Attributes["user_data"]
	if !ud.IsSensitive() {
		t.Error("user_data must be sensitive")
	}
}

func TestRestartChanges(t *testing.T) {
	ctx := context.Background()
	base := fullModel(t)
	for _, c := range []struct {
		name string
		edit func(m *vmModel)
		want string
	}{
		{"nothing", func(*vmModel) {}, ""},
		{"memory spelled differently", func(m *vmModel) { m.Memory = quantityOf("1Gi") }, ""},
		{"memory", func(m *vmModel) { m.Memory = quantityOf("2Gi") }, "memory"},
		{"labels, annotations, strategy and grace never restart", func(m *vmModel) {
			m.Labels = types.MapNull(types.StringType)
			m.Annotations = types.MapNull(types.StringType)
			m.RunStrategy = types.StringValue("Halted")
			m.TerminationGracePeriod = types.Int64Value(99)
		}, ""},
		{"default bus spelled out", func(m *vmModel) {
			m.Disks = append([]diskModel(nil), m.Disks...)
			m.Disks[0].Bus = types.StringNull()
		}, ""},
		{"cpu and disk", func(m *vmModel) {
			m.CPU = nil
			m.Disks = m.Disks[:1]
		}, "cpu, disk"},
		{"cloud-init user data", func(m *vmModel) {
			m.Disks = append([]diskModel(nil), m.Disks...)
			m.Disks[2].CloudInit = &cloudInitModel{UserData: types.StringValue("#cloud-config\nx: 1\n"), NetworkData: m.Disks[2].CloudInit.NetworkData}
		}, "disk"},
		{"boot, interface, node_selector", func(m *vmModel) {
			m.Boot = nil
			m.Interfaces = nil
			m.NodeSelector = types.MapNull(types.StringType)
		}, "boot, interface, node_selector"},
		{"a port forward", func(m *vmModel) {
			m.Interfaces = slices.Clone(m.Interfaces)
			m.Interfaces[0].PortForwards = m.Interfaces[0].PortForwards[:1]
		}, "interface"},
		{"a port forward's default spelled out", func(m *vmModel) {
			m.Interfaces = slices.Clone(m.Interfaces)
			m.Interfaces[0].PortForwards = slices.Clone(m.Interfaces[0].PortForwards)
			m.Interfaces[0].PortForwards[0].Protocol = types.StringValue("tcp")
		}, ""},
		{"a VLAN", func(m *vmModel) {
			m.Interfaces = slices.Clone(m.Interfaces)
			m.Interfaces[1].Bridge = &bridgeModel{Name: types.StringValue("br0"), VLAN: types.Int64Null()}
		}, "interface"},
		{"bridge to libvirt network", func(m *vmModel) {
			m.Interfaces = slices.Clone(m.Interfaces)
			m.Interfaces[1].Bridge, m.Interfaces[1].Network = nil, &libvirtNetworkModel{Name: types.StringValue("lan")}
		}, "interface"},
		{"bootloader", func(m *vmModel) {
			m.Boot = nil
			m.Bootloader = &bootloaderModel{EFI: &efiModel{SecureBoot: types.BoolNull()}}
		}, "boot, bootloader"},
	} {
		t.Run(c.name, func(t *testing.T) {
			plan := base
			c.edit(&plan)
			if got := strings.Join(restartChanges(ctx, &base, &plan), ", "); got != c.want {
				t.Errorf("restartChanges = %q, want %q", got, c.want)
			}
		})
	}
}

func TestQuantitySemanticEquality(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{"1Gi", "1024Mi", true},
		{"0.5Gi", "512Mi", true},
		{"1Gi", "1073741824", true},
		{"1G", "1Gi", false},
		{"1Gi", "2Gi", false},
		{"1GB", "1GB", false}, // invalid values are never equal
	} {
		got, _ := quantityOf(c.a).StringSemanticEquals(ctx, quantityOf(c.b))
		if got != c.want {
			t.Errorf("%s == %s: %v, want %v", c.a, c.b, got, c.want)
		}
	}
}

func TestQuantityValidation(t *testing.T) {
	ctx := context.Background()
	syntax := func(s string) string {
		var resp xattr.ValidateAttributeResponse
		quantityOf(s).ValidateAttribute(ctx, xattr.ValidateAttributeRequest{Path: path.Root("memory")}, &resp)
		if !resp.Diagnostics.HasError() {
			return ""
		}
		return resp.Diagnostics.Errors()[0].Detail()
	}
	for in, want := range map[string]string{
		"512Mi":  "",
		"1G":     "",
		"1GB":    `memory "1GB" is not valid: it must be a Kubernetes quantity such as 512Mi or 1Gi: a number followed by a binary suffix (Ki, Mi, Gi, Ti: powers of 1024) or a decimal one (k, M, G, T: powers of 1000). Did you mean "1Gi"?`,
		"512mb":  `Did you mean "512Mi"?`,
		"2 GiB":  `Did you mean "2Gi"?`,
		"lots":   `memory "lots" is not valid`,
		"1.5TiB": `Did you mean "1.5Ti"?`,
	} {
		got := syntax(in)
		if (want == "") != (got == "") || !strings.Contains(got, want) {
			t.Errorf("%q: got %q, want %q", in, got, want)
		}
	}
	rng := func(v validator.String, s string) string {
		var resp validator.StringResponse
		v.ValidateString(ctx, validator.StringRequest{Path: path.Root("memory"), ConfigValue: types.StringValue(s)}, &resp)
		if !resp.Diagnostics.HasError() {
			return ""
		}
		return resp.Diagnostics.Errors()[0].Detail()
	}
	mem := quantityRange("16Mi", "1Ti")
	for in, want := range map[string]string{
		"16Mi": "", "1Ti": "", "8Mi": "must be at least 16Mi", "2Ti": "must be at most 1Ti",
		"1000.5": "must be at least 16Mi", "16777216.5": "must be a whole number of bytes",
	} {
		if got := rng(mem, in); (want == "") != (got == "") || !strings.Contains(got, want) {
			t.Errorf("memory %q: got %q, want %q", in, got, want)
		}
	}
	if got := rng(quantityRange("", "1Ei"), "0"); !strings.Contains(got, "greater than zero") {
		t.Errorf("size 0: %q", got)
	}
}

func TestQuantityKeepState(t *testing.T) {
	ctx := context.Background()
	run := func(cfg, state string) string {
		req := planmodifier.StringRequest{ConfigValue: types.StringValue(cfg), StateValue: types.StringValue(state), PlanValue: types.StringValue(cfg)}
		resp := planmodifier.StringResponse{PlanValue: req.PlanValue}
		quantityKeepState().PlanModifyString(ctx, req, &resp)
		return resp.PlanValue.ValueString()
	}
	if got := run("1024Mi", "1Gi"); got != "1Gi" {
		t.Errorf("equal quantity planned %q, want the state's 1Gi", got)
	}
	if got := run("2Gi", "1Gi"); got != "2Gi" {
		t.Errorf("changed quantity planned %q", got)
	}
}

func TestEnumValidator(t *testing.T) {
	ctx := context.Background()
	check := func(v string) string {
		var resp validator.StringResponse
		oneOf(apiv1.RunStrategies()...).ValidateString(ctx, validator.StringRequest{Path: path.Root("run_strategy"), ConfigValue: types.StringValue(v)}, &resp)
		if !resp.Diagnostics.HasError() {
			return ""
		}
		e := resp.Diagnostics.Errors()[0]
		return e.Summary() + ": " + e.Detail()
	}
	if got := check("Always"); got != "" {
		t.Errorf("Always refused: %s", got)
	}
	want := `Invalid run_strategy: run_strategy must be one of "Always", "RerunOnFailure", "Manual", "Halted", "Once" (case-sensitive), got "always". Did you mean "Always"?`
	if got := check("always"); got != want {
		t.Errorf("always:\n got %s\nwant %s", got, want)
	}
	if got := check("Sometimes"); strings.Contains(got, "Did you mean") || !strings.Contains(got, `got "Sometimes"`) {
		t.Errorf("Sometimes: %s", got)
	}
}

func TestOtherValidators(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		v    validator.String
		in   string
		want bool
	}{
		{dnsLabelValidator(), "web-1", true},
		{dnsLabelValidator(), "Web", false},
		{dnsLabelValidator(), "a_b", false},
		{macValidator(), "02:00:00:00:00:01", true},
		{macValidator(), "01:00:00:00:00:01", false},
		{macValidator(), "00:00:00:00:00:00", false},
		{macValidator(), "nope", false},
		{imagePathValidator(), "debian/12.qcow2", true},
		{imagePathValidator(), "../etc/passwd", false},
		{imagePathValidator(), "/images/abs.qcow2", true}, // the agent decides
		{imagePathValidator(), "", false},
	} {
		if got, _ := validString(c.v, c.in); got != c.want {
			t.Errorf("%q (%s) = %v, want %v", c.in, c.v.Description(ctx), got, c.want)
		}
	}
	labels := func(m map[string]string) bool {
		var resp validator.MapResponse
		labelMapValidator().ValidateMap(ctx, validator.MapRequest{Path: path.Root("labels"), ConfigValue: mustMap(t, m)}, &resp)
		return !resp.Diagnostics.HasError()
	}
	if !labels(map[string]string{"app": "web", "example.com/tier": "db"}) {
		t.Error("valid labels refused")
	}
	if labels(map[string]string{"bad key": "x"}) || labels(map[string]string{"k": "bad value!"}) {
		t.Error("invalid labels accepted")
	}
}

// planFor runs ModifyPlan on state → plan and returns the response.
func planFor(t *testing.T, state, plan vmResourceModel) resource.ModifyPlanResponse {
	t.Helper()
	ctx := context.Background()
	var sr resource.SchemaResponse
	NewVMResource().Schema(ctx, resource.SchemaRequest{}, &sr)
	st := tfsdk.State{Schema: sr.Schema}
	if d := st.Set(ctx, &state); d.HasError() {
		t.Fatal(d)
	}
	pl := tfsdk.Plan{Schema: sr.Schema}
	if d := pl.Set(ctx, &plan); d.HasError() {
		t.Fatal(d)
	}
	resp := resource.ModifyPlanResponse{Plan: pl}
	(&vmResource{}).ModifyPlan(ctx, resource.ModifyPlanRequest{State: st, Plan: pl}, &resp)
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
