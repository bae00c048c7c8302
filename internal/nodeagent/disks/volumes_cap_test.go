package disks

import (
	"context"
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

// TestPersistentVolumeFromHugeImage: an image an operator imported, a
// 7 MiB qcow2 claiming 64 PiB, is never copied into a persistent volume
// above the node's virtual-size cap: DataVolumeError naming both sizes
// and the flag, and no file is made.
func TestPersistentVolumeFromHugeImage(t *testing.T) {
	diskstest.NeedQemuImg(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	imageDir, nodeDir := t.TempDir(), t.TempDir()
	if out, err := exec.Command("qemu-img", "create", "-q", "-f", "qcow2", "-o", "cluster_size=2M",
		filepath.Join(imageDir, "huge.qcow2"), "64P").CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	layout := nodedir.Layout{Root: nodeDir}
	a := New(Options{ImageDir: imageDir, Layout: layout, Images: QemuImg{}, MaxVirtualSize: func() int64 { return 2 << 40 }})
	vmi := &apiv1.VirtualMachineInstance{
		Metadata: &apiv1.ObjectMeta{Uid: uid1, Namespace: "default", Name: "vm"},
		Spec: &apiv1.VirtualMachineInstanceSpec{
			Domain:  &apiv1.DomainSpec{Devices: &apiv1.Devices{Disks: []*apiv1.Disk{{Name: "root", Disk: &apiv1.DiskTarget{Bus: "virtio"}}}}},
			Volumes: []*apiv1.Volume{{Name: "root", Persistent: &apiv1.PersistentVolume{Size: "64Pi", Image: "huge.qcow2"}}},
		},
	}
	dir, err := layout.VMIDir(uid1)
	if err != nil {
		t.Fatal(err)
	}
	rec := &state.VMI{UID: uid1, VMUID: uid2, Namespace: "default", Name: "vm", DomainName: "default_vm", Dir: dir}
	_, err = a.Prepare(ctx, vmi, rec)
	var pe *Error
	if !errors.As(err, &pe) || pe.Reason != apiv1.ReasonDataVolumeError ||
		!strings.Contains(err.Error(), "virtual size is 64Pi") || !strings.Contains(err.Error(), "2Ti") || !strings.Contains(err.Error(), "--image-max-virtual-size") {
		t.Fatalf("Prepare = %v, want a DataVolumeError naming 64Pi, 2Ti and the flag", err)
	}
	vmDir, err := layout.VMDir(uid2)
	if err != nil {
		t.Fatal(err)
	}
	if ents, err := os.ReadDir(nodedir.VolumesDir(vmDir)); err == nil && len(ents) > 0 {
		t.Fatalf("volumes made: %v", ents)
	}
}
