package disks

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/disks/diskstest"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/nodedir"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/state"
)

const (
	uid1 = "5d1e0f2a-0000-4000-8000-000000000001"
	uid2 = "5d1e0f2a-0000-4000-8000-000000000002"
)

// prepare with the real qemu-img: an overlay over the base, kept across
// passes, and kernel paths resolved in the image directory.
func TestPrepareWithQemuImg(t *testing.T) {
	diskstest.NeedQemuImg(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	imageDir, nodeDir := t.TempDir(), t.TempDir()
	base := filepath.Join(imageDir, "os", "base.img")
	if err := os.MkdirAll(filepath.Dir(base), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("qemu-img", "create", "-f", "raw", base, "1M").CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	layout := nodedir.Layout{Root: nodeDir}
	a := New(Options{ImageDir: imageDir, Layout: layout, Images: QemuImg{}})
	vmi := &apiv1.VirtualMachineInstance{
		Metadata: &apiv1.ObjectMeta{Uid: uid1, Namespace: "default", Name: "vm"},
		Spec: &apiv1.VirtualMachineInstanceSpec{
			Domain: &apiv1.DomainSpec{
				Devices: &apiv1.Devices{Disks: []*apiv1.Disk{
					{Name: "root", Disk: &apiv1.DiskTarget{Bus: "virtio"}, BootOrder: 1},
					{Name: "iso", Cdrom: &apiv1.CDRomTarget{Bus: "sata"}},
				}},
				Firmware: &apiv1.Firmware{KernelBoot: &apiv1.KernelBoot{Kernel: "k/vmlinuz", Initrd: "k/initrd", Cmdline: "console=ttyS0"}},
			},
			Volumes: []*apiv1.Volume{
				{Name: "root", Image: &apiv1.ImageVolume{Name: "os/base.img"}},
				{Name: "iso", Image: &apiv1.ImageVolume{Name: "os/base.img"}},
			},
		},
	}
	dir1, err := layout.VMIDir(uid1)
	if err != nil {
		t.Fatal(err)
	}
	rec := &state.VMI{UID: uid1, Namespace: "default", Name: "vm", DomainName: "default_vm", Dir: dir1}
	opts, err := a.Prepare(ctx, vmi, rec)
	if err != nil {
		t.Fatal(err)
	}
	if opts.ConsoleLogPath != nodedir.ConsoleLogPath(rec.Dir) {
		t.Errorf("options %+v", opts)
	}
	if opts.KernelPath != filepath.Join(imageDir, "k/vmlinuz") || opts.InitrdPath != filepath.Join(imageDir, "k/initrd") || opts.KernelCmdline != "console=ttyS0" {
		t.Errorf("kernel boot %q %q %q", opts.KernelPath, opts.InitrdPath, opts.KernelCmdline)
	}
	if len(opts.Disks) != 2 {
		t.Fatalf("disks %v", opts.Disks)
	}
	root, iso := opts.Disks[0], opts.Disks[1]
	if root.Format != "qcow2" || root.Device != "disk" || root.Bus != "virtio" || root.BootOrder != 1 || !strings.HasPrefix(root.Path, rec.Dir) {
		t.Errorf("root disk %v", root)
	}
	if iso.Path != base || iso.Format != "raw" || iso.Device != "cdrom" || !iso.ReadOnly {
		t.Errorf("cdrom %v", iso)
	}
	out, err := exec.Command("qemu-img", "info", "-U", "--output=json", root.Path).Output()
	if err != nil {
		t.Fatal(err)
	}
	var info struct {
		Format        string `json:"format"`
		BackingFile   string `json:"backing-filename"`
		BackingFormat string `json:"backing-filename-format"`
	}
	if err := json.Unmarshal(out, &info); err != nil {
		t.Fatal(err)
	}
	if info.Format != "qcow2" || info.BackingFile != base || info.BackingFormat != "raw" {
		t.Errorf("overlay %+v", info)
	}

	// The overlay holds the guest's writes: a second pass keeps it.
	if err := os.WriteFile(root.Path+".marker", nil, 0o600); err != nil {
		t.Fatal(err)
	}
	st1, _ := os.Stat(root.Path)
	if _, err := a.Prepare(ctx, vmi, rec); err != nil {
		t.Fatal(err)
	}
	st2, _ := os.Stat(root.Path)
	if !st1.ModTime().Equal(st2.ModTime()) {
		t.Error("overlay recreated")
	}

	// A base image that is not there fails the preparation for good.
	vmi.Spec.Volumes[0].Image.Name = "os/missing.img"
	dir2, err := layout.VMIDir(uid2)
	if err != nil {
		t.Fatal(err)
	}
	rec2 := &state.VMI{UID: uid2, Dir: dir2, DomainName: "default_vm2"}
	_, err = a.Prepare(ctx, vmi, rec2)
	var pe *Error
	if !errors.As(err, &pe) || pe.Reason != ReasonPrepareFailed || pe.Retry {
		t.Fatalf("missing base: %v", err)
	}
	// Paths escaping the image directory are refused.
	vmi.Spec.Volumes[0].Image.Name = "../etc/passwd"
	if _, err := a.Prepare(ctx, vmi, rec2); !errors.As(err, &pe) {
		t.Fatalf("escaping path: %v", err)
	}
}
