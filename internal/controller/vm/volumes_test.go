package vm

import (
	"testing"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

func withPersistentVolume(vm *apiv1.VirtualMachine) *apiv1.VirtualMachine {
	s := vm.Spec.Template.Spec
	s.Domain.Devices = &apiv1.Devices{Disks: []*apiv1.Disk{{Name: "data"}}}
	s.Volumes = []*apiv1.Volume{{Name: "data", Persistent: &apiv1.PersistentVolume{Size: "1Gi"}}}
	return vm
}

// A VM with persistent volumes records the node its instance was placed
// on at once, and later instances are pinned there.
func TestPersistentVolumesPinTheVMToItsNode(t *testing.T) {
	vmi := newVMI(apiv1.PhaseScheduled, false)
	vmi.Status.NodeName = "node-a"
	f := newFixture(t, withPersistentVolume(newVM("Always")), vmi)
	f.reconcile(t)
	if got := f.vm(t).Status.NodeName; got != "node-a" {
		t.Fatalf("status.node_name = %q, want node-a", got)
	}

	// The instance ends and is replaced: the new one must go to node-a.
	vm := f.vm(t)
	f = newFixture(t, vm, nil)
	f.reconcile(t)
	ws := f.vmis.Store.Writes()
	if len(ws) != 1 || ws[0].Op != "create" {
		t.Fatalf("writes %v", ws)
	}
	if sel := ws[0].Object.Spec.NodeSelector; sel[apiv1.LabelNodeName] != "node-a" {
		t.Fatalf("node selector %v, want %s=node-a", sel, apiv1.LabelNodeName)
	}
}

// Without persistent volumes placement alone costs no VM write, and the
// next instance may go anywhere.
func TestNodeNameRidesAlongWithoutPersistentVolumes(t *testing.T) {
	vmi := newVMI(apiv1.PhaseScheduled, false)
	f := newFixture(t, newVM("Always"), vmi)
	f.reconcile(t) // converge on the unplaced instance
	vmi.Status.NodeName = "node-a"
	f = newFixture(t, f.vm(t), vmi)
	f.reconcile(t)
	if ws := f.vms.Store.Writes(); len(ws) != 0 {
		t.Fatalf("placement cost a VM write: %v", ws)
	}

	vmi.Status.Phase = apiv1.PhaseRunning
	f = newFixture(t, f.vm(t), vmi)
	f.reconcile(t)
	if got := f.vm(t).Status; got.NodeName != "node-a" || got.PrintableStatus != apiv1.PrintableRunning {
		t.Fatalf("status %v", got)
	}
	f = newFixture(t, f.vm(t), nil)
	f.reconcile(t)
	if ws := f.vmis.Store.Writes(); len(ws) != 1 || len(ws[0].Object.Spec.NodeSelector) != 0 {
		t.Fatalf("new instance: %v", ws)
	}
}
