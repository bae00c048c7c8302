package apiserver

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

func addVolumeReq(name, bus, size string) *apiv1.AddVolumeRequest {
	return &apiv1.AddVolumeRequest{
		Key:    key("web"),
		Disk:   &apiv1.Disk{Name: name, Disk: &apiv1.DiskTarget{Bus: bus}},
		Volume: &apiv1.PersistentVolume{Size: size},
	}
}

// wantFieldError fails unless err is code with the field path in its
// message.
func wantFieldError(t *testing.T, what string, err error, c codes.Code, field string) {
	t.Helper()
	if code(err) != c || !strings.Contains(status.Convert(err).Message(), field) {
		t.Fatalf("%s: %v, want %s naming %s", what, err, c, field)
	}
}

func TestAddAndRemoveVolume(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if _, err := f.vms.Create(ctx, &apiv1.CreateVirtualMachineRequest{Vm: validVM("web")}); err != nil {
		t.Fatal(err)
	}
	gen := getVM(t, f).GetMetadata().GetGeneration()

	vm, err := f.vms.AddVolume(ctx, addVolumeReq("scratch", "scsi", "64Mi"))
	if err != nil {
		t.Fatal(err)
	}
	spec := vm.GetSpec().GetTemplate().GetSpec()
	if d := spec.GetDomain().GetDevices().GetDisks(); len(d) != 2 || d[1].GetName() != "scratch" || d[1].GetDisk().GetBus() != "scsi" {
		t.Fatalf("disks after AddVolume: %v", d)
	}
	if v := spec.GetVolumes(); len(v) != 2 || !v[1].GetPersistent().GetHotpluggable() || v[1].GetPersistent().GetSize() != "64Mi" {
		t.Fatalf("volumes after AddVolume: %v (the call makes the volume hotpluggable)", v)
	}
	if vm.GetMetadata().GetGeneration() != gen+1 {
		t.Fatalf("generation %d, want %d: a hotplug is a spec change", vm.GetMetadata().GetGeneration(), gen+1)
	}
	// The default bus is virtio's.
	if _, err := f.vms.AddVolume(ctx, addVolumeReq("more", "", "1Gi")); err != nil {
		t.Fatal(err)
	}

	// Bad requests name the request's field, and change nothing.
	before := getVM(t, f).GetMetadata().GetResourceVersion()
	_, err = f.vms.AddVolume(ctx, addVolumeReq("scratch", "virtio", "64Mi"))
	wantFieldError(t, "a name in use", err, codes.InvalidArgument, "disk.name")
	_, err = f.vms.AddVolume(ctx, addVolumeReq("root", "virtio", "64Mi"))
	wantFieldError(t, "the boot disk's name", err, codes.InvalidArgument, "disk.name")
	_, err = f.vms.AddVolume(ctx, addVolumeReq("cd", "sata", "64Mi"))
	wantFieldError(t, "sata", err, codes.InvalidArgument, "disk.disk.bus")
	_, err = f.vms.AddVolume(ctx, addVolumeReq("Bad_Name", "virtio", "64Mi"))
	wantFieldError(t, "a bad name", err, codes.InvalidArgument, "disk.name")
	_, err = f.vms.AddVolume(ctx, addVolumeReq("big", "virtio", "lots"))
	wantFieldError(t, "a bad size", err, codes.InvalidArgument, "volume.size")
	req := addVolumeReq("cd", "", "64Mi")
	req.Disk.Disk, req.Disk.Cdrom = nil, &apiv1.CDRomTarget{}
	_, err = f.vms.AddVolume(ctx, req)
	wantFieldError(t, "a cdrom", err, codes.InvalidArgument, "disk.cdrom")
	req = addVolumeReq("boot", "virtio", "64Mi")
	req.Disk.BootOrder = 1
	_, err = f.vms.AddVolume(ctx, req)
	wantFieldError(t, "a boot order", err, codes.InvalidArgument, "disk.boot_order")
	req = addVolumeReq("img", "virtio", "64Mi")
	req.Volume.Image = "../etc/shadow"
	_, err = f.vms.AddVolume(ctx, req)
	wantFieldError(t, "an image outside the image dir", err, codes.InvalidArgument, "volume.image")
	req = addVolumeReq("ceph", "virtio", "64Mi")
	req.Volume.StorageClass = "nope"
	_, err = f.vms.AddVolume(ctx, req)
	wantFieldError(t, "a class that does not exist", err, codes.InvalidArgument, "storage_class")
	_, err = f.vms.AddVolume(ctx, &apiv1.AddVolumeRequest{Key: key("web")})
	wantFieldError(t, "no disk", err, codes.InvalidArgument, "disk")
	_, err = f.vms.AddVolume(ctx, &apiv1.AddVolumeRequest{Key: key("nope"), Disk: &apiv1.Disk{Name: "x"}, Volume: &apiv1.PersistentVolume{Size: "1Gi"}})
	if code(err) != codes.NotFound {
		t.Fatalf("AddVolume of a VM that does not exist: %v, want NotFound", err)
	}
	if rv := getVM(t, f).GetMetadata().GetResourceVersion(); rv != before {
		t.Fatalf("a refused AddVolume wrote the VM (resource version %d → %d)", before, rv)
	}

	// Remove: the disk and its volume go; a disk that is not hotpluggable
	// is refused (it waits for a restart, so it is an update's to remove).
	vm, err = f.vms.RemoveVolume(ctx, &apiv1.RemoveVolumeRequest{Key: key("web"), Name: "scratch"})
	if err != nil {
		t.Fatal(err)
	}
	spec = vm.GetSpec().GetTemplate().GetSpec()
	if len(spec.GetDomain().GetDevices().GetDisks()) != 2 || len(spec.GetVolumes()) != 2 || spec.GetVolumes()[1].GetName() != "more" {
		t.Fatalf("after RemoveVolume: disks %v volumes %v", spec.GetDomain().GetDevices().GetDisks(), spec.GetVolumes())
	}
	_, err = f.vms.RemoveVolume(ctx, &apiv1.RemoveVolumeRequest{Key: key("web"), Name: "root"})
	if code(err) != codes.FailedPrecondition || !strings.Contains(status.Convert(err).Message(), "not hotpluggable") {
		t.Fatalf("RemoveVolume of the root disk: %v, want FailedPrecondition saying it is not hotpluggable", err)
	}
	_, err = f.vms.RemoveVolume(ctx, &apiv1.RemoveVolumeRequest{Key: key("web"), Name: "scratch"})
	wantFieldError(t, "a volume already removed", err, codes.InvalidArgument, "name")
	_, err = f.vms.RemoveVolume(ctx, &apiv1.RemoveVolumeRequest{Key: key("web")})
	wantFieldError(t, "no name", err, codes.InvalidArgument, "name")
}

// A snapshot in progress holds the disks still, for hotplug as for any
// update (KubeVirt's admitter refuses volume requests during a snapshot).
func TestHotplugLockedBySnapshot(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if _, err := f.vms.Create(ctx, &apiv1.CreateVirtualMachineRequest{Vm: validVM("web")}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.vms.AddVolume(ctx, addVolumeReq("scratch", "virtio", "64Mi")); err != nil {
		t.Fatal(err)
	}
	f.lockVM(t, "web", "s1", "")
	const disks = `Cannot update vm disks or volumes until snapshot "s1" completes`
	_, err := f.vms.AddVolume(ctx, addVolumeReq("more", "virtio", "64Mi"))
	wantRefusal(t, "add", err, disks)
	_, err = f.vms.RemoveVolume(ctx, &apiv1.RemoveVolumeRequest{Key: key("web"), Name: "scratch"})
	wantRefusal(t, "remove", err, disks)
}
