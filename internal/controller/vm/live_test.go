package vm

import (
	"testing"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// growFixture is a VM whose template's volume "data" has size tmplSize and
// memory tmplMemory, and its Running instance, made from the template
// when the volume was 64Mi.
func growFixture(t *testing.T, tmplSize, tmplMemory string, edit func(vmi *apiv1.VirtualMachineInstance)) *fixture {
	t.Helper()
	vm := withPersistentVolume(newVM("Always"))
	vm.Spec.Template.Spec.Volumes[0].Persistent.Size = tmplSize
	vm.Spec.Template.Spec.Domain.Memory.Guest = tmplMemory
	vm.Status.NodeName = "node-a"
	vmi := newVMI(apiv1.PhaseRunning, true)
	vmi.Spec.Domain.Devices = &apiv1.Devices{Disks: []*apiv1.Disk{{Name: "data"}}}
	vmi.Spec.Volumes = []*apiv1.Volume{{Name: "data", Persistent: &apiv1.PersistentVolume{Size: "64Mi"}}}
	vmi.Spec.NodeSelector = map[string]string{apiv1.LabelNodeName: "node-a"}
	vmi.Status.NodeName = "node-a"
	if edit != nil {
		edit(vmi)
	}
	return newFixture(t, vm, vmi)
}

func restartRequired(t *testing.T, f *fixture) bool {
	t.Helper()
	return apiv1.IsConditionTrue(f.vm(t).GetStatus().GetConditions(), apiv1.ConditionRestartRequired)
}

func instanceVolumeSize(t *testing.T, f *fixture) string {
	t.Helper()
	return f.vmis.Get(t, "default", "web").GetSpec().GetVolumes()[0].GetPersistent().GetSize()
}

// Raising a persistent volume's size reaches the running instance in one
// write, without a restart, and is never a reason for one: not before the
// write (the VM's status is written first in the same pass), not after.
func TestGrownVolumeCarriedToRunningInstance(t *testing.T) {
	f := growFixture(t, "128Mi", "128Mi", nil)
	f.reconcile(t)
	if got := instanceVolumeSize(t, f); got != "128Mi" {
		t.Fatalf("instance volume size %s, want 128Mi", got)
	}
	if ws := f.vmis.Store.Writes(); len(ws) != 1 || ws[0].Op != "update" || ws[0].Object.GetMetadata().GetDeletionTimestamp() != nil {
		t.Fatalf("instance writes %v, want one update", ws)
	}
	if restartRequired(t, f) {
		t.Fatal("RestartRequired while the growth was being applied")
	}
	f.refresh()
	f.vmis.Store.ResetWrites()
	f.reconcile(t)
	if restartRequired(t, f) || len(f.vmis.Store.Writes()) != 0 {
		t.Fatalf("after the growth: RestartRequired %v, instance writes %v", restartRequired(t, f), f.vmis.Store.Writes())
	}
}

// The eviction strategy and a growth changed together are one write.
func TestLiveChangesInOneWrite(t *testing.T) {
	f := growFixture(t, "1Gi", "128Mi", nil)
	vm := f.vm(t)
	vm.Spec.Template.Spec.EvictionStrategy = apiv1.EvictionStrategyLiveMigrate
	f = newFixture(t, vm, f.vmis.Get(t, "default", "web"))
	f.reconcile(t)
	ws := f.vmis.Store.Writes()
	if len(ws) != 1 {
		t.Fatalf("instance writes %v, want one", ws)
	}
	if s := ws[0].Object.GetSpec(); s.GetEvictionStrategy() != apiv1.EvictionStrategyLiveMigrate || s.GetVolumes()[0].GetPersistent().GetSize() != "1Gi" {
		t.Fatalf("instance spec %v", s)
	}
}

// What a running guest cannot take keeps asking for a restart, and is not
// written into the instance: a smaller volume (a template restored from a
// snapshot may have one), or a growth together with another change, of
// which the growth still applies at once.
func TestRestartRequiredBesidesGrowth(t *testing.T) {
	f := growFixture(t, "32Mi", "128Mi", nil)
	f.reconcile(t)
	if !restartRequired(t, f) || len(f.vmis.Store.Writes()) != 0 {
		t.Fatalf("shrink: RestartRequired %v, instance writes %v", restartRequired(t, f), f.vmis.Store.Writes())
	}

	f = growFixture(t, "128Mi", "256Mi", nil)
	f.reconcile(t)
	if !restartRequired(t, f) {
		t.Fatal("memory changed with the volume: no RestartRequired")
	}
	if got := instanceVolumeSize(t, f); got != "128Mi" {
		t.Fatalf("instance volume size %s, want 128Mi: the growth applies anyway", got)
	}
	if spec := f.vmis.Get(t, "default", "web").GetSpec(); spec.GetDomain().GetMemory().GetGuest() != "128Mi" {
		t.Fatalf("memory written into the running instance: %v", spec.GetDomain().GetMemory())
	}
}

// During a live migration the instance keeps its sizes (the target made
// its volumes at those); the growth waits for the migration's end and is
// no reason for a restart meanwhile.
func TestGrowthWaitsForMigration(t *testing.T) {
	f := growFixture(t, "128Mi", "128Mi", func(vmi *apiv1.VirtualMachineInstance) {
		vmi.Status.MigrationState = &apiv1.MigrationState{MigrationUid: "mig-1", SourceNode: "node-a", TargetNode: "node-b"}
	})
	f.reconcile(t)
	if ws := f.vmis.Store.Writes(); len(ws) != 0 {
		t.Fatalf("instance written during a migration: %v", ws)
	}
	if restartRequired(t, f) {
		t.Fatal("RestartRequired for a growth waiting on a migration")
	}

	vmi := f.vmis.Get(t, "default", "web")
	vmi.Status.MigrationState.Completed = true
	f = newFixture(t, f.vm(t), vmi)
	f.reconcile(t)
	if got := instanceVolumeSize(t, f); got != "128Mi" {
		t.Fatalf("after the migration: instance volume size %s, want 128Mi", got)
	}
}

// An instance pinned to its VM's volumes' node (every instance after the
// first of a VM with persistent volumes) does not differ from a template
// without the pin: before, every restart of such a VM left it with
// RestartRequired for good (the issue's "restart_required: was cty.False,
// but now cty.True"). A pin the template sets itself still counts.
func TestNodePinIsNoTemplateChange(t *testing.T) {
	f := growFixture(t, "64Mi", "128Mi", nil)
	f.reconcile(t)
	if restartRequired(t, f) {
		t.Fatal("RestartRequired for the node pin startVMI added")
	}

	f = growFixture(t, "64Mi", "128Mi", nil)
	vm := f.vm(t)
	vm.Spec.Template.Spec.NodeSelector = map[string]string{apiv1.LabelNodeName: "node-b"}
	f = newFixture(t, vm, f.vmis.Get(t, "default", "web"))
	f.reconcile(t)
	if !restartRequired(t, f) {
		t.Fatal("the template's own node selector changed: no RestartRequired")
	}
}
