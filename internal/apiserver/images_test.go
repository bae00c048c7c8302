package apiserver

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
)

func nodeWithImages(name string, images ...*apiv1.NodeImage) *apiv1.Node {
	return &apiv1.Node{
		Metadata: &apiv1.ObjectMeta{Name: name},
		Status: &apiv1.NodeStatus{
			Capacity:    map[string]string{"cpu": "2", "memory": "8Gi"},
			Allocatable: map[string]string{"cpu": "2", "memory": "7Gi"},
			Schedulable: true,
			Images:      images,
		},
	}
}

func image(name string, vsize int64) *apiv1.NodeImage {
	return &apiv1.NodeImage{Name: name, Format: "qcow2", VirtualSizeBytes: vsize, SizeBytes: vsize / 4, Sha256: strings.Repeat("0", 64)}
}

// Register stores the image list; a heartbeat replaces it only when it
// carries one, and costs one write either way.
func TestNodeImagesRegisterAndHeartbeat(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	debian := image("debian.qcow2", 2<<30)
	n, err := f.nodes.Register(ctx, &apiv1.RegisterNodeRequest{Node: nodeWithImages("host-1", debian)})
	if err != nil {
		t.Fatal(err)
	}
	if len(n.Status.Images) != 1 || !proto.Equal(n.Status.Images[0], debian) {
		t.Fatalf("registered images %v", n.Status.Images)
	}

	stored := func() *apiv1.Node {
		t.Helper()
		n, err := f.nodes.Get(ctx, &apiv1.GetNodeRequest{Name: "host-1"})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	heartbeat := func(req *apiv1.HeartbeatRequest) *apiv1.Node {
		t.Helper()
		before := stored().Metadata.ResourceVersion
		f.now = f.now.Add(10 * time.Second)
		if _, err := f.nodes.Heartbeat(ctx, req); err != nil {
			t.Fatal(err)
		}
		after := stored()
		// Nothing else writes here, so the revision counts the writes.
		if w := after.Metadata.ResourceVersion - before; w != 1 {
			t.Errorf("heartbeat made %d writes, want 1", w)
		}
		return after
	}

	got := heartbeat(&apiv1.HeartbeatRequest{Name: "host-1", Schedulable: true})
	if len(got.Status.Images) != 1 || !proto.Equal(got.Status.Images[0], debian) {
		t.Fatalf("a heartbeat without images changed them: %v", got.Status.Images)
	}
	kernel := image("vmlinuz", 512)
	got = heartbeat(&apiv1.HeartbeatRequest{Name: "host-1", Schedulable: true, Images: &apiv1.NodeImageList{Items: []*apiv1.NodeImage{debian, kernel}}})
	if len(got.Status.Images) != 2 || !proto.Equal(got.Status.Images[1], kernel) {
		t.Fatalf("after a heartbeat with images: %v", got.Status.Images)
	}
	// An invalid list does not cost the node its lease; the stored list
	// stays.
	got = heartbeat(&apiv1.HeartbeatRequest{Name: "host-1", Schedulable: true, Images: &apiv1.NodeImageList{Items: []*apiv1.NodeImage{image("../etc/passwd", 1)}}})
	if len(got.Status.Images) != 2 || !got.Status.Heartbeat.AsTime().Equal(f.now) {
		t.Fatalf("after an invalid list: images %v, heartbeat %v", got.Status.Images, got.Status.Heartbeat.AsTime())
	}
	got = heartbeat(&apiv1.HeartbeatRequest{Name: "host-1", Schedulable: true, Images: &apiv1.NodeImageList{}})
	if len(got.Status.Images) != 0 {
		t.Fatalf("an empty list did not clear the images: %v", got.Status.Images)
	}

	// Re-registering replaces the list.
	n, err = f.nodes.Register(ctx, &apiv1.RegisterNodeRequest{Node: nodeWithImages("host-1", kernel)})
	if err != nil || len(n.Status.Images) != 1 || n.Status.Images[0].Name != "vmlinuz" {
		t.Fatalf("re-register: %v, images %v", err, n.GetStatus().GetImages())
	}
	_, err = f.nodes.Register(ctx, &apiv1.RegisterNodeRequest{Node: nodeWithImages("host-1", kernel, kernel)})
	if code(err) != codes.InvalidArgument {
		t.Fatalf("register with a duplicate image: %v", err)
	}
}

// A persistent volume smaller than its image, on any node, is refused
// with the field's path; the check looks at new and changed volumes only.
func TestPersistentVolumeSizeAgainstImage(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	for _, n := range []*apiv1.Node{nodeWithImages("a", image("debian.qcow2", 2<<30)), nodeWithImages("b", image("debian.qcow2", 3<<30))} {
		if _, err := f.nodes.Register(ctx, &apiv1.RegisterNodeRequest{Node: n}); err != nil {
			t.Fatal(err)
		}
	}
	vm := validVM("db")
	spec := vm.Spec.Template.Spec
	spec.Domain.Devices.Disks = append(spec.Domain.Devices.Disks, &apiv1.Disk{Name: "data", Disk: &apiv1.DiskTarget{Bus: "virtio"}})
	spec.Volumes = append(spec.Volumes, &apiv1.Volume{Name: "data", Persistent: &apiv1.PersistentVolume{Image: "debian.qcow2", Size: "2Gi"}})

	_, err := f.vms.Create(ctx, &apiv1.CreateVirtualMachineRequest{Vm: vm})
	if code(err) != codes.InvalidArgument {
		t.Fatalf("create with a volume below the image: %v", err)
	}
	fv := validation.FieldViolations(err)
	wantDesc := `Invalid value: "2Gi": must be at least the virtual size of image "debian.qcow2" (3221225472 bytes / 3Gi)`
	if len(fv) != 1 || fv[0].Field != "spec.template.spec.volumes[1].persistent.size" || fv[0].Description != wantDesc {
		t.Fatalf("violations %v", fv)
	}

	spec.Volumes[1].Persistent.Size = "3Gi"
	out, err := f.vms.Create(ctx, &apiv1.CreateVirtualMachineRequest{Vm: vm})
	if err != nil {
		t.Fatal(err)
	}

	// A node now reports a larger image of the name: updates that leave
	// the volume alone still pass, one that changes it is checked.
	if _, err := f.nodes.Register(ctx, &apiv1.RegisterNodeRequest{Node: nodeWithImages("c", image("debian.qcow2", 4<<30))}); err != nil {
		t.Fatal(err)
	}
	out.Metadata.Labels["tier"] = "db"
	out, err = f.vms.Update(ctx, &apiv1.UpdateVirtualMachineRequest{Vm: out})
	if err != nil {
		t.Fatalf("update not touching the volume: %v", err)
	}
	out.Spec.Template.Spec.Volumes[1].Persistent.Size = "3584Mi"
	_, err = f.vms.Update(ctx, &apiv1.UpdateVirtualMachineRequest{Vm: out})
	if fv := validation.FieldViolations(err); len(fv) != 1 || fv[0].Field != "spec.template.spec.volumes[1].persistent.size" {
		t.Fatalf("update shrinking below the image: %v", err)
	}
}
