package storage

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/ceph"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller/controllertest"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
	"github.com/virtplane/terraform-provider-virtplane/internal/store/memstore"
	cephtest "github.com/virtplane/terraform-provider-virtplane/internal/testutil/ceph"
)

var shared cephtest.Shared

func TestMain(m *testing.M) {
	os.Exit(shared.CloseAfter(m.Run()))
}

var t0 = time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)

// volFixture is the storage controller's Volumes over in-memory stores and
// a real Ceph cluster (the package's shared one), reached from the
// host's namespace as the server reaches it, as a restricted user.
type volFixture struct {
	t        *testing.T
	cl       *cephtest.Cluster
	conn     *ceph.Conn // the class's, for the test's own look
	v        *Volumes
	now      time.Time
	classes  controllertest.Cache[*apiv1.StorageClass]
	nodes    controllertest.Cache[*apiv1.Node]
	contents controllertest.Cache[*apiv1.VirtualMachineSnapshotContent]
	restores controllertest.Cache[*apiv1.VirtualMachineRestore]
	snaps    controllertest.Cache[*apiv1.VirtualMachineSnapshot]
	vms      controllertest.Cache[*apiv1.VirtualMachine]
}

func newVolFixture(t *testing.T) *volFixture {
	t.Helper()
	cl, _ := shared.Get(t)
	user := "t" + strings.ToLower(t.Name())
	key, err := cl.CreateUser(t.Context(), user, "mon", "profile rbd", "osd", "profile rbd pool="+cl.Pool())
	if err != nil {
		t.Fatal(err)
	}
	f := &volFixture{t: t, cl: cl, now: t0}
	db := memstore.NewDB(func() time.Time { return f.now })
	f.classes = controllertest.NewCache(db, store.StorageClasses, &apiv1.StorageClass{
		Metadata: &apiv1.ObjectMeta{Name: "ceph"},
		Spec:     &apiv1.StorageClassSpec{Rbd: &apiv1.RBDStorage{Monitors: cl.Monitors(), Pool: cl.Pool(), User: user, Key: key}},
	})
	f.nodes = controllertest.NewCache(db, store.Nodes)
	f.contents = controllertest.NewCache(db, store.SnapshotContents)
	f.restores = controllertest.NewCache(db, store.Restores)
	f.snaps = controllertest.NewCache(db, store.Snapshots)
	f.vms = controllertest.NewCache(db, store.VirtualMachines)
	dir := t.TempDir()
	c := New(Options{Dir: dir, Clock: func() time.Time { return f.now }}, f.classes.Informer, f.nodes.Informer, f.classes.Store, controllertest.Discard())
	f.v = NewVolumes(c, VolumeOptions{Grace: 10 * time.Second}, f.contents.Informer, f.restores.Informer, f.snaps.Informer, f.vms.Informer,
		f.contents.Store, f.restores.Store, controllertest.Discard())
	keyFile := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(keyFile, []byte(key), 0o600); err != nil {
		t.Fatal(err)
	}
	f.conn = &ceph.Conn{Monitors: cl.Monitors(), Pool: cl.Pool(), User: user, KeyFile: keyFile}
	f.sync()
	return f
}

func (f *volFixture) sync() {
	f.t.Helper()
	f.classes.Sync(f.t)
	f.nodes.Sync(f.t)
	f.contents.Sync(f.t)
	f.restores.Sync(f.t)
	f.snaps.Sync(f.t)
	f.vms.Sync(f.t)
}

// reconcile syncs the caches and runs one pass over key.
func (f *volFixture) reconcile(key string) {
	f.t.Helper()
	f.sync()
	if _, err := f.v.Reconcile(context.Background(), key); err != nil {
		f.t.Fatalf("reconcile %s: %v", key, err)
	}
}

// fill writes byte b over the first 4 KiB of image (a guest's write).
func (f *volFixture) fill(image string, b byte) {
	f.t.Helper()
	target := "rbd:" + f.cl.Pool() + "/" + image + ":conf=" + f.cl.Conf()
	if out, err := f.cl.Exec(f.t.Context(), "qemu-io", "-f", "raw", "-c", fmt.Sprintf("write -P %#x 0 4k", b), target); err != nil {
		f.t.Fatalf("qemu-io write to %s: %v %s", image, err, out)
	}
}

// dataVolume makes the VM's 8 MiB volume "data" and removes whatever the
// test leaves of the VM's images (and the content's snapshots) at its end.
func (f *volFixture) dataVolume() string {
	f.t.Helper()
	data := ceph.VolumeImage(vmUID, "data")
	f.t.Cleanup(func() {
		for _, img := range f.images(vmUID) {
			_ = f.conn.SnapRemove(context.Background(), img, ceph.SnapshotName(contentUID))
			_ = f.conn.Remove(context.Background(), img)
		}
	})
	if err := f.conn.Create(f.t.Context(), data, 8<<20); err != nil {
		f.t.Fatal(err)
	}
	return data
}

// firstByte reads the first byte of image.
func (f *volFixture) firstByte(image string) byte {
	f.t.Helper()
	out := filepath.Join(f.t.TempDir(), "export")
	if _, err := f.cl.Admin(f.t.Context(), "rbd", "export", "--no-progress", f.cl.Pool()+"/"+image, out); err != nil {
		f.t.Fatalf("rbd export %s: %v", image, err)
	}
	b, err := os.ReadFile(out)
	if err != nil || len(b) == 0 {
		f.t.Fatalf("reading the export of %s: %v", image, err)
	}
	return b[0]
}

// images are the pool's images of VM owner.
func (f *volFixture) images(owner string) []string {
	f.t.Helper()
	names, err := f.conn.List(context.Background()) // also in cleanups
	if err != nil {
		f.t.Fatal(err)
	}
	return slices.DeleteFunc(names, func(n string) bool { return ceph.OwnerOf(n) != owner })
}

// snapsOf are the user snapshots of image.
func (f *volFixture) snapsOf(image string) []string {
	f.t.Helper()
	snaps, err := f.conn.Snaps(f.t.Context(), image)
	if err != nil {
		f.t.Fatal(err)
	}
	var out []string
	for _, s := range snaps {
		out = append(out, s.Name)
	}
	return out
}

const (
	vmUID      = "0a0a0a0a-0000-4000-8000-0000000000a1"
	contentUID = "c1c1c1c1-0000-4000-8000-0000000000c1"
	snapUID    = "5a5a5a5a-0000-4000-8000-0000000000a1"
	restoreUID = "e1e1e1e1-0000-4000-8000-0000000000e1"
)

// vm is VM web (uid vmUID) with volumes data and logs on class ceph and
// a local one, root.
func vm() *apiv1.VirtualMachine {
	return &apiv1.VirtualMachine{
		Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: "web", Uid: vmUID},
		Spec: &apiv1.VirtualMachineSpec{Template: &apiv1.VirtualMachineInstanceTemplateSpec{Spec: &apiv1.VirtualMachineInstanceSpec{
			Volumes: []*apiv1.Volume{
				{Name: "root", Persistent: &apiv1.PersistentVolume{Size: "8Mi"}},
				{Name: "data", Persistent: &apiv1.PersistentVolume{Size: "8Mi", StorageClass: "ceph"}},
				{Name: "logs", Persistent: &apiv1.PersistentVolume{Size: "8Mi", StorageClass: "ceph"}},
			},
		}}},
	}
}

// TestRBDSnapshotRestoreAndCollection is the server's part of a VM's
// volumes on RBD through their life: an offline snapshot taken with no
// node (a volume never provisioned left out), a restore in place cloned
// in Staging without touching the live volume and swapped in past the
// commit point, also after a pass killed between its renames; then the
// collection: nothing removed within the grace, the content's RBD
// snapshot once the content is gone, the retired image once it has no
// snapshot, and the VM's image once the VM is gone.
func TestRBDSnapshotRestoreAndCollection(t *testing.T) {
	f := newVolFixture(t)
	ctx := t.Context()
	data := f.dataVolume()
	f.fill(data, 0x11)
	f.vms.Store.Seed(vm())

	// The snapshot: a content with no node.
	src := vm()
	f.contents.Store.Seed(&apiv1.VirtualMachineSnapshotContent{
		Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: apiv1.SnapshotContentName(snapUID), Uid: contentUID},
		Spec: &apiv1.VirtualMachineSnapshotContentSpec{SnapshotName: "snap", SnapshotUid: snapUID, Source: src,
			Volumes: []string{"root", "data", "logs"}},
	})
	f.snaps.Store.Seed(&apiv1.VirtualMachineSnapshot{
		Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: "snap", Uid: snapUID},
		Spec:     &apiv1.VirtualMachineSnapshotSpec{Source: "web"},
		Status:   &apiv1.VirtualMachineSnapshotStatus{Phase: apiv1.SnapshotSucceeded, ReadyToUse: true, ContentName: apiv1.SnapshotContentName(snapUID)},
	})
	contentKey := keyContent + "default/" + apiv1.SnapshotContentName(snapUID)
	f.reconcile(contentKey)
	ct := f.contents.Get(t, "default", apiv1.SnapshotContentName(snapUID))
	st := ct.GetStatus()
	if st.GetPhase() != apiv1.SnapshotSucceeded || !st.GetReadyToUse() || len(st.GetVolumeBackups()) != 1 {
		t.Fatalf("content status %v: want one RBD snapshot (root is local, logs never provisioned)", st)
	}
	if b := st.GetVolumeBackups()[0]; b.GetVolumeName() != "data" || b.GetStorageClass() != "ceph" ||
		b.GetRbdSnapshot() != f.cl.Pool()+"/"+data+"@"+ceph.SnapshotName(contentUID) || b.GetVirtualSizeBytes() != 8<<20 {
		t.Fatalf("backup %v", b)
	}
	f.fill(data, 0x22) // the VM ran on after the snapshot

	// The restore, in place.
	r := &apiv1.VirtualMachineRestore{
		Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: "rest", Uid: restoreUID},
		Spec:     &apiv1.VirtualMachineRestoreSpec{Target: "web", Snapshot: "snap"},
		Status: &apiv1.VirtualMachineRestoreStatus{Phase: apiv1.RestoreStaging, TargetUid: vmUID, Staged: true, Swapped: true,
			Restores: []*apiv1.VolumeRestore{{VolumeName: "data", StorageClass: "ceph", RbdSnapshot: st.GetVolumeBackups()[0].GetRbdSnapshot()}}},
	}
	f.restores.Store.Seed(r)
	restoreKey := keyRestore + "default/rest"
	f.reconcile(restoreKey)
	if rs := f.restores.Get(t, "default", "rest").GetStatus(); !rs.GetStorageStaged() || rs.GetStorageSwapped() || rs.GetError() != "" {
		t.Fatalf("after staging: %v", rs)
	}
	if got := f.firstByte(data); got != 0x22 {
		t.Fatalf("the live volume reads %#x after staging, want 0x22: staging must not touch it", got)
	}
	// Past the commit point; a server killed after the first rename.
	f.restores.Update(t, "default", "rest", func(r *apiv1.VirtualMachineRestore) { r.Status.Phase = apiv1.RestoreCommitting })
	if err := f.conn.Retire(ctx, vmUID, "data", restoreUID); err != nil {
		t.Fatal(err)
	}
	f.reconcile(restoreKey)
	if rs := f.restores.Get(t, "default", "rest").GetStatus(); !rs.GetStorageSwapped() {
		t.Fatalf("after the swap: %v", rs)
	}
	if got := f.firstByte(data); got != 0x11 {
		t.Fatalf("the restored volume reads %#x, want the snapshot's 0x11", got)
	}
	retired := ceph.RetiredImage(vmUID, "data", restoreUID)
	if imgs := f.images(vmUID); !slices.Equal(imgs, []string{data, retired}) && !slices.Equal(imgs, []string{retired, data}) {
		t.Fatalf("images %v: want the restored volume and the retired one, which holds the snapshot", imgs)
	}

	// Collection: the restore ended; nothing goes while the content is
	// there, then its snapshot and the retired image go after a grace.
	collect := keyCollect + "ceph"
	f.reconcile(collect)
	if imgs := f.images(vmUID); len(imgs) != 2 {
		t.Fatalf("collected while the content needs the retired image: %v", imgs)
	}
	if _, _, err := f.contents.Store.Delete(ctx, "default", apiv1.SnapshotContentName(snapUID), store.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.reconcile(collect)
	if got := f.snapsOf(retired); !slices.Contains(got, ceph.SnapshotName(contentUID)) {
		t.Fatalf("the RBD snapshot went before the grace: %v", got)
	}
	f.now = f.now.Add(10 * time.Second)
	f.reconcile(collect)
	if got := f.snapsOf(retired); len(got) != 0 {
		t.Fatalf("snapshots of the retired image after the content went: %v", got)
	}
	// The restored volume is a clone of the retired image: Ceph keeps
	// the snapshot it reads from in its trash, and the image with it.
	if imgs := f.images(vmUID); len(imgs) != 2 {
		t.Fatalf("images %v: want the restored volume and its parent", imgs)
	}
	if got := f.firstByte(data); got != 0x11 {
		t.Fatalf("the restored volume reads %#x after its parent snapshot went", got)
	}

	// The VM goes: the collection removes its image a grace later, and
	// in the same pass its parent, which the restored clone no longer
	// reads from.
	if _, _, err := f.vms.Store.Delete(ctx, "default", "web", store.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.reconcile(collect)
	if imgs := f.images(vmUID); len(imgs) != 2 {
		t.Fatalf("the VM's images went at the first look: %v", imgs)
	}
	f.now = f.now.Add(10 * time.Second)
	f.reconcile(collect)
	if imgs := f.images(vmUID); len(imgs) != 0 {
		t.Fatalf("images of the deleted VM left: %v", imgs)
	}
}

// A restore that failed before its commit point has its clones removed,
// and the target's live volume is as it was.
func TestFailedRBDRestoreDropsItsClones(t *testing.T) {
	f := newVolFixture(t)
	ctx := t.Context()
	data := f.dataVolume()
	if _, err := f.conn.SnapshotVolume(ctx, vmUID, "data", contentUID); err != nil {
		t.Fatal(err)
	}
	if err := f.conn.StageRestore(ctx, vmUID, "data", contentUID, vmUID, restoreUID); err != nil {
		t.Fatal(err)
	}
	f.restores.Store.Seed(&apiv1.VirtualMachineRestore{
		Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: "rest", Uid: restoreUID},
		Spec:     &apiv1.VirtualMachineRestoreSpec{Target: "web", Snapshot: "snap"},
		Status: &apiv1.VirtualMachineRestoreStatus{Phase: apiv1.RestoreFailed, TargetUid: vmUID, StorageStaged: true,
			Restores: []*apiv1.VolumeRestore{{VolumeName: "data", StorageClass: "ceph", RbdSnapshot: "vp/x@y"}}},
	})
	f.reconcile(keyRestore + "default/rest")
	if imgs := f.images(vmUID); !slices.Equal(imgs, []string{data}) {
		t.Fatalf("images %v: want the live volume alone", imgs)
	}
}

// A restore whose content's snapshot is missing in the pool fails with
// the cause (the restore controller fails the restore for it).
func TestRBDRestoreOfAMissingSnapshotFails(t *testing.T) {
	f := newVolFixture(t)
	src := vm()
	f.snaps.Store.Seed(&apiv1.VirtualMachineSnapshot{
		Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: "snap", Uid: snapUID},
		Status:   &apiv1.VirtualMachineSnapshotStatus{Phase: apiv1.SnapshotSucceeded, ContentName: apiv1.SnapshotContentName(snapUID)},
	})
	f.contents.Store.Seed(&apiv1.VirtualMachineSnapshotContent{
		Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: apiv1.SnapshotContentName(snapUID), Uid: contentUID},
		Spec:     &apiv1.VirtualMachineSnapshotContentSpec{SnapshotName: "snap", SnapshotUid: snapUID, Source: src, Volumes: []string{"data"}},
	})
	f.restores.Store.Seed(&apiv1.VirtualMachineRestore{
		Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: "rest", Uid: restoreUID},
		Spec:     &apiv1.VirtualMachineRestoreSpec{Target: "web", Snapshot: "snap"},
		Status: &apiv1.VirtualMachineRestoreStatus{Phase: apiv1.RestoreStaging, TargetUid: vmUID,
			Restores: []*apiv1.VolumeRestore{
				{VolumeName: "data", StorageClass: "ceph", RbdSnapshot: "vp/x@y"},
			}},
	})
	f.reconcile(keyRestore + "default/rest")
	if st := f.restores.Get(t, "default", "rest").GetStatus(); st.GetStorageStaged() || !strings.Contains(st.GetError(), "not found") {
		t.Fatalf("status %v: want the missing snapshot named", st)
	}
	// A class other than the snapshot's volume's is refused.
	f.restores.Update(t, "default", "rest", func(r *apiv1.VirtualMachineRestore) {
		r.Status.Error = ""
		r.Status.Restores[0].StorageClass = "other"
	})
	f.reconcile(keyRestore + "default/rest")
	if st := f.restores.Get(t, "default", "rest").GetStatus(); !strings.Contains(st.GetError(), `not on storage class "other"`) {
		t.Fatalf("status %v", st)
	}
}
