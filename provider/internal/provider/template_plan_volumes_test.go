package provider

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// withClass is m with its disks copied and disk i's storage class set to
// class (its persistent block copied too).
func withClass(m instanceSpecModel, i int, class types.String) instanceSpecModel {
	m.Disks = append([]diskModel(nil), m.Disks...)
	p := *m.Disks[i].Persistent
	p.StorageClass = class
	m.Disks[i].Persistent = &p
	return m
}

// A plan that moves a persistent disk to another class is refused on that
// disk's storage_class, through the VM's real ModifyPlan; what the agent
// would take is not.
func TestModifyPlanRefusesStorageClassChange(t *testing.T) {
	state := runningState(t)
	refused := func(plan vmResourceModel) string {
		t.Helper()
		var out []string
		for _, e := range planFor(t, state, plan).Diagnostics.Errors() {
			out = append(out, e.(interface{ Path() path.Path }).Path().String()+": "+e.Detail())
		}
		return strings.Join(out, "\n")
	}
	plan := state
	plan.instanceSpecModel = withClass(state.instanceSpecModel, 0, types.StringValue("nfs"))
	if got := refused(plan); !strings.Contains(got, `disk[0].persistent.storage_class: disk[0].persistent.storage_class "nfs": may not change from ceph to nfs: the volume "root" exists on its class`) {
		t.Errorf("moved to nfs: %q", got)
	}
	plan.instanceSpecModel = withClass(state.instanceSpecModel, 0, types.StringNull())
	if got := refused(plan); !strings.Contains(got, "may not change from ceph to local") {
		t.Errorf("moved to local: %q", got)
	}
	renamed := withClass(state.instanceSpecModel, 0, types.StringValue("nfs"))
	renamed.Disks[0].Name = types.StringValue("root2")
	added := state.instanceSpecModel
	added.Disks = append(append([]diskModel(nil), state.Disks...), diskModel{Name: types.StringValue("more"),
		Bus: types.StringValue("virtio"), BootOrder: types.Int64Null(), Image: types.StringNull(),
		Persistent: &persistentModel{Size: quantityOf("1Gi"), Image: types.StringNull(), StorageClass: types.StringValue("nfs")}})
	for name, spec := range map[string]instanceSpecModel{
		"unchanged":           state.instanceSpecModel,
		"unknown until apply": withClass(state.instanceSpecModel, 0, types.StringUnknown()),
		"renamed: a new disk": renamed,
		"a new disk":          added,
	} {
		plan.instanceSpecModel = spec
		if got := refused(plan); got != "" {
			t.Errorf("%s: refused: %s", name, got)
		}
	}
}

// A pool's template is checked alike, on its virtual_machine_template.
func TestRefuseVolumeUpdatesInPool(t *testing.T) {
	state := fullInstanceSpec(t)
	plan := withClass(state, 0, types.StringValue("local"))
	var diags diag.Diagnostics
	if !refuseVolumeUpdates(context.Background(), &diags, &state, &plan, path.Root("virtual_machine_template")) {
		t.Fatal("not refused")
	}
	e := diags.Errors()[0]
	if p := e.(interface{ Path() path.Path }).Path().String(); p != "virtual_machine_template.disk[0].persistent.storage_class" ||
		!strings.Contains(e.Detail(), "may not change from ceph to local") {
		t.Errorf("refused on %s: %s", p, e.Detail())
	}
}

// poolPlanFor runs the pool resource's real ModifyPlan from state to plan.
func poolPlanFor(t *testing.T, state, plan poolResourceModel) resource.ModifyPlanResponse {
	t.Helper()
	return modifyPlan(t, NewPoolResource(), state, plan)
}

// A pool's template may not shrink a persistent disk nor change its image
// either: the agent refuses both (validation.ValidatePoolUpdate), so the
// plan does, on the pool's attribute, as it does for a VM; growing is
// planned (a rollout).
func TestPoolModifyPlanRefusesVolumeUpdates(t *testing.T) {
	state := poolResourceModel{poolModel: fullPoolModel(t), WaitForReady: types.BoolValue(true),
		Timeouts: timeouts.Value{Object: types.ObjectNull(map[string]attr.Type{"create": types.StringType, "update": types.StringType, "delete": types.StringType})}}
	state.ID, state.UID = types.StringValue("prod/db"), types.StringValue("uid-p")
	state.Status = types.ObjectNull(poolStatusAttrTypes)
	withDisk := func(size, image string) poolResourceModel {
		plan := state
		tmpl := *state.Template
		tmpl.instanceSpecModel = withClass(tmpl.instanceSpecModel, 0, tmpl.Disks[0].Persistent.StorageClass)
		tmpl.Disks[0].Persistent.Size, tmpl.Disks[0].Persistent.Image = quantityOf(size), types.StringValue(image)
		plan.Template = &tmpl
		plan.Status = types.ObjectUnknown(poolStatusAttrTypes)
		return plan
	}
	errorsOf := func(resp resource.ModifyPlanResponse) string {
		var out []string
		for _, e := range resp.Diagnostics.Errors() {
			out = append(out, e.(diag.DiagnosticWithPath).Path().String()+" | "+e.Summary())
		}
		return strings.Join(out, "\n")
	}
	if resp := poolPlanFor(t, state, withDisk("20Gi", "debian.qcow2")); resp.Diagnostics.HasError() {
		t.Errorf("growth refused: %s", errorsOf(resp))
	}
	for _, c := range []struct{ size, image, want string }{
		{"5Gi", "debian.qcow2", "virtual_machine_template.disk[0].persistent.size | Persistent disk cannot shrink"},
		{"10Gi", "ubuntu.qcow2", "virtual_machine_template.disk[0].persistent.image | Persistent disk image cannot change"},
	} {
		if got := errorsOf(poolPlanFor(t, state, withDisk(c.size, c.image))); got != c.want {
			t.Errorf("%s %s:\n got %s\nwant %s", c.size, c.image, got, c.want)
		}
	}
}
