package nodeagent

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/fake"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/nodedir"
)

func hotVolume(name, size string) (*apiv1.Disk, *apiv1.Volume) {
	return &apiv1.Disk{Name: name, Disk: &apiv1.DiskTarget{Bus: "virtio"}},
		&apiv1.Volume{Name: name, Persistent: &apiv1.PersistentVolume{Size: size, Hotpluggable: true}}
}

func addHotVolume(name, size string) func(v *apiv1.VirtualMachineInstance) {
	return func(v *apiv1.VirtualMachineInstance) {
		d, vol := hotVolume(name, size)
		v.Spec.Domain.Devices.Disks = append(v.Spec.Domain.Devices.Disks, d)
		v.Spec.Volumes = append(v.Spec.Volumes, vol)
	}
}

func dropVolume(name string) func(v *apiv1.VirtualMachineInstance) {
	return func(v *apiv1.VirtualMachineInstance) {
		var disks []*apiv1.Disk
		var vols []*apiv1.Volume
		for i, d := range v.Spec.Domain.Devices.Disks {
			if d.Name != name {
				disks, vols = append(disks, d), append(vols, v.Spec.Volumes[i])
			}
		}
		v.Spec.Domain.Devices.Disks, v.Spec.Volumes = disks, vols
	}
}

func (h *harness) volumeStatus(name string) map[string]*apiv1.VolumeStatus {
	out := map[string]*apiv1.VolumeStatus{}
	for _, s := range h.getVMI(name).GetStatus().GetVolumeStatus() {
		out[s.GetName()] = s
	}
	return out
}

// A hotpluggable volume the instance starts with is Ready in its status
// from the first Running write on; one added to the running instance's
// spec is made on the node and plugged in by its launcher without a new
// Sync (no restart, the same domain); one removed is unplugged, and its
// file stays with the VM.
func TestHotplugPlugsAndUnplugs(t *testing.T) {
	h := newHarness(t)
	a := h.directAgent()
	vmUID := testUID("vm-hot")
	h.startVMI(a, "hp", ownedBy(vmUID), withDataVolume("64Mi"), addHotVolume("boot-hot", "32Mi"))
	dom := domainOf("hp")
	if st := h.volumeStatus("hp"); len(st) != 1 || st["boot-hot"].GetPhase() != apiv1.VolumeReady || st["boot-hot"].GetTarget() != "vdb" {
		t.Fatalf("volume status after the start: %v", st)
	}
	syncs, starts := h.fake.Count("Sync"), mustDomain(t, h, dom).Starts

	h.updateVMI("hp", addHotVolume("extra", "16Mi"))
	h.reconcile(a, "hp")
	if got := h.fake.DiskTargets(dom); got != "data=vda,boot-hot=vdb,extra=vdc" {
		t.Fatalf("domain disks %s; status %v", got, h.volumeStatus("hp"))
	}
	vol := filepath.Join(nodedir.VolumesDir(h.vmDir(vmUID)), "extra.qcow2")
	if _, err := os.Stat(vol); err != nil {
		t.Fatalf("the plugged volume was not made: %v", err)
	}
	if st := h.volumeStatus("hp"); st["extra"].GetPhase() != apiv1.VolumeReady || st["extra"].GetTarget() != "vdc" {
		t.Fatalf("volume status after the plug: %v", st)
	}
	if d := mustDomain(t, h, dom); d.Starts != starts || h.fake.Count("Sync") != syncs+1 {
		// One Sync: the new volume's size changed the sizes the launcher
		// grows disks to; the guest did not start again.
		t.Fatalf("starts %d → %d, syncs %d → %d", starts, d.Starts, syncs, h.fake.Count("Sync"))
	}
	// Settled: the next pass asks the launcher nothing about disks.
	disksCalls := h.fake.Count("Disks")
	h.reconcile(a, "hp")
	if h.fake.Count("Disks") != disksCalls || h.fake.Count("AttachDisk") != 1 {
		t.Fatalf("a settled pass listed disks (%d → %d) or plugged again (%d)", disksCalls, h.fake.Count("Disks"), h.fake.Count("AttachDisk"))
	}

	h.updateVMI("hp", dropVolume("boot-hot"))
	h.reconcile(a, "hp")
	if got := h.fake.DiskTargets(dom); got != "data=vda,extra=vdc" {
		t.Fatalf("domain disks after the unplug %s", got)
	}
	if st := h.volumeStatus("hp"); len(st) != 1 || st["extra"] == nil {
		t.Fatalf("volume status after the unplug: %v", st)
	}
	if _, err := os.Stat(filepath.Join(nodedir.VolumesDir(h.vmDir(vmUID)), "boot-hot.qcow2")); err != nil {
		t.Fatalf("the unplugged volume's file is gone: %v (it is the VM's until the VM is deleted)", err)
	}
}

// A guest that does not release an unplugged disk: the volume shows
// Detaching, then past the detach timeout says the guest does not let it
// go; the unplug is asked once; when the guest releases it, it leaves
// the status.
func TestHotplugDetachTheGuestHolds(t *testing.T) {
	h := newHarness(t)
	a := h.directAgent()
	h.startVMI(a, "hp", ownedBy(testUID("vm-hold")), withDataVolume("64Mi"), addHotVolume("hot", "32Mi"))
	dom := domainOf("hp")
	h.fake.SetHoldUnplugs(dom, true)

	h.updateVMI("hp", dropVolume("hot"))
	if after := h.reconcile(a, "hp"); after <= 0 {
		t.Fatal("a disk detaching is not looked at again")
	}
	st := h.volumeStatus("hp")["hot"]
	if st.GetPhase() != apiv1.VolumeDetaching || st.GetReason() != apiv1.ReasonDetachPending || st.GetTarget() != "vdb" {
		t.Fatalf("volume status while the guest holds it: %v", st)
	}
	h.clock.Step(DefaultDetachTimeout + DefaultDetachWait)
	h.reconcile(a, "hp")
	st = h.volumeStatus("hp")["hot"]
	if st.GetPhase() != apiv1.VolumeDetaching || st.GetReason() != apiv1.ReasonDetachTimeout {
		t.Fatalf("volume status past the detach timeout: %v", st)
	}
	if d := mustDomain(t, h, dom); d.UnplugRequests["hot"] != 1 {
		t.Fatalf("unplug asked %d times, want once", d.UnplugRequests["hot"])
	}

	h.fake.ReleaseDisk(dom, "hot")
	h.reconcile(a, "hp")
	if st := h.volumeStatus("hp"); len(st) != 0 {
		t.Fatalf("volume status after the release: %v", st)
	}
	if h.phase("hp") != apiv1.PhaseRunning {
		t.Fatalf("phase %s", h.phase("hp"))
	}
}

func mustDomain(t *testing.T, h *harness, name string) fake.Domain {
	t.Helper()
	d, ok := h.fake.Domain(name)
	if !ok {
		t.Fatalf("no domain %s", name)
	}
	return d
}

// A disk the guest keeps holding is looked at again later each time (5 s,
// 10 s, 20 s, ... up to 5 minutes), not every 5 s for ever; a change of
// the disks starts the count again.
func TestHotplugRetriesBackOff(t *testing.T) {
	h := newHarness(t)
	a := h.directAgent()
	h.startVMI(a, "hp", ownedBy(testUID("vm-backoff")), withDataVolume("64Mi"), addHotVolume("hot", "32Mi"), addHotVolume("more", "32Mi"))
	dom := domainOf("hp")
	h.fake.SetHoldUnplugs(dom, true)

	h.updateVMI("hp", dropVolume("hot"))
	var got []time.Duration
	for range 9 {
		got = append(got, h.reconcile(a, "hp"))
	}
	want := []time.Duration{5 * time.Second, 10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second,
		160 * time.Second, 5 * time.Minute, 5 * time.Minute, 5 * time.Minute}
	if !slices.Equal(got, want) {
		t.Fatalf("requeues while the guest holds the disk: %v, want %v", got, want)
	}
	h.updateVMI("hp", dropVolume("more"))
	if after := h.reconcile(a, "hp"); after != 5*time.Second {
		t.Fatalf("requeue after the disks changed: %v, want 5s", after)
	}
}
