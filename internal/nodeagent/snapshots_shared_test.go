package nodeagent

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/nodedir"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/storage"
)

// fakeClasses is the StorageClasses service as a node sees it: the
// classes that select it, by name.
type fakeClasses map[string]*apiv1.StorageClass

func (f fakeClasses) List(context.Context, *apiv1.ListStorageClassesRequest, ...grpc.CallOption) (*apiv1.ListStorageClassesResponse, error) {
	out := &apiv1.ListStorageClassesResponse{}
	for _, sc := range f {
		out.Items = append(out.Items, sc)
	}
	return out, nil
}

// Watch is refused: the tests sync the room themselves.
func (f fakeClasses) Watch(context.Context, *apiv1.WatchStorageClassesRequest, ...grpc.CallOption) (grpc.ServerStreamingClient[apiv1.StorageClassEvent], error) {
	return nil, status.Error(codes.Unimplemented, "no watch in unit tests")
}

func (f fakeClasses) Connect(_ context.Context, in *apiv1.ConnectStorageClassRequest, _ ...grpc.CallOption) (*apiv1.StorageClassConnection, error) {
	sc, ok := f[in.GetName()]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "storage class %s not found", in.GetName())
	}
	return &apiv1.StorageClassConnection{StorageClass: sc}, nil
}

// withSharedClass gives the unit's snapshot and restore roles the real
// storage room over one shared filesystem class "nfs" (a directory of
// the test's), and returns its path.
func (u *snapUnit) withSharedClass() string {
	u.t.Helper()
	path := u.t.TempDir()
	api := fakeClasses{"nfs": {Metadata: &apiv1.ObjectMeta{Name: "nfs"},
		Spec: &apiv1.StorageClassSpec{SharedFilesystem: &apiv1.SharedFilesystemStorage{Path: path}}}}
	u.a.storage = storage.New(storage.Options{API: api, Dir: u.t.TempDir(), Clock: u.clock, Logger: testLogger(u.t)})
	u.a.storage.Sync(context.Background())
	u.a.newDataRoles()
	return path
}

// A volume on a shared filesystem is copied under the class's path (it
// outlives the node), and restored beside the target's volume there.
func TestSharedFilesystemVolumeSnapshotAndRestore(t *testing.T) {
	u := newSnapUnit(t)
	path := u.withSharedClass()
	vm := testUID("vm-shared")
	vmDir := filepath.Join(path, "virtplane", "vms", vm)
	if err := nodedir.MkdirTraversable(nodedir.VolumesDir(vmDir)); err != nil {
		t.Fatal(err)
	}
	// The volume as the disk room makes it on the class, with data A.
	local := u.volume(testUID("scratch"), "data", "A")
	live := filepath.Join(nodedir.VolumesDir(vmDir), "data.qcow2")
	if err := os.Rename(local, live); err != nil {
		t.Fatal(err)
	}
	c := u.content("c1", vm, "data")
	u.changeContent("c1", func(c *apiv1.VirtualMachineSnapshotContent) {
		c.Spec.Source.Spec = &apiv1.VirtualMachineSpec{Template: &apiv1.VirtualMachineInstanceTemplateSpec{Spec: &apiv1.VirtualMachineInstanceSpec{
			Volumes: []*apiv1.Volume{{Name: "data", Persistent: &apiv1.PersistentVolume{Size: "1Mi", StorageClass: "nfs"}}},
		}}}
	})
	u.reconcileContent("c1")
	st := u.getContent("c1").GetStatus()
	want := filepath.Join(path, "virtplane", "snapshots", c.Metadata.Uid, "data.qcow2")
	if st.GetPhase() != apiv1.SnapshotSucceeded || len(st.GetVolumeBackups()) != 1 ||
		st.GetVolumeBackups()[0].GetPath() != want || st.GetVolumeBackups()[0].GetStorageClass() != "nfs" {
		t.Fatalf("status %v: want the copy at %s", st, want)
	}
	wantSameData(t, live, want)
	if dirs, _ := os.ReadDir(u.a.layout.SnapshotsDir()); len(dirs) != 0 {
		t.Errorf("copies on the node's disk: %v", dirs)
	}

	// The VM wrote on; the restore puts A back.
	if err := os.Remove(live); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(u.volume(testUID("scratch2"), "data", "B"), live); err != nil {
		t.Fatal(err)
	}
	b := st.GetVolumeBackups()[0]
	r := u.restore("r1", vm, []*apiv1.VolumeRestore{{VolumeName: "data", SourcePath: b.GetPath(), StorageClass: "nfs"}})
	if err := u.reconcileRestore("r1"); err != nil {
		t.Fatal(err)
	}
	staged := live + ".restore-" + r.Metadata.Uid
	if st := u.getRestore("r1").GetStatus(); !st.GetStaged() || st.GetError() != "" {
		t.Fatalf("status %v, want staged", st)
	}
	wantSameData(t, want, staged)
	u.changeRestore("r1", func(r *apiv1.VirtualMachineRestore) { r.Status.Phase = apiv1.RestoreCommitting })
	if err := u.reconcileRestore("r1"); err != nil {
		t.Fatal(err)
	}
	if !u.getRestore("r1").GetStatus().GetSwapped() {
		t.Fatal("not swapped")
	}
	wantSameData(t, want, live)
	if _, err := os.Stat(staged); !os.IsNotExist(err) {
		t.Errorf("staged copy left: %v", err)
	}

	// Deleting the content removes its copy from the class.
	u.changeContent("c1", func(c *apiv1.VirtualMachineSnapshotContent) { c.Metadata.DeletionTimestamp = timestamppb.Now() })
	u.reconcileContent("c1")
	if _, err := os.Stat(filepath.Dir(want)); !os.IsNotExist(err) {
		t.Errorf("the copy's directory on the class after the content went: %v", err)
	}
}

// A source path outside the class's snapshots is refused.
func TestSharedRestoreRefusesForeignPaths(t *testing.T) {
	u := newSnapUnit(t)
	path := u.withSharedClass()
	vm := testUID("vm-shared2")
	u.restore("r1", vm, []*apiv1.VolumeRestore{{VolumeName: "data", SourcePath: filepath.Join(path, "virtplane", "vms", vm, "volumes", "data.qcow2"), StorageClass: "nfs"}})
	if err := u.reconcileRestore("r1"); err != nil {
		t.Fatal(err)
	}
	if st := u.getRestore("r1").GetStatus(); !strings.Contains(st.GetError(), "source_path") {
		t.Fatalf("status %v: want the source path refused", st)
	}
}

// A content copies only its namespace's VM from a shared filesystem too:
// the VM's directory there is owned (vm.json) like a node's own.
func TestSharedSnapshotCopiesOnlyItsNamespacesVM(t *testing.T) {
	u := newSnapUnit(t)
	path := u.withSharedClass()
	vm := testUID("vm-shared3")
	lay := nodedir.Layout{Root: filepath.Join(path, "virtplane")}
	if err := lay.EnsureVMDir(vm, "other", "web"); err != nil {
		t.Fatal(err)
	}
	dir, _ := lay.VMDir(vm)
	if err := nodedir.MkdirTraversable(nodedir.VolumesDir(dir)); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(u.volume(testUID("scratch3"), "data", "S"), filepath.Join(nodedir.VolumesDir(dir), "data.qcow2")); err != nil {
		t.Fatal(err)
	}
	u.content("c1", vm, "data")
	u.changeContent("c1", func(c *apiv1.VirtualMachineSnapshotContent) {
		c.Spec.Source.Spec = &apiv1.VirtualMachineSpec{Template: &apiv1.VirtualMachineInstanceTemplateSpec{Spec: &apiv1.VirtualMachineInstanceSpec{
			Volumes: []*apiv1.Volume{{Name: "data", Persistent: &apiv1.PersistentVolume{Size: "1Mi", StorageClass: "nfs"}}},
		}}}
	})
	u.reconcileContent("c1")
	if st := u.getContent("c1").GetStatus(); st.GetPhase() != apiv1.SnapshotFailed || !strings.Contains(st.GetError(), "spec.source") {
		t.Fatalf("status %v: want the other namespace's VM refused", st)
	}
	if _, err := os.Stat(filepath.Join(path, "virtplane", "snapshots")); err == nil {
		if entries, _ := os.ReadDir(filepath.Join(path, "virtplane", "snapshots")); len(entries) != 0 {
			t.Errorf("copies made of another namespace's VM: %v", entries)
		}
	}
}
