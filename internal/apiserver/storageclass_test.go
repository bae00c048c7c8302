package apiserver

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// testCephKey is a key as ceph-authtool --gen-print-key prints one.
const testCephKey = "AQCauhZroSmaLxAADcjclatTLvDt1b2rQ3bj4Q=="

func rbdClass(name string) *apiv1.StorageClass {
	return &apiv1.StorageClass{
		Metadata: &apiv1.ObjectMeta{Name: name},
		Spec: &apiv1.StorageClassSpec{
			Rbd: &apiv1.RBDStorage{
				Monitors: []string{"169.254.7.254:3300"}, Pool: "vp", User: "virtplane", Key: testCephKey,
			},
			NodeSelector: map[string]string{"storage.example.com/ceph": "yes"},
		},
	}
}

func (f *fixture) storageClasses() apiv1.StorageClassesClient {
	return apiv1.NewStorageClassesClient(f.conn)
}

func TestStorageClassKeyIsNeverRead(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	sc := f.storageClasses()
	created, err := sc.Create(ctx, &apiv1.CreateStorageClassRequest{StorageClass: rbdClass("ceph")})
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string, got *apiv1.StorageClass) {
		t.Helper()
		if got.GetSpec().GetRbd().GetKey() != "" || strings.Contains(got.String(), testCephKey) {
			t.Errorf("%s returns the key: %v", what, got)
		}
		if !got.GetStatus().GetKeySet() {
			t.Errorf("%s: status.key_set is false", what)
		}
	}
	check("Create", created)
	got, err := sc.Get(ctx, &apiv1.GetStorageClassRequest{Name: "ceph"})
	if err != nil {
		t.Fatal(err)
	}
	check("Get", got)
	list, err := sc.List(ctx, &apiv1.ListStorageClassesRequest{})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("List: %v %v", list, err)
	}
	check("List", list.Items[0])
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := sc.Watch(wctx, &apiv1.WatchStorageClassesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	ev, err := w.Recv()
	if err != nil {
		t.Fatal(err)
	}
	check("Watch", ev.Object)

	// An update without a key keeps the stored one; the answer has none.
	upd := proto.Clone(got).(*apiv1.StorageClass)
	upd.Spec.Rbd.Monitors = append(upd.Spec.Rbd.Monitors, "169.254.7.253:3300")
	after, err := sc.Update(ctx, &apiv1.UpdateStorageClassRequest{StorageClass: upd})
	if err != nil {
		t.Fatal(err)
	}
	check("Update", after)
	stored, err := f.st.StorageClasses.Get(ctx, "", "ceph")
	if err != nil || stored.Spec.Rbd.Key != testCephKey || len(stored.Spec.Rbd.Monitors) != 2 {
		t.Fatalf("stored after an update without key: %v %v", stored, err)
	}
}

func TestStorageClassValidation(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	sc := f.storageClasses()
	for _, tc := range []struct {
		mutate func(*apiv1.StorageClass)
		field  string
	}{
		{func(c *apiv1.StorageClass) { c.Metadata.Name = "local" }, "metadata.name"},
		{func(c *apiv1.StorageClass) { c.Metadata.Name = "a.b" }, "metadata.name"},
		{func(c *apiv1.StorageClass) { c.Spec.Rbd.Monitors = nil }, "spec.rbd.monitors"},
		{func(c *apiv1.StorageClass) { c.Spec.Rbd.Monitors = []string{"ceph.example.com:3300"} }, "spec.rbd.monitors[0]"},
		{func(c *apiv1.StorageClass) { c.Spec.Rbd.Monitors = []string{"10.0.0.1"} }, "spec.rbd.monitors[0]"},
		{func(c *apiv1.StorageClass) { c.Spec.Rbd.Monitors = []string{"010.0.0.1:3300"} }, "spec.rbd.monitors[0]"},
		{func(c *apiv1.StorageClass) { c.Spec.Rbd.Monitors = []string{"224.0.0.1:3300"} }, "spec.rbd.monitors[0]"},
		{func(c *apiv1.StorageClass) { c.Spec.Rbd.Monitors = []string{"10.0.0.1:3300", "10.0.0.1:3300"} }, "spec.rbd.monitors[1]"},
		{func(c *apiv1.StorageClass) { c.Spec.Rbd.Pool = "vp/evil" }, "spec.rbd.pool"},
		{func(c *apiv1.StorageClass) { c.Spec.Rbd.Pool = "" }, "spec.rbd.pool"},
		{func(c *apiv1.StorageClass) { c.Spec.Rbd.User = "client.admin" }, "spec.rbd.user"},
		{func(c *apiv1.StorageClass) { c.Spec.Rbd.User = "a:b" }, "spec.rbd.user"},
		{func(c *apiv1.StorageClass) { c.Spec.Rbd.Key = "" }, "spec.rbd.key"},
		{func(c *apiv1.StorageClass) { c.Spec.Rbd.Key = "c2VjcmV0LXBhc3N3b3Jk" }, "spec.rbd.key"},
		{func(c *apiv1.StorageClass) {
			c.Spec.SharedFilesystem = &apiv1.SharedFilesystemStorage{Path: "/mnt/nfs"}
		}, "spec"},
		{func(c *apiv1.StorageClass) { c.Spec.Rbd = nil }, "spec"},
		{func(c *apiv1.StorageClass) { c.Spec.NodeSelector = map[string]string{"bad key!": "x"} }, "spec.node_selector"},
	} {
		bad := rbdClass("bad")
		tc.mutate(bad)
		_, err := sc.Create(ctx, &apiv1.CreateStorageClassRequest{StorageClass: bad})
		if code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: got %v, want InvalidArgument naming it", tc.field, err)
		}
		if err != nil && strings.Contains(err.Error(), "c2VjcmV0") {
			t.Errorf("the error shows the key: %v", err)
		}
	}
	for _, path := range []string{"relative", "/", "/mnt/../etc", "/mnt/a,b", "/mnt/a:b", "/mnt/a/", "/mnt//a"} {
		bad := &apiv1.StorageClass{Metadata: &apiv1.ObjectMeta{Name: "nfs"}, Spec: &apiv1.StorageClassSpec{
			SharedFilesystem: &apiv1.SharedFilesystemStorage{Path: path}}}
		_, err := sc.Create(ctx, &apiv1.CreateStorageClassRequest{StorageClass: bad})
		if code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "spec.shared_filesystem.path") {
			t.Errorf("path %q: got %v", path, err)
		}
	}
}

func TestStorageClassWhereVolumesAreIsImmutable(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	sc := f.storageClasses()
	out, err := sc.Create(ctx, &apiv1.CreateStorageClassRequest{StorageClass: rbdClass("ceph")})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		mutate func(*apiv1.StorageClass)
		field  string
	}{
		{func(c *apiv1.StorageClass) { c.Spec.Rbd.Pool = "other" }, "spec.rbd.pool"},
		{func(c *apiv1.StorageClass) {
			c.Spec.Rbd = nil
			c.Spec.SharedFilesystem = &apiv1.SharedFilesystemStorage{Path: "/mnt/nfs"}
		}, "spec"},
	} {
		in := proto.Clone(out).(*apiv1.StorageClass)
		tc.mutate(in)
		if _, err := sc.Update(ctx, &apiv1.UpdateStorageClassRequest{StorageClass: in}); code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: got %v", tc.field, err)
		}
	}
}

func TestStorageClassConnectOnlyForSelectedNodes(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	if _, err := f.storageClasses().Create(ctx, &apiv1.CreateStorageClassRequest{StorageClass: rbdClass("ceph")}); err != nil {
		t.Fatal(err)
	}
	for name, labels := range map[string]map[string]string{
		"in":  {"storage.example.com/ceph": "yes"},
		"out": {"storage.example.com/ceph": "no"},
	} {
		if _, err := f.st.Nodes.Create(ctx, &apiv1.Node{Metadata: &apiv1.ObjectMeta{Name: name, Labels: labels}}); err != nil {
			t.Fatal(err)
		}
	}
	svc := newStorageClassService(f.srv)
	conn, err := svc.Connect(WithIdentity(ctx, Identity{Kind: Node, Node: "in"}), &apiv1.ConnectStorageClassRequest{Name: "ceph"})
	if err != nil || conn.GetStorageClass().GetSpec().GetRbd().GetKey() != testCephKey {
		t.Fatalf("selected node: %v %v", conn, err)
	}
	_, err = svc.Connect(WithIdentity(ctx, Identity{Kind: Node, Node: "out"}), &apiv1.ConnectStorageClassRequest{Name: "ceph"})
	if code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "spec.node_selector") {
		t.Fatalf("node the class does not select: %v", err)
	}
}

func TestStorageClassInUse(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	sc := f.storageClasses()
	vm := validVM("db")
	spec := vm.Spec.Template.Spec
	spec.Domain.Devices.Disks = append(spec.Domain.Devices.Disks, &apiv1.Disk{Name: "data", Disk: &apiv1.DiskTarget{Bus: "virtio"}})
	spec.Volumes = append(spec.Volumes, &apiv1.Volume{Name: "data", Persistent: &apiv1.PersistentVolume{Size: "1Gi", StorageClass: "ceph"}})
	_, err := f.vms.Create(ctx, &apiv1.CreateVirtualMachineRequest{Vm: vm})
	if code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "spec.template.spec.volumes[1].persistent.storage_class") || !strings.Contains(err.Error(), "ceph") {
		t.Fatalf("VM on a class that does not exist: %v", err)
	}
	if _, err := sc.Create(ctx, &apiv1.CreateStorageClassRequest{StorageClass: rbdClass("ceph")}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.vms.Create(ctx, &apiv1.CreateVirtualMachineRequest{Vm: vm}); err != nil {
		t.Fatal(err)
	}
	_, err = sc.Delete(ctx, &apiv1.DeleteStorageClassRequest{Name: "ceph"})
	if code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "vm default/db") {
		t.Fatalf("delete of a class in use: %v", err)
	}
	if _, err := f.vms.Delete(ctx, &apiv1.DeleteVirtualMachineRequest{Key: &apiv1.ObjectKey{Namespace: "default", Name: "db"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := sc.Delete(ctx, &apiv1.DeleteStorageClassRequest{Name: "ceph"}); err != nil {
		t.Fatalf("delete once unused: %v", err)
	}
}
