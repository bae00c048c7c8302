package backup

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"
	clocktesting "k8s.io/utils/clock/testing"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/backup/repo"
	"github.com/virtplane/terraform-provider-virtplane/internal/backup/target"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller/controllertest"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
	"github.com/virtplane/terraform-provider-virtplane/internal/store/memstore"
)

var t0 = time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)

const vmUID = "6f1c2a3e-0000-4000-8000-0000000000aa"

// fixture is every cache the backup controllers read, in one memstore,
// a directory target in a temporary directory (a real repository), and
// the controllers over them.
type fixture struct {
	t        testing.TB
	clock    *clocktesting.FakeClock
	db       *memstore.DB
	backups  controllertest.Cache[*apiv1.VirtualMachineBackup]
	scheds   controllertest.Cache[*apiv1.VirtualMachineBackupSchedule]
	restores controllertest.Cache[*apiv1.VirtualMachineBackupRestore]
	snaps    controllertest.Cache[*apiv1.VirtualMachineSnapshot]
	contents controllertest.Cache[*apiv1.VirtualMachineSnapshotContent]
	vms      controllertest.Cache[*apiv1.VirtualMachine]
	nodes    controllertest.Cache[*apiv1.Node]
	targets  controllertest.Cache[*apiv1.BackupTarget]
	classes  controllertest.Cache[*apiv1.StorageClass]
	dir      string
	cache    *target.Cache
	bc       *Backups
	sc       *Schedules
	rc       *Restores
	gone     map[string]bool
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	f := &fixture{t: t, clock: clocktesting.NewFakeClock(t0), dir: t.TempDir(), cache: target.NewCache(), gone: map[string]bool{}}
	f.db = memstore.NewDB(f.clock.Now)
	f.backups = controllertest.NewCache(f.db, store.Backups)
	f.scheds = controllertest.NewCache(f.db, store.BackupSchedules)
	f.restores = controllertest.NewCache(f.db, store.BackupRestores)
	f.snaps = controllertest.NewCache(f.db, store.Snapshots)
	f.contents = controllertest.NewCache(f.db, store.SnapshotContents)
	f.vms = controllertest.NewCache(f.db, store.VirtualMachines, &apiv1.VirtualMachine{
		Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: "web", Uid: vmUID, CreationTimestamp: timestamppb.New(t0)},
		Spec:     &apiv1.VirtualMachineSpec{},
	})
	ready := []*apiv1.Condition{{Type: apiv1.ConditionReady, Status: apiv1.ConditionTrue}}
	f.nodes = controllertest.NewCache(f.db, store.Nodes,
		&apiv1.Node{Metadata: &apiv1.ObjectMeta{Name: "n1", Labels: map[string]string{"backup": "yes"}},
			Status: &apiv1.NodeStatus{Conditions: ready, Schedulable: true, Storage: []*apiv1.NodeStorage{{Class: "ceph", Ready: true}}}},
		&apiv1.Node{Metadata: &apiv1.ObjectMeta{Name: "n2"}, Status: &apiv1.NodeStatus{Conditions: ready, Schedulable: true}})
	f.targets = controllertest.NewCache(f.db, store.BackupTargets, &apiv1.BackupTarget{
		Metadata: &apiv1.ObjectMeta{Name: "nfs"},
		Spec:     &apiv1.BackupTargetSpec{Directory: &apiv1.DirectoryBackupTarget{Path: f.dir}, NodeSelector: map[string]string{"backup": "yes"}},
	})
	f.classes = controllertest.NewCache(f.db, store.StorageClasses,
		&apiv1.StorageClass{Metadata: &apiv1.ObjectMeta{Name: "ceph"}, Spec: &apiv1.StorageClassSpec{Rbd: &apiv1.RBDStorage{Pool: "vp"}}})
	opts := Options{Clock: f.clock, Cluster: "test", NodeGone: func(n string) bool { return f.gone[n] }}
	f.bc = NewBackups(opts, f.backups.Informer, f.snaps.Informer, f.contents.Informer, f.vms.Informer, f.nodes.Informer,
		f.targets.Informer, f.classes.Informer, f.backups.Store, f.snaps.Store, f.cache, controllertest.Discard())
	f.sc = NewSchedules(opts, f.scheds.Informer, f.backups.Informer, f.targets.Informer, f.scheds.Store, f.backups.Store, f.cache, controllertest.Discard())
	f.rc = NewRestores(opts, validationOptions(), f.restores.Informer, f.vms.Informer, f.nodes.Informer, f.targets.Informer, f.classes.Informer,
		f.restores.Store, f.vms.Store, f.cache, controllertest.Discard())
	f.sync()
	return f
}

func (f *fixture) sync() {
	f.t.Helper()
	f.backups.Sync(f.t)
	f.scheds.Sync(f.t)
	f.restores.Sync(f.t)
	f.snaps.Sync(f.t)
	f.contents.Sync(f.t)
	f.vms.Sync(f.t)
	f.nodes.Sync(f.t)
	f.targets.Sync(f.t)
	f.classes.Sync(f.t)
}

// settleBackup reconciles backup key as the running controller would
// between events: a pass after each write becomes visible.
func (f *fixture) settleBackup(key string) {
	f.t.Helper()
	for range 8 {
		f.sync()
		if _, err := f.bc.Reconcile(context.Background(), key); err != nil {
			f.t.Fatalf("reconcile %s: %v", key, err)
		}
	}
	f.sync()
}

func (f *fixture) backup(name string) *apiv1.VirtualMachineBackup {
	f.t.Helper()
	return f.backups.Get(f.t, "default", name)
}

// newBackup stores a backup as the API makes it and returns its uid.
func (f *fixture) newBackup(name string) string {
	f.t.Helper()
	b, err := f.backups.Store.Create(context.Background(), &apiv1.VirtualMachineBackup{
		Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: name},
		Spec:     &apiv1.VirtualMachineBackupSpec{Source: "web", Target: "nfs", DeletionPolicy: apiv1.DeletionPolicyDelete},
		Status:   &apiv1.VirtualMachineBackupStatus{},
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return b.GetMetadata().GetUid()
}

// snapshotDone plays the snapshot controller and the node: the snapshot
// succeeds, with a content on node holding volumes (RBD snapshots for
// those in rbd).
func (f *fixture) snapshotDone(snapName, node string, local, rbd []string) string {
	f.t.Helper()
	ct := &apiv1.VirtualMachineSnapshotContent{
		Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: "content-" + snapName},
		Spec: &apiv1.VirtualMachineSnapshotContentSpec{SnapshotName: snapName, NodeName: node,
			Source: &apiv1.VirtualMachine{Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: "web", Uid: vmUID}}},
		Status: &apiv1.VirtualMachineSnapshotContentStatus{Phase: apiv1.SnapshotSucceeded, ReadyToUse: true},
	}
	for _, v := range local {
		ct.Status.VolumeBackups = append(ct.Status.VolumeBackups, &apiv1.VolumeBackup{VolumeName: v, Path: "/x/" + v + ".qcow2"})
	}
	for _, v := range rbd {
		ct.Status.VolumeBackups = append(ct.Status.VolumeBackups, &apiv1.VolumeBackup{VolumeName: v, StorageClass: "ceph", RbdSnapshot: "vp/img@snap"})
	}
	made, err := f.contents.Store.Create(context.Background(), ct)
	if err != nil {
		f.t.Fatal(err)
	}
	f.snaps.Update(f.t, "default", snapName, func(s *apiv1.VirtualMachineSnapshot) {
		s.Status = &apiv1.VirtualMachineSnapshotStatus{Phase: apiv1.SnapshotSucceeded, ReadyToUse: true, ContentName: ct.Metadata.Name}
	})
	return made.GetMetadata().GetUid()
}

// uploadDone plays the node: the upload succeeded with manifest id, a
// manifest put in the target, and the node's finalizer dropped.
func (f *fixture) uploadDone(name string) {
	f.t.Helper()
	b := f.backup(name)
	id := b.GetMetadata().GetUid()
	st, err := repo.OpenDir(f.dir)
	if err != nil {
		f.t.Fatal(err)
	}
	m := &repo.Manifest{ID: id, VMName: "web", VMUID: vmUID, Created: f.clock.Now(), Spec: []byte(`{}`)}
	if err := repo.New(st, repo.Options{}).PutManifest(context.Background(), m); err != nil {
		f.t.Fatal(err)
	}
	f.backups.Update(f.t, "default", name, func(b *apiv1.VirtualMachineBackup) {
		b.Status.UploadPhase, b.Status.ManifestId = apiv1.BackupSucceeded, id
		b.Metadata.Finalizers = removeString(b.Metadata.Finalizers, apiv1.FinalizerBackupUpload)
	})
}

func (f *fixture) manifests() []string {
	f.t.Helper()
	st, err := repo.OpenDir(f.dir)
	if err != nil {
		f.t.Fatal(err)
	}
	infos, err := repo.New(st, repo.Options{}).ListManifests(context.Background())
	if err != nil {
		f.t.Fatal(err)
	}
	var ids []string
	for _, i := range infos {
		ids = append(ids, i.ID)
	}
	return ids
}

func validationOptions() validation.Options {
	return validation.Options{HostPolicy: validation.DefaultHostPolicy()}
}

func storeDeleteOptions() store.DeleteOptions { return store.DeleteOptions{} }
