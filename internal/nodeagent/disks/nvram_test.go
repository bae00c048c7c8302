package disks

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/ceph"
	"github.com/virtplane/terraform-provider-virtplane/internal/firmware"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/nodedir"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/state"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/storage"
)

// An EFI guest's NVRAM is named in its VM's directory (made, with its
// vm.json, so that the VM directory collector removes it with the VM),
// or in a bare VMI's own; BIOS and kernel boot get none.
func TestPrepareNVRAMPath(t *testing.T) {
	const vmUID = "5d1e0f2a-0000-4000-8000-0000000000aa"
	layout := nodedir.Layout{Root: t.TempDir()}
	p := New(Options{ImageDir: t.TempDir(), Layout: layout})
	vmDir, err := layout.VMDir(vmUID)
	if err != nil {
		t.Fatal(err)
	}
	vmiDir, err := layout.VMIDir(uid1)
	if err != nil {
		t.Fatal(err)
	}
	efi := &apiv1.Firmware{Bootloader: &apiv1.Bootloader{Efi: &apiv1.EFIBootloader{}}}
	for _, tc := range []struct {
		name  string
		fw    *apiv1.Firmware
		vmUID string
		want  string
	}{
		{"efi VM", efi, vmUID, nodedir.NVRAMPath(vmDir)},
		{"efi bare VMI", efi, "", nodedir.NVRAMPath(vmiDir)},
		{"bios", &apiv1.Firmware{Bootloader: &apiv1.Bootloader{Bios: &apiv1.BIOSBootloader{}}}, vmUID, ""},
		{"default firmware", nil, vmUID, ""},
		{"kernel boot", &apiv1.Firmware{KernelBoot: &apiv1.KernelBoot{Kernel: "vmlinuz"}}, vmUID, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vmi := &apiv1.VirtualMachineInstance{
				Metadata: &apiv1.ObjectMeta{Uid: uid1, Namespace: "default", Name: "vm"},
				Spec:     &apiv1.VirtualMachineInstanceSpec{Domain: &apiv1.DomainSpec{Firmware: tc.fw}},
			}
			rec := &state.VMI{UID: uid1, VMUID: tc.vmUID, Namespace: "default", Name: "vm", Dir: vmiDir}
			opts, err := p.Prepare(context.Background(), vmi, rec)
			if err != nil {
				t.Fatal(err)
			}
			if opts.NvramPath != tc.want {
				t.Errorf("NvramPath = %q, want %q", opts.NvramPath, tc.want)
			}
		})
	}
	m, err := nodedir.ReadVMMeta(vmDir)
	if err != nil || m.UID != vmUID || m.Name != "vm" {
		t.Errorf("VM dir meta = %+v, %v", m, err)
	}
	// The file itself is libvirt's to make from the template.
	if _, err := os.Stat(nodedir.NVRAMPath(vmDir)); !os.IsNotExist(err) {
		t.Errorf("Prepare made the NVRAM file: %v", err)
	}
}

// fakeClasses is the storage room as the disk room sees it.
type fakeClasses map[string]*storage.Class

func (fakeClasses) BeforeStart(context.Context, *storage.Class) {}

func (f fakeClasses) Lookup(_ context.Context, name string) (*storage.Class, error) {
	if c, ok := f[name]; ok {
		return c, nil
	}
	return nil, fmt.Errorf("storage class %q does not exist or does not select this node", name)
}

// An EFI VM whose volumes are all on one shared filesystem class keeps its
// NVRAM in its directory there (the file is libvirt's to create; a
// migration's target only names it), and a VM with volumes on two
// classes keeps it on the node.
func TestPrepareNVRAMOnASharedClass(t *testing.T) {
	const vmUID = "5d1e0f2a-0000-4000-8000-0000000000bb"
	layout := nodedir.Layout{Root: t.TempDir()}
	shared, other := t.TempDir(), t.TempDir()
	class := func(name, path string) *storage.Class {
		return &storage.Class{Name: name, Spec: &apiv1.StorageClass{Spec: &apiv1.StorageClassSpec{
			SharedFilesystem: &apiv1.SharedFilesystemStorage{Path: path}}}}
	}
	p := New(Options{ImageDir: t.TempDir(), Layout: layout, Classes: fakeClasses{"nfs": class("nfs", shared), "nfs2": class("nfs2", other)}})
	vmiDir, err := layout.VMIDir(uid1)
	if err != nil {
		t.Fatal(err)
	}
	vmi := func(classes ...string) *apiv1.VirtualMachineInstance {
		v := &apiv1.VirtualMachineInstance{
			Metadata: &apiv1.ObjectMeta{Uid: uid1, Namespace: "default", Name: "vm"},
			Spec: &apiv1.VirtualMachineInstanceSpec{Domain: &apiv1.DomainSpec{
				Firmware: &apiv1.Firmware{Bootloader: &apiv1.Bootloader{Efi: &apiv1.EFIBootloader{}}}}},
		}
		// Volumes without disks: only the NVRAM is prepared.
		for i, c := range classes {
			v.Spec.Volumes = append(v.Spec.Volumes, &apiv1.Volume{Name: fmt.Sprintf("v%d", i),
				Persistent: &apiv1.PersistentVolume{Size: "1Gi", StorageClass: c}})
		}
		return v
	}
	rec := &state.VMI{UID: uid1, VMUID: vmUID, Namespace: "default", Name: "vm", Dir: vmiDir}
	ctx := context.Background()

	opts, err := p.Prepare(ctx, vmi("nfs", "nfs"), rec)
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(shared, "virtplane", "vms", vmUID, "nvram.fd")
	if opts.NvramPath != want || opts.NvramRbd != nil {
		t.Fatalf("NVRAM %q (rbd %v), want %s", opts.NvramPath, opts.NvramRbd, want)
	}
	if fi, err := os.Stat(filepath.Dir(want)); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o711 {
		t.Fatalf("the VM's directory on the class: %v, %v; want a traversable directory", fi, err)
	}
	if _, err := os.Stat(want); !os.IsNotExist(err) {
		t.Errorf("Prepare made the NVRAM file: %v", err)
	}

	opts, err = p.PrepareIncoming(ctx, vmi("nfs2"), rec)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(other, "virtplane", "vms", vmUID, "nvram.fd"); opts.NvramPath != want {
		t.Fatalf("incoming NVRAM %q, want %s", opts.NvramPath, want)
	}
	if _, err := os.Stat(opts.NvramPath); !os.IsNotExist(err) {
		t.Errorf("a migration's target made the NVRAM file: %v", err)
	}
	// The directory is the VM's, as its volumes' is: another namespace's
	// VM's store is never handed over.
	if _, err := p.Prepare(ctx, func() *apiv1.VirtualMachineInstance {
		v := vmi("nfs")
		v.Metadata.Namespace = "other"
		return v
	}(), rec); err == nil || !strings.Contains(err.Error(), "metadata.owner_references") {
		t.Errorf("another namespace's VM of the same uid: %v, want refused", err)
	}

	vmDir, err := layout.VMDir(vmUID)
	if err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string]*apiv1.VirtualMachineInstance{
		"two classes":       vmi("nfs", "nfs2"),
		"a class and local": vmi("nfs", ""),
	} {
		opts, err := p.Prepare(ctx, v, rec)
		if err != nil || opts.NvramPath != nodedir.NVRAMPath(vmDir) {
			t.Errorf("%s: NVRAM %q, %v; want the node's %s", name, opts.GetNvramPath(), err, nodedir.NVRAMPath(vmDir))
		}
	}

	_, err = p.Prepare(ctx, vmi("gone"), rec)
	var pe *Error
	if !errors.As(err, &pe) || !pe.Retry || pe.Reason != apiv1.ReasonDataVolumeError || !strings.Contains(pe.Error(), "EFI NVRAM (storage class gone)") {
		t.Fatalf("a class the node lacks: %v, want a retried DataVolumeError naming it", err)
	}
}

// A migration's target starts from no NVRAM file of its own: what an
// earlier stint of the VM left on the node holds old variables (QEMU
// writes the source's over it when the guest resumes here; a migration
// that fails before must not leave them for a later start).
func TestPrepareIncomingDropsAStaleNVRAM(t *testing.T) {
	const vmUID = "5d1e0f2a-0000-4000-8000-0000000000cc"
	layout := nodedir.Layout{Root: t.TempDir()}
	p := New(Options{ImageDir: t.TempDir(), Layout: layout})
	vmiDir, err := layout.VMIDir(uid1)
	if err != nil {
		t.Fatal(err)
	}
	vmi := &apiv1.VirtualMachineInstance{
		Metadata: &apiv1.ObjectMeta{Uid: uid1, Namespace: "default", Name: "vm"},
		Spec: &apiv1.VirtualMachineInstanceSpec{Domain: &apiv1.DomainSpec{
			Firmware: &apiv1.Firmware{Bootloader: &apiv1.Bootloader{Efi: &apiv1.EFIBootloader{}}}}},
	}
	rec := &state.VMI{UID: uid1, VMUID: vmUID, Namespace: "default", Name: "vm", Dir: vmiDir}
	ctx := context.Background()
	opts, err := p.Prepare(ctx, vmi, rec)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(opts.NvramPath, []byte("old variables"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A start keeps the file: it is the VM's variables.
	if _, err := p.Prepare(ctx, vmi, rec); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(opts.NvramPath); err != nil {
		t.Fatalf("a start removed the NVRAM: %v", err)
	}
	in, err := p.PrepareIncoming(ctx, vmi, rec)
	if err != nil {
		t.Fatal(err)
	}
	if in.NvramPath != opts.NvramPath {
		t.Fatalf("incoming NVRAM %q, want %q", in.NvramPath, opts.NvramPath)
	}
	if _, err := os.Stat(in.NvramPath); !os.IsNotExist(err) {
		t.Fatalf("the stale NVRAM is still there for the migration's target: %v", err)
	}
}

// countingFirmware counts the firmware resolutions asked of it.
type countingFirmware struct{ n int }

func (f *countingFirmware) EFI(context.Context, bool) (firmware.Firmware, error) {
	f.n++
	return firmware.Firmware{Executable: "/usr/share/OVMF/OVMF_CODE_4M.fd", NVRAMTemplate: "/usr/share/OVMF/OVMF_VARS_4M.fd"}, nil
}

// An EFI guest whose NVRAM image exists on its rbd class starts without
// the host's firmware descriptors being read: the VARS template is needed
// only to make a store, and every other start finds the guest's own.
func TestRBDNVRAMThatExistsNeedsNoFirmware(t *testing.T) {
	pool := &fakePool{images: map[string]int64{
		ceph.VolumeImage(rbdVMUID, "data"): 1 << 30,
		ceph.NVRAMImage(rbdVMUID):          540672,
	}}
	fw := &countingFirmware{}
	layout := nodedir.Layout{Root: t.TempDir()}
	p := New(Options{ImageDir: t.TempDir(), Layout: layout, Classes: fakeClasses{"ceph": rbdTestClass(pool)}, Firmware: fw})
	efi := &apiv1.Firmware{Bootloader: &apiv1.Bootloader{Efi: &apiv1.EFIBootloader{}}}
	opts, err := p.Prepare(context.Background(), rbdTestVMI("1Gi", efi), rbdTestRec(t, layout))
	if err != nil {
		t.Fatal(err)
	}
	if got := opts.GetNvramRbd().GetImage(); got != ceph.NVRAMImage(rbdVMUID) {
		t.Fatalf("NVRAM image %q, want %s", got, ceph.NVRAMImage(rbdVMUID))
	}
	if fw.n != 0 {
		t.Errorf("the firmware was resolved %d times for a guest whose NVRAM exists, want 0", fw.n)
	}
	if n := pool.count("info vp/" + ceph.NVRAMImage(rbdVMUID)); n != 1 {
		t.Errorf("rbd info of the NVRAM image %d times, want 1", n)
	}
}
