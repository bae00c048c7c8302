package disks

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/disks/diskstest"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/nodedir"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/state"
)

// adoptedFiles is AdoptedSources over fixed files.
type adoptedFiles struct {
	volumes map[string][2]string // name → path, format
	nvram   string
	calls   int
}

func (a *adoptedFiles) Volume(_, name string) (string, string, bool, error) {
	a.calls++
	v, ok := a.volumes[name]
	return v[0], v[1], ok, nil
}

func (a *adoptedFiles) NVRAM(string) (string, bool, error) { return a.nvram, a.nvram != "", nil }

// An adopted VM's persistent volume is a qcow2 copy of its raw file, with
// the same bytes for the guest; the file stays; a volume that exists is
// never copied again; a volume the domain did not have is made blank.
func TestAdoptedVolumeIsCopiedOnce(t *testing.T) {
	diskstest.NeedQemuImg(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	nodeDir, adoptDir := t.TempDir(), t.TempDir()
	src := filepath.Join(adoptDir, "data.raw")
	data := bytes.Repeat([]byte("VIRTPLANE-PERSIST boot=7\n"), 40)
	f, err := os.Create(src)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(1 << 20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	nvram := filepath.Join(adoptDir, "VARS.fd")
	if err := os.WriteFile(nvram, []byte("efi variables"), 0o600); err != nil {
		t.Fatal(err)
	}
	files := &adoptedFiles{volumes: map[string][2]string{"vda": {src, "raw"}}, nvram: nvram}
	layout := nodedir.Layout{Root: nodeDir}
	p := New(Options{ImageDir: t.TempDir(), Layout: layout, Images: QemuImg{}, Adopted: files})
	vmi := &apiv1.VirtualMachineInstance{
		Metadata: &apiv1.ObjectMeta{Uid: uid1, Namespace: "default", Name: "web",
			OwnerReferences: []*apiv1.OwnerReference{{Kind: apiv1.KindVirtualMachine, Name: "web", Uid: uid2, Controller: true}}},
		Spec: &apiv1.VirtualMachineInstanceSpec{
			Domain: &apiv1.DomainSpec{
				Devices: &apiv1.Devices{Disks: []*apiv1.Disk{
					{Name: "vda", Disk: &apiv1.DiskTarget{Bus: "virtio"}},
					{Name: "vdb", Disk: &apiv1.DiskTarget{Bus: "virtio"}},
				}},
				Firmware: &apiv1.Firmware{Bootloader: &apiv1.Bootloader{Efi: &apiv1.EFIBootloader{}}},
			},
			Volumes: []*apiv1.Volume{
				{Name: "vda", Persistent: &apiv1.PersistentVolume{Size: "1Mi"}},
				{Name: "vdb", Persistent: &apiv1.PersistentVolume{Size: "1Mi"}},
			},
		},
	}
	dir, err := layout.VMIDir(uid1)
	if err != nil {
		t.Fatal(err)
	}
	rec := &state.VMI{UID: uid1, Namespace: "default", Name: "web", Dir: dir, VMUID: uid2}
	opts, err := p.Prepare(ctx, vmi, rec)
	if err != nil {
		t.Fatal(err)
	}
	vol := opts.Disks[0].Path
	if out, err := exec.Command("qemu-img", "compare", "-f", "raw", "-F", "qcow2", src, vol).CombinedOutput(); err != nil {
		t.Errorf("the volume is not the adopted file's bytes: %v: %s", err, out)
	}
	if info, err := (QemuImg{}).Info(ctx, vol); err != nil || info.Format != "qcow2" || info.VirtualSize != 1<<20 {
		t.Errorf("volume %+v, %v", info, err)
	}
	if _, err := os.Stat(src); err != nil {
		t.Errorf("the adopted file is gone: %v", err)
	}
	if b, err := os.ReadFile(opts.GetNvramPath()); err != nil || string(b) != "efi variables" {
		t.Errorf("NVRAM %q, %v", b, err)
	}
	if info, err := (QemuImg{}).Info(ctx, opts.Disks[1].Path); err != nil || info.VirtualSize != 1<<20 {
		t.Errorf("the volume the domain had not: %+v, %v", info, err)
	}
	// The guest writes; the next start keeps its volume.
	if out, err := exec.Command("qemu-img", "resize", "-f", "qcow2", vol, "2M").CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	calls := files.calls
	if _, err := p.Prepare(ctx, vmi, rec); err != nil {
		t.Fatal(err)
	}
	if info, err := (QemuImg{}).Info(ctx, vol); err != nil || info.VirtualSize != 2<<20 {
		t.Errorf("the volume was copied again: %+v, %v", info, err)
	}
	if files.calls != calls {
		t.Errorf("the adopted files were asked for %d times again", files.calls-calls)
	}
}

// InfoAs reads a file as the format it is told, never probed: a qcow2
// image read as raw is raw data (the guest's), and a qcow2 read as qcow2
// names its backing file.
func TestInfoAsNeverProbes(t *testing.T) {
	diskstest.NeedQemuImg(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	base, overlay := filepath.Join(dir, "base.qcow2"), filepath.Join(dir, "overlay.qcow2")
	q := QemuImg{}
	if err := q.CreateBlank(ctx, base, 1<<20); err != nil {
		t.Fatal(err)
	}
	if err := q.CreateOverlay(ctx, base, "qcow2", overlay); err != nil {
		t.Fatal(err)
	}
	raw, err := q.InfoAs(ctx, overlay, "raw")
	if err != nil || raw.Format != "raw" || raw.BackingFile != "" {
		t.Errorf("the overlay read as raw: %+v, %v", raw, err)
	}
	qc, err := q.InfoAs(ctx, overlay, "qcow2")
	if err != nil || qc.Format != "qcow2" || qc.BackingFile != base || qc.VirtualSize != 1<<20 {
		t.Errorf("the overlay read as qcow2: %+v, %v", qc, err)
	}
	probed, err := q.Info(ctx, overlay)
	if err != nil || probed.Format != "qcow2" || probed.VirtualSize != 1<<20 {
		t.Errorf("Info of the overlay: %+v, %v", probed, err)
	}
}
