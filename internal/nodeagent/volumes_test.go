package nodeagent

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/disks"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/disks/diskstest"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/nodedir"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// ownedBy makes the VMI an instance of VM uid vmUID.
func ownedBy(vmUID string) vmiOption {
	return func(v *apiv1.VirtualMachineInstance) {
		v.Metadata.OwnerReferences = []*apiv1.OwnerReference{{Kind: apiv1.KindVirtualMachine, Name: v.Metadata.Name, Uid: vmUID, Controller: true}}
	}
}

func withVolumes(disks []*apiv1.Disk, vols []*apiv1.Volume) vmiOption {
	return func(v *apiv1.VirtualMachineInstance) {
		v.Spec.Domain.Devices.Disks = disks
		v.Spec.Volumes = vols
	}
}

// provisioningProbe records the VMI's Provisioning condition as the
// volume is being created.
type provisioningProbe struct {
	fakeImages
	h    *harness
	seen []*apiv1.Condition
}

func (p *provisioningProbe) CreateBlank(ctx context.Context, path string, size int64) error {
	p.seen = append(p.seen, apiv1.FindCondition(p.h.getVMI("pv").GetStatus().GetConditions(), apiv1.ConditionProvisioning))
	return p.fakeImages.CreateBlank(ctx, path, size)
}

func TestPersistentVolumeKeptAcrossInstancesAndRemovedWithVM(t *testing.T) {
	h := newHarness(t)
	probe := &provisioningProbe{h: h}
	a := h.directAgent(func(o *Options) { o.Images = probe })
	devices := []*apiv1.Disk{{Name: "data", Disk: &apiv1.DiskTarget{Bus: "virtio"}}, {Name: "seed", Cdrom: &apiv1.CDRomTarget{Bus: "sata"}}}
	vols := []*apiv1.Volume{
		{Name: "data", Persistent: &apiv1.PersistentVolume{Size: "1Gi"}},
		{Name: "seed", CloudInitNoCloud: &apiv1.CloudInitNoCloud{UserData: "#cloud-config\n"}},
	}
	vmi := h.startVMI(a, "pv", ownedBy(testUID("vm-1")), withVolumes(devices, vols))
	if got := h.phase("pv"); got != apiv1.PhaseRunning {
		t.Fatalf("phase %s, status %v", got, h.getVMI("pv").GetStatus())
	}
	if len(probe.seen) != 1 || probe.seen[0].GetStatus() != apiv1.ConditionTrue || !strings.Contains(probe.seen[0].GetMessage(), `"data"`) {
		t.Errorf("while the volume was created the VMI showed Provisioning %v, want True naming the volume", probe.seen)
	}
	if c := apiv1.FindCondition(h.getVMI("pv").Status.Conditions, apiv1.ConditionProvisioning); c != nil {
		t.Errorf("Provisioning condition left after start: %v", c)
	}
	vol := filepath.Join(nodedir.VolumesDir(h.vmDir(testUID("vm-1"))), "data.qcow2")
	if b, err := os.ReadFile(vol); err != nil || string(b) != "blank 1073741824" {
		t.Fatalf("persistent volume %s: %q, %v", vol, b, err)
	}
	iso := filepath.Join(nodedir.DisksDir(h.vmiDir(vmi.Metadata.Uid)), "seed.iso")
	if b, err := os.ReadFile(iso); err != nil || !bytes.Contains(b, []byte("CIDATA")) && !bytes.Contains(b, []byte("cidata")) {
		t.Fatalf("cloud-init ISO %s: %v", iso, err)
	}
	if m, err := nodedir.ReadVMMeta(h.vmDir(testUID("vm-1"))); err != nil || m.Name != "pv" || m.UID != testUID("vm-1") {
		t.Fatalf("vm.json: %+v %v", m, err)
	}

	// The guest writes; the instance ends; the volume stays.
	if err := os.WriteFile(vol, []byte("guest data"), 0o600); err != nil {
		t.Fatal(err)
	}
	h.fake.SetDomainState(apiv1.DomainName("default", "pv"), stateShutoff, "Shutdown")
	h.reconcile(a, "pv")
	h.deleteVMI("pv")
	h.reconcile(a, "pv")
	if h.record("pv") != nil {
		t.Fatal("record kept after cleanup")
	}
	if b, _ := os.ReadFile(vol); string(b) != "guest data" {
		t.Fatalf("volume after the instance ended: %q", b)
	}

	// A new instance of the same VM gets the same volume, not a new one.
	h.updateVMI("pv", func(v *apiv1.VirtualMachineInstance) { v.Metadata.Finalizers = nil })
	testutil.Eventually(t, waitTimeout, "old VMI gone", func() bool { _, err := h.stores.VMIs.Get(h.ctx, "default", "pv"); return err != nil })
	h.startVMI(a, "pv", ownedBy(testUID("vm-1")), withVolumes(devices, vols))
	if b, _ := os.ReadFile(vol); string(b) != "guest data" {
		t.Fatalf("second instance replaced the volume: %q", b)
	}

	// A VM of the same name but another uid is not this VM: once the
	// instance is gone, the collector removes the old VM's directory.
	vm := &apiv1.VirtualMachine{Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: "pv"}, Spec: &apiv1.VirtualMachineSpec{}}
	created, err := h.stores.VMs.Create(h.ctx, vm)
	if err != nil {
		t.Fatal(err)
	}
	if created.Metadata.Uid == testUID("vm-1") {
		t.Fatal("the store reused the uid")
	}
	dir := h.vmDir(testUID("vm-1"))
	a.gcVMDirs(h.ctx)
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("directory removed while an instance of its VM is on the node: %v", err)
	}
	if err := h.db.DeleteVMI(h.record("pv").UID); err != nil { // as if the instance were gone
		t.Fatal(err)
	}
	a.gcVMDirs(h.ctx)
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("directory of a replaced VM kept: %v", err)
	}
}

func TestVMDirCollectorKeepsExistingVMs(t *testing.T) {
	h := newHarness(t)
	a := h.directAgent()
	vm, err := h.stores.VMs.Create(h.ctx, &apiv1.VirtualMachine{Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: "keep"}, Spec: &apiv1.VirtualMachineSpec{}})
	if err != nil {
		t.Fatal(err)
	}
	mk := func(uid, name string) string {
		dir := h.vmDir(uid)
		if err := os.MkdirAll(nodedir.VolumesDir(dir), 0o700); err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(nodedir.VMMeta{Namespace: "default", Name: name, UID: uid})
		if err := os.WriteFile(filepath.Join(dir, nodedir.VMMetaFile), b, 0o600); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	kept := mk(vm.Metadata.Uid, "keep")
	gone := mk(testUID("deleted"), "deleted")
	noMeta := h.vmDir(testUID("no-meta"))
	if err := os.MkdirAll(noMeta, 0o700); err != nil {
		t.Fatal(err)
	}
	// Not named by a uid: not the layout's, whatever its vm.json says.
	notUID := filepath.Join(h.layout().VMsDir(), "not-a-uid")
	if err := os.MkdirAll(notUID, 0o700); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(nodedir.VMMeta{Namespace: "default", Name: "deleted", UID: "not-a-uid"})
	if err := os.WriteFile(filepath.Join(notUID, nodedir.VMMetaFile), b, 0o600); err != nil {
		t.Fatal(err)
	}
	a.gcVMDirs(h.ctx)
	if _, err := os.Stat(kept); err != nil {
		t.Errorf("directory of an existing VM removed: %v", err)
	}
	if _, err := os.Stat(gone); !os.IsNotExist(err) {
		t.Errorf("directory of a deleted VM kept: %v", err)
	}
	if _, err := os.Stat(noMeta); err != nil {
		t.Errorf("directory without vm.json removed: %v", err)
	}
	if _, err := os.Stat(notUID); err != nil {
		t.Errorf("directory not named by a uid removed: %v", err)
	}

	// Deleting the VM lets the next pass remove its directory.
	if _, _, err := h.stores.VMs.Delete(h.ctx, "default", "keep", store.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	a.gcVMDirs(h.ctx)
	if _, err := os.Stat(kept); !os.IsNotExist(err) {
		t.Errorf("directory of a just-deleted VM kept: %v", err)
	}
}

func TestPersistentVolumeErrorWaitsAndRetries(t *testing.T) {
	h := newHarness(t)
	a := h.directAgent()
	devices := []*apiv1.Disk{{Name: "root", Disk: &apiv1.DiskTarget{}}}
	vols := []*apiv1.Volume{{Name: "root", Persistent: &apiv1.PersistentVolume{Size: "16", Image: "os.img"}}}
	h.createVMI("dv", ownedBy(testUID("vm-2")), withVolumes(devices, vols))
	h.synced(a, "dv")
	if _, err := a.Reconcile(h.ctx, "default/dv"); err == nil {
		t.Fatal("no error for a missing image")
	}
	v := h.getVMI("dv")
	c := apiv1.FindCondition(v.Status.Conditions, apiv1.ConditionSynchronized)
	if v.Status.Phase != apiv1.PhaseScheduled || c.GetReason() != apiv1.ReasonDataVolumeError || !strings.Contains(c.GetMessage(), "os.img") {
		t.Fatalf("phase %s, condition %v", v.Status.Phase, c)
	}
	if h.fake.Count("Launch") != 0 {
		t.Error("a launcher was started without its volume")
	}

	// An image larger than the requested size (rounded up to a whole
	// sector, as the volume is made) is refused with both sizes.
	if err := os.WriteFile(filepath.Join(h.imageDir, "os.img"), make([]byte, 1024), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Reconcile(h.ctx, "default/dv"); err == nil {
		t.Fatal("no error for a size below the image")
	}
	c = apiv1.FindCondition(h.getVMI("dv").Status.Conditions, apiv1.ConditionSynchronized)
	if c.GetReason() != apiv1.ReasonDataVolumeError || !strings.Contains(c.GetMessage(), "below the virtual size") || !strings.Contains(c.GetMessage(), "1024 bytes") {
		t.Fatalf("condition %v", c)
	}

	// Once the image fits, the retry provisions and starts the guest.
	if err := os.WriteFile(filepath.Join(h.imageDir, "os.img"), make([]byte, 8), 0o644); err != nil {
		t.Fatal(err)
	}
	h.reconcile(a, "dv")
	v = h.getVMI("dv")
	if v.Status.Phase != apiv1.PhaseRunning || apiv1.FindCondition(v.Status.Conditions, apiv1.ConditionSynchronized) != nil {
		t.Fatalf("after the fix: phase %s, conditions %v", v.Status.Phase, v.Status.Conditions)
	}
}

func TestPersistentVolumeWithQemuImg(t *testing.T) {
	diskstest.NeedQemuImg(t)
	h := newHarness(t)
	a := h.directAgent(func(o *Options) { o.Images = disks.QemuImg{} })
	base := filepath.Join(h.imageDir, "base.raw")
	if out, err := exec.Command("qemu-img", "create", "-q", "-f", "raw", base, "1M").CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if err := os.WriteFile(base, bytes.Repeat([]byte{0xAB}, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(base)
	devices := []*apiv1.Disk{{Name: "root", Disk: &apiv1.DiskTarget{}}, {Name: "blank", Disk: &apiv1.DiskTarget{Bus: "scsi"}}}
	vols := []*apiv1.Volume{
		{Name: "root", Persistent: &apiv1.PersistentVolume{Size: "4Mi", Image: "base.raw"}},
		{Name: "blank", Persistent: &apiv1.PersistentVolume{Size: "2Gi"}},
	}
	h.startVMI(a, "q", ownedBy(testUID("vm-q")), withVolumes(devices, vols))
	info := func(p string) disks.ImageInfo {
		t.Helper()
		i, err := disks.QemuImg{}.Info(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		return i
	}
	dir := nodedir.VolumesDir(h.vmDir(testUID("vm-q")))
	if i := info(filepath.Join(dir, "root.qcow2")); i.Format != "qcow2" || i.VirtualSize != 4<<20 {
		t.Errorf("copied volume: %+v", i)
	}
	if i := info(filepath.Join(dir, "blank.qcow2")); i.Format != "qcow2" || i.VirtualSize != 2<<30 {
		t.Errorf("blank volume: %+v", i)
	}
	out, err := exec.Command("qemu-img", "compare", "-U", "-f", "raw", "-F", "qcow2", base, filepath.Join(dir, "root.qcow2")).CombinedOutput()
	if err != nil {
		t.Errorf("copy differs from the image: %v: %s", err, out)
	}
	if after, _ := os.ReadFile(base); !bytes.Equal(before, after) {
		t.Error("the base image changed")
	}
}
