package disks

import (
	"bufio"
	"bytes"
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

const growVMUID = "5d1e0f2a-0000-4000-8000-0000000000dd"

// killedGrow is qemu-img resize killed before it got anywhere (an agent
// that died, a power cut): the image keeps its old size.
type killedGrow struct{ QemuImg }

func (killedGrow) Grow(context.Context, string, int64) error { return errKilled }

// growFixture is an instance of VM growVMUID with persistent volumes data
// (size) and big (8Mi), each made once at its size by Prepare with
// qemu-img, data holding some bytes at its start.
func growFixture(t *testing.T, size string) (vmi *apiv1.VirtualMachineInstance, rec *state.VMI, layout nodedir.Layout, data string) {
	t.Helper()
	layout = nodedir.Layout{Root: t.TempDir()}
	dir, err := layout.VMIDir(uid1)
	if err != nil {
		t.Fatal(err)
	}
	rec = &state.VMI{UID: uid1, Namespace: "default", Name: "vm", DomainName: "default_vm", Dir: dir, VMUID: growVMUID}
	vmi = &apiv1.VirtualMachineInstance{
		Metadata: &apiv1.ObjectMeta{Uid: uid1, Namespace: "default", Name: "vm"},
		Spec: &apiv1.VirtualMachineInstanceSpec{
			Domain: &apiv1.DomainSpec{Devices: &apiv1.Devices{Disks: []*apiv1.Disk{
				{Name: "data", Disk: &apiv1.DiskTarget{Bus: "virtio"}},
				{Name: "big", Disk: &apiv1.DiskTarget{Bus: "virtio"}},
			}}},
			Volumes: []*apiv1.Volume{
				{Name: "data", Persistent: &apiv1.PersistentVolume{Size: size}},
				{Name: "big", Persistent: &apiv1.PersistentVolume{Size: "8Mi"}},
			},
		},
	}
	if _, err := New(Options{Layout: layout}).Prepare(context.Background(), vmi, rec); err != nil {
		t.Fatal(err)
	}
	vmDir, err := layout.VMDir(growVMUID)
	if err != nil {
		t.Fatal(err)
	}
	data = filepath.Join(nodedir.VolumesDir(vmDir), "data.qcow2")
	if out, err := exec.Command("qemu-io", "-f", "qcow2", "-c", "write -P 0xab 0 64k", data).CombinedOutput(); err != nil {
		t.Fatalf("writing the guest's data: %v: %s", err, out)
	}
	return vmi, rec, layout, data
}

func virtualSize(t *testing.T, path string) int64 {
	t.Helper()
	info, err := QemuImg{}.Info(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	return info.VirtualSize
}

// checkVolume checks path is a sound qcow2 still holding the guest's
// bytes.
func checkVolume(t *testing.T, path string) {
	t.Helper()
	if out, err := exec.Command("qemu-img", "check", "-q", path).CombinedOutput(); err != nil {
		t.Fatalf("%s is not a sound qcow2: %v: %s", path, err, out)
	}
	out, err := exec.Command("qemu-io", "-f", "qcow2", "-c", "read -P 0xab 0 64k", path).CombinedOutput()
	if err != nil || bytes.Contains(out, []byte("Pattern verification failed")) {
		t.Fatalf("the guest's data is gone from %s: %v: %s", path, err, out)
	}
}

// A volume whose size was raised is grown to it, in whole sectors, with
// the guest's data kept; one at or above its size is left alone, and a
// volume not made yet is Prepare's.
func TestGrowVolumes(t *testing.T) {
	diskstest.NeedQemuImg(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	vmi, rec, layout, data := growFixture(t, "4Mi")
	big := filepath.Join(filepath.Dir(data), "big.qcow2")
	// Raised to a size that is no whole number of sectors (qemu-img
	// resize refuses those), and big's lowered below its file (a template
	// restored from a snapshot may say so): never shrunk.
	vmi.Spec.Volumes[0].Persistent.Size = "10000000"
	vmi.Spec.Volumes[1].Persistent.Size = "4Mi"
	vmi.Spec.Volumes = append(vmi.Spec.Volumes, &apiv1.Volume{Name: "new", Persistent: &apiv1.PersistentVolume{Size: "1Mi"}})
	vmi.Spec.Domain.Devices.Disks = append(vmi.Spec.Domain.Devices.Disks, &apiv1.Disk{Name: "new", Disk: &apiv1.DiskTarget{Bus: "virtio"}})
	p := New(Options{Layout: layout})
	if err := p.GrowVolumes(ctx, vmi, rec); err != nil {
		t.Fatal(err)
	}
	if got := virtualSize(t, data); got != 10000384 {
		t.Fatalf("data is %d bytes, want 10000384 (10000000 up to a whole sector)", got)
	}
	checkVolume(t, data)
	if got := virtualSize(t, big); got != 8<<20 {
		t.Fatalf("big is %d bytes, want its 8Mi kept", got)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(data), "new.qcow2")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("GrowVolumes made a volume: %v", err)
	}
	// Again: nothing to do. Prepare hands the launcher the sizes.
	if err := p.GrowVolumes(ctx, vmi, rec); err != nil {
		t.Fatal(err)
	}
	opts, err := p.Prepare(ctx, vmi, rec)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []int64{10000384, 4 << 20, 1 << 20} {
		if got := opts.Disks[i].GetSizeBytes(); got != want {
			t.Errorf("disk %s: size_bytes %d, want %d", opts.Disks[i].GetName(), got, want)
		}
	}
}

// A growth cut short (qemu-img killed, the agent gone) leaves the volume
// sound at its old size and the VMI waiting (DataVolumeError, retried);
// the next start grows it.
func TestGrowKilledIsRedone(t *testing.T) {
	diskstest.NeedQemuImg(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	vmi, rec, layout, data := growFixture(t, "4Mi")
	vmi.Spec.Volumes[0].Persistent.Size = "1Gi"
	err := New(Options{Layout: layout, Images: killedGrow{}}).GrowVolumes(ctx, vmi, rec)
	var e *Error
	if !errors.As(err, &e) || !e.Retry || e.Reason != apiv1.ReasonDataVolumeError || !errors.Is(err, errKilled) {
		t.Fatalf("killed growth: %v, want a retried DataVolumeError", err)
	}
	if got := virtualSize(t, data); got != 4<<20 {
		t.Fatalf("data is %d bytes after a killed growth", got)
	}
	checkVolume(t, data)
	if err := New(Options{Layout: layout}).GrowVolumes(ctx, vmi, rec); err != nil {
		t.Fatal(err)
	}
	if got := virtualSize(t, data); got != 1<<30 {
		t.Fatalf("data is %d bytes, want 1Gi", got)
	}
	checkVolume(t, data)
}

// qemu-img takes the image's write lock to resize it: a volume a running
// QEMU holds (here qemu-io, which locks it as QEMU does) is refused, not
// resized under it. The node agent grows files only while no domain runs;
// this is the tool's own guard behind that.
func TestGrowRefusesAVolumeInUse(t *testing.T) {
	diskstest.NeedQemuImg(t)
	if _, err := exec.LookPath("qemu-io"); err != nil {
		t.Skip("no qemu-io")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, _, _, data := growFixture(t, "4Mi")
	holder := exec.CommandContext(ctx, "qemu-io", "-f", "qcow2", data)
	stdin, err := holder.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := holder.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stdin.Close(); _ = holder.Wait() }()
	// qemu-io has the image open (and locked) once it answers a command.
	if _, err := stdin.Write([]byte("length\n")); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.Contains(line, "MiB") {
		t.Fatalf("qemu-io did not open %s: %q, %v", data, line, err)
	}
	err = QemuImg{}.Grow(ctx, data, 1<<30)
	if err == nil || !strings.Contains(err.Error(), "lock") {
		t.Fatalf("growing a volume in use: %v, want a lock error", err)
	}
}
