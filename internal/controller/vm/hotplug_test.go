package vm

import (
	"testing"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// hotplugFixture is a VM whose template edit changes, and its Running
// instance made from the template before the edit: disk "data" (plain
// persistent) and "hot1" (hotpluggable).
func hotplugFixture(t *testing.T, edit func(tmpl *apiv1.VirtualMachineInstanceSpec), vmiEdit func(vmi *apiv1.VirtualMachineInstance)) *fixture {
	t.Helper()
	spec := func() (*apiv1.Devices, []*apiv1.Volume) {
		return &apiv1.Devices{Disks: []*apiv1.Disk{{Name: "data"}, {Name: "hot1", Disk: &apiv1.DiskTarget{Bus: "scsi"}}}},
			[]*apiv1.Volume{
				{Name: "data", Persistent: &apiv1.PersistentVolume{Size: "64Mi"}},
				{Name: "hot1", Persistent: &apiv1.PersistentVolume{Size: "64Mi", Hotpluggable: true}},
			}
	}
	vm := newVM("Always")
	vm.Spec.Template.Spec.Domain.Devices, vm.Spec.Template.Spec.Volumes = spec()
	vm.Status.NodeName = "node-a"
	if edit != nil {
		edit(vm.Spec.Template.Spec)
	}
	vmi := newVMI(apiv1.PhaseRunning, true)
	vmi.Spec.Domain.Memory = vm.Spec.Template.Spec.Domain.Memory
	vmi.Spec.Domain.Devices, vmi.Spec.Volumes = spec()
	vmi.Spec.NodeSelector = map[string]string{apiv1.LabelNodeName: "node-a"}
	vmi.Status.NodeName = "node-a"
	if vmiEdit != nil {
		vmiEdit(vmi)
	}
	return newFixture(t, vm, vmi)
}

func instanceDisks(t *testing.T, f *fixture) []string {
	t.Helper()
	spec := f.vmis.Get(t, "default", "web").GetSpec()
	var out []string
	for i, d := range spec.GetDomain().GetDevices().GetDisks() {
		if v := spec.GetVolumes()[i]; v.GetName() != d.GetName() {
			t.Fatalf("instance disk %d is %s, its volume %s", i, d.GetName(), v.GetName())
		}
		out = append(out, d.GetName())
	}
	return out
}

func addHot(tmpl *apiv1.VirtualMachineInstanceSpec, name string) {
	tmpl.Domain.Devices.Disks = append([]*apiv1.Disk{{Name: name}}, tmpl.Domain.Devices.Disks...)
	tmpl.Volumes = append([]*apiv1.Volume{{Name: name, Persistent: &apiv1.PersistentVolume{Size: "32Mi", Hotpluggable: true}}}, tmpl.Volumes...)
}

func drop(tmpl *apiv1.VirtualMachineInstanceSpec, name string) {
	disks, vols := tmpl.Domain.Devices.Disks[:0], tmpl.Volumes[:0]
	for i, d := range tmpl.Domain.Devices.Disks {
		if d.Name != name {
			disks, vols = append(disks, d), append(vols, tmpl.Volumes[i])
		}
	}
	tmpl.Domain.Devices.Disks, tmpl.Volumes = disks, vols
}

// A hotpluggable disk added to the template (anywhere in its list) and
// one removed reach the running instance in one write, and are no reason
// for a restart, before or after the write: the same instance (uid) keeps
// running.
func TestHotplugCarriedToRunningInstance(t *testing.T) {
	f := hotplugFixture(t, func(tmpl *apiv1.VirtualMachineInstanceSpec) {
		addHot(tmpl, "hot2")
		drop(tmpl, "hot1")
	}, nil)
	uid := f.vmis.Get(t, "default", "web").GetMetadata().GetUid()
	f.reconcile(t)
	if got := instanceDisks(t, f); len(got) != 2 || got[0] != "data" || got[1] != "hot2" {
		t.Fatalf("instance disks %v, want [data hot2]", got)
	}
	if ws := f.vmis.Store.Writes(); len(ws) != 1 || ws[0].Op != "update" {
		t.Fatalf("instance writes %v, want one update", ws)
	}
	if restartRequired(t, f) {
		t.Fatal("RestartRequired while the hotplug was being applied")
	}
	f.refresh()
	f.vmis.Store.ResetWrites()
	f.reconcile(t)
	if restartRequired(t, f) || len(f.vmis.Store.Writes()) != 0 {
		t.Fatalf("after the hotplug: RestartRequired %v, instance writes %v", restartRequired(t, f), f.vmis.Store.Writes())
	}
	if got := f.vmis.Get(t, "default", "web").GetMetadata().GetUid(); got != uid {
		t.Fatalf("instance uid %s, want %s: a hotplug is no restart", got, uid)
	}
}

// Removing or adding a disk that is not hotpluggable still needs a
// restart; a hotpluggable one changed beside it is plugged all the same.
func TestNonHotpluggableDiskChangeNeedsRestart(t *testing.T) {
	f := hotplugFixture(t, func(tmpl *apiv1.VirtualMachineInstanceSpec) { drop(tmpl, "data") }, nil)
	f.reconcile(t)
	if !restartRequired(t, f) || len(f.vmis.Store.Writes()) != 0 {
		t.Fatalf("plain disk removed: RestartRequired %v, instance writes %v", restartRequired(t, f), f.vmis.Store.Writes())
	}

	f = hotplugFixture(t, func(tmpl *apiv1.VirtualMachineInstanceSpec) {
		drop(tmpl, "data")
		addHot(tmpl, "hot2")
	}, nil)
	f.reconcile(t)
	if !restartRequired(t, f) {
		t.Fatal("plain disk removed beside a hotplug: no RestartRequired")
	}
	if got := instanceDisks(t, f); len(got) != 3 || got[2] != "hot2" {
		t.Fatalf("instance disks %v, want data, hot1, hot2: the hotplug applies anyway", got)
	}

	f = hotplugFixture(t, func(tmpl *apiv1.VirtualMachineInstanceSpec) {
		tmpl.Domain.Devices.Disks[1].Disk.Bus = "virtio"
	}, nil)
	f.reconcile(t)
	if !restartRequired(t, f) || len(f.vmis.Store.Writes()) != 0 {
		t.Fatalf("hotpluggable disk's bus changed: RestartRequired %v, instance writes %v", restartRequired(t, f), f.vmis.Store.Writes())
	}
}

// During a live migration the instance keeps its disks (the target made
// what the instance had); the hotplug waits for the migration's end.
func TestHotplugWaitsForMigration(t *testing.T) {
	f := hotplugFixture(t, func(tmpl *apiv1.VirtualMachineInstanceSpec) { addHot(tmpl, "hot2") },
		func(vmi *apiv1.VirtualMachineInstance) {
			vmi.Status.MigrationState = &apiv1.MigrationState{MigrationUid: "mig-1", SourceNode: "node-a", TargetNode: "node-b"}
		})
	f.reconcile(t)
	if ws := f.vmis.Store.Writes(); len(ws) != 0 {
		t.Fatalf("instance written during a migration: %v", ws)
	}
	if restartRequired(t, f) {
		t.Fatal("RestartRequired for a hotplug waiting on a migration")
	}
	vmi := f.vmis.Get(t, "default", "web")
	vmi.Status.MigrationState.Completed = true
	f = newFixture(t, f.vm(t), vmi)
	f.reconcile(t)
	if got := instanceDisks(t, f); len(got) != 3 || got[2] != "hot2" {
		t.Fatalf("after the migration: instance disks %v", got)
	}
}
