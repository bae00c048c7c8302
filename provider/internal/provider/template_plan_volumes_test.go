package provider

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
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
func TestRefuseVolumeClassChangesInPool(t *testing.T) {
	state := fullInstanceSpec(t)
	plan := withClass(state, 0, types.StringValue("local"))
	var diags diag.Diagnostics
	if !refuseVolumeClassChanges(context.Background(), &diags, &state, &plan, path.Root("virtual_machine_template")) {
		t.Fatal("not refused")
	}
	e := diags.Errors()[0]
	if p := e.(interface{ Path() path.Path }).Path().String(); p != "virtual_machine_template.disk[0].persistent.storage_class" ||
		!strings.Contains(e.Detail(), "may not change from ceph to local") {
		t.Errorf("refused on %s: %s", p, e.Detail())
	}
}
