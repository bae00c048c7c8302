package nodeagent

import (
	"path/filepath"
	"testing"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/nodedir"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

func withDataVolume(size string) vmiOption {
	return withVolumes([]*apiv1.Disk{{Name: "data", Disk: &apiv1.DiskTarget{Bus: "virtio"}}},
		[]*apiv1.Volume{{Name: "data", Persistent: &apiv1.PersistentVolume{Size: size}}})
}

// A running instance whose persistent volume the VM controller grew is
// synced again, once, with the new size, which its launcher grows the disk
// to; the file is not touched behind the running QEMU. The next instance
// of the VM, with a size raised while it was stopped, finds its volume
// grown before its domain starts.
func TestVolumesGrowOnlineAndBeforeStart(t *testing.T) {
	h := newHarness(t)
	a := h.directAgent()
	vm := ownedBy(testUID("vm-grow"))
	h.startVMI(a, "g", vm, withDataVolume("1Gi"))
	dom := apiv1.DomainName("default", "g")
	vol := filepath.Join(nodedir.VolumesDir(h.vmDir(testUID("vm-grow"))), "data.qcow2")
	virtualSize := func() int64 {
		n, _ := fakeVirtualSizes.Load(vol)
		v, _ := n.(int64)
		return v
	}
	diskSize := func() int64 {
		d, _ := h.fake.Domain(dom)
		return d.DiskSizes["data"]
	}
	if h.phase("g") != apiv1.PhaseRunning || diskSize() != 1<<30 || virtualSize() != 1<<30 {
		t.Fatalf("phase %s, disk %d, volume %d", h.phase("g"), diskSize(), virtualSize())
	}
	syncs := h.fake.Count("Sync")

	h.updateVMI("g", func(v *apiv1.VirtualMachineInstance) { v.Spec.Volumes[0].Persistent.Size = "2Gi" })
	h.reconcile(a, "g")
	if got := h.fake.Count("Sync"); got != syncs+1 {
		t.Fatalf("%d syncs after the growth, want %d", got, syncs+1)
	}
	if diskSize() != 2<<30 || virtualSize() != 1<<30 {
		t.Fatalf("online: disk %d (want %d), volume file %d (want it left to QEMU: %d)", diskSize(), 2<<30, virtualSize(), 1<<30)
	}
	h.reconcile(a, "g")
	if got := h.fake.Count("Sync"); got != syncs+1 || h.phase("g") != apiv1.PhaseRunning {
		t.Fatalf("synced again for nothing: %d syncs, phase %s", got, h.phase("g"))
	}

	// The instance ends; the next one asks for more.
	h.fake.SetDomainState(dom, stateShutoff, "Shutdown")
	h.reconcile(a, "g")
	h.deleteVMI("g")
	h.reconcile(a, "g")
	h.updateVMI("g", func(v *apiv1.VirtualMachineInstance) { v.Metadata.Finalizers = nil })
	testutil.Eventually(t, waitTimeout, "old VMI gone", func() bool { _, err := h.stores.VMIs.Get(h.ctx, "default", "g"); return err != nil })
	h.startVMI(a, "g", vm, withDataVolume("4Gi"))
	if h.phase("g") != apiv1.PhaseRunning || virtualSize() != 4<<30 {
		t.Fatalf("second instance: phase %s, volume %d, want %d grown before the start", h.phase("g"), virtualSize(), 4<<30)
	}
}
