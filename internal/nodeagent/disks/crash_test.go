package disks

import (
	"bytes"
	"context"
	"errors"
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

const crashVMUID = "5d1e0f2a-0000-4000-8000-0000000000cc"

// killedCopy is qemu-img killed halfway through a copy (an agent that
// died, a power cut): the start of the output is written, then nothing.
type killedCopy struct{ QemuImg }

var errKilled = errors.New("signal: killed")

func (k killedCopy) CopyResized(_ context.Context, _, _, dst string, _ int64) error {
	if err := os.WriteFile(dst, []byte("QFI\xfb partial"), 0o600); err != nil {
		return err
	}
	return errKilled
}

func (k killedCopy) CreateOverlay(_ context.Context, _, _, overlay string) error {
	if err := os.WriteFile(overlay, []byte("QFI\xfb"), 0o600); err != nil {
		return err
	}
	return errKilled
}

// What a crash leaves while a persistent volume or an overlay is made is
// its temporary file, never the volume: the next pass does not take the
// half-made file for the guest's disk, removes it and makes the disk
// again, whole. The disk is then a valid qcow2 of the right size.
func TestCrashDuringProvisioningIsRedone(t *testing.T) {
	diskstest.NeedQemuImg(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	imageDir, nodeDir := t.TempDir(), t.TempDir()
	base := filepath.Join(imageDir, "base.raw")
	if err := os.WriteFile(base, bytes.Repeat([]byte{0xAB}, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	layout := nodedir.Layout{Root: nodeDir}
	dir, err := layout.VMIDir(uid1)
	if err != nil {
		t.Fatal(err)
	}
	rec := &state.VMI{UID: uid1, Namespace: "default", Name: "vm", DomainName: "default_vm", Dir: dir, VMUID: crashVMUID}
	vmi := &apiv1.VirtualMachineInstance{
		Metadata: &apiv1.ObjectMeta{Uid: uid1, Namespace: "default", Name: "vm"},
		Spec: &apiv1.VirtualMachineInstanceSpec{
			Domain: &apiv1.DomainSpec{Devices: &apiv1.Devices{Disks: []*apiv1.Disk{
				{Name: "root", Disk: &apiv1.DiskTarget{Bus: "virtio"}},
				{Name: "data", Disk: &apiv1.DiskTarget{Bus: "virtio"}},
			}}},
			Volumes: []*apiv1.Volume{
				{Name: "root", Image: &apiv1.ImageVolume{Name: "base.raw"}},
				{Name: "data", Persistent: &apiv1.PersistentVolume{Size: "4Mi", Image: "base.raw"}},
			},
		},
	}
	vmDir, err := layout.VMDir(crashVMUID)
	if err != nil {
		t.Fatal(err)
	}
	overlay := filepath.Join(nodedir.DisksDir(dir), "root.qcow2")
	volume := filepath.Join(nodedir.VolumesDir(vmDir), "data.qcow2")

	// The overlay's qemu-img is killed: no overlay.
	crashing := New(Options{ImageDir: imageDir, Layout: layout, Images: killedCopy{}})
	if _, err := crashing.Prepare(ctx, vmi, rec); !errors.Is(err, errKilled) {
		t.Fatalf("prepare with a killed qemu-img: %v", err)
	}
	if _, err := os.Stat(overlay); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a killed qemu-img left an overlay: %v", err)
	}
	// The agent itself dies mid-copy: the temporary files stay, half
	// written, with nothing left to remove them.
	for _, p := range []string{overlay, volume} {
		diskstest.WriteFile(t, p+".tmp", []byte("QFI\xfb half"))
	}

	good := New(Options{ImageDir: imageDir, Layout: layout, Images: QemuImg{}})
	opts, err := good.Prepare(ctx, vmi, rec)
	if err != nil {
		t.Fatal(err)
	}
	if len(opts.GetDisks()) != 2 || opts.Disks[0].Path != overlay || opts.Disks[1].Path != volume {
		t.Fatalf("disks %v", opts.GetDisks())
	}
	for _, p := range []string{overlay, volume} {
		if _, err := os.Stat(p + ".tmp"); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s.tmp left: %v", p, err)
		}
		if out, err := exec.Command("qemu-img", "check", "-U", "-q", p).CombinedOutput(); err != nil {
			t.Errorf("%s is not a whole qcow2: %v: %s", p, err, out)
		}
	}
	out, err := exec.Command("qemu-img", "compare", "-U", "-f", "raw", "-F", "qcow2", base, volume).CombinedOutput()
	if err != nil {
		t.Errorf("the volume is not a whole copy of its image: %v: %s", err, out)
	}
}
