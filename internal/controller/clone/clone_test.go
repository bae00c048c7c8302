package clone

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller/controllertest"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
	"github.com/virtplane/terraform-provider-virtplane/internal/store/memstore"
)

var t0 = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

type fixture struct {
	c        *Controller
	clones   controllertest.Cache[*apiv1.VirtualMachineClone]
	snaps    controllertest.Cache[*apiv1.VirtualMachineSnapshot]
	restores controllertest.Cache[*apiv1.VirtualMachineRestore]
	vms      controllertest.Cache[*apiv1.VirtualMachine]
}

func newFixture(t *testing.T, cl *apiv1.VirtualMachineClone, vms ...*apiv1.VirtualMachine) *fixture {
	t.Helper()
	db := memstore.NewDB(func() time.Time { return t0 })
	f := &fixture{
		clones:   controllertest.NewCache(db, store.Clones, cl),
		snaps:    controllertest.NewCache(db, store.Snapshots),
		restores: controllertest.NewCache(db, store.Restores),
		vms:      controllertest.NewCache(db, store.VirtualMachines, vms...),
	}
	f.c = New(Options{Clock: func() time.Time { return t0 }}, f.clones.Informer, f.snaps.Informer, f.restores.Informer, f.vms.Informer,
		f.clones.Store, f.snaps.Store, f.restores.Store, controllertest.Discard())
	return f
}

// settle syncs and reconciles until a pass writes nothing.
func (f *fixture) settle(t *testing.T) {
	t.Helper()
	for range 20 {
		f.clones.Sync(t)
		f.snaps.Sync(t)
		f.restores.Sync(t)
		f.vms.Sync(t)
		f.clones.Store.ResetWrites()
		f.snaps.Store.ResetWrites()
		f.restores.Store.ResetWrites()
		if _, err := f.c.Reconcile(context.Background(), "default/cl"); err != nil {
			t.Fatalf("reconcile: %v", err)
		}
		if len(f.clones.Store.Writes())+len(f.snaps.Store.Writes())+len(f.restores.Store.Writes()) == 0 {
			return
		}
	}
	t.Fatal("the clone did not settle")
}

func (f *fixture) clone(t *testing.T) *apiv1.VirtualMachineClone {
	t.Helper()
	return f.clones.Get(t, "default", "cl")
}

func (f *fixture) exists(name string, snapshot bool) bool {
	var err error
	if snapshot {
		_, err = f.snaps.Store.Get(context.Background(), "default", name)
	} else {
		_, err = f.restores.Store.Get(context.Background(), "default", name)
	}
	return err == nil
}

func newClone(kind, source string) *apiv1.VirtualMachineClone {
	return &apiv1.VirtualMachineClone{
		Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: "cl", Uid: "cl-uid", CreationTimestamp: timestamppb.New(t0)},
		Spec: &apiv1.VirtualMachineCloneSpec{SourceKind: kind, SourceName: source, Target: "copy",
			NewMacAddresses: map[string]string{"default": "02:aa:00:00:00:01"},
			Labels:          map[string]string{"app": "copy"}, Annotations: map[string]string{"note": "n"}},
	}
}

func vm(name string) *apiv1.VirtualMachine {
	return &apiv1.VirtualMachine{Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: name, Uid: name + "-uid"}}
}

// From a VM: snapshot, then a restore with a new identity, then both
// deleted and the target's uid recorded.
func TestCloneFromVM(t *testing.T) {
	f := newFixture(t, newClone("", "web"), vm("web"))
	f.settle(t)
	cl := f.clone(t)
	snapName := apiv1.CloneSnapshotName("cl-uid")
	if cl.Status.GetPhase() != apiv1.CloneSnapshotInProgress || cl.Status.SnapshotName != snapName || len(cl.Metadata.Finalizers) != 1 {
		t.Fatalf("clone %v", cl)
	}
	s := f.snaps.Get(t, "default", snapName)
	if s.Spec.Source != "web" || s.Metadata.Labels[apiv1.LabelCloneSource] != "cl" {
		t.Fatalf("snapshot %v", s)
	}
	f.snaps.Update(t, "default", snapName, func(s *apiv1.VirtualMachineSnapshot) {
		s.Status = &apiv1.VirtualMachineSnapshotStatus{Phase: apiv1.SnapshotSucceeded, ReadyToUse: true}
	})
	f.settle(t)
	restName := apiv1.CloneRestoreName("cl-uid")
	if cl := f.clone(t); cl.Status.Phase != apiv1.CloneRestoreInProgress || cl.Status.RestoreName != restName {
		t.Fatalf("clone %v", cl)
	}
	r := f.restores.Get(t, "default", restName)
	if r.Spec.Target != "copy" || r.Spec.Snapshot != snapName || !r.Spec.NewIdentity ||
		r.Spec.MacAddresses["default"] != "02:aa:00:00:00:01" || r.Spec.Labels["app"] != "copy" || r.Spec.Annotations["note"] != "n" ||
		r.Metadata.Labels[apiv1.LabelCloneSource] != "cl" {
		t.Fatalf("restore %v", r)
	}
	f.restores.Update(t, "default", restName, func(r *apiv1.VirtualMachineRestore) {
		r.Status = &apiv1.VirtualMachineRestoreStatus{Phase: apiv1.RestoreSucceeded, Complete: true, TargetUid: "copy-uid"}
	})
	f.settle(t)
	if cl := f.clone(t); cl.Status.Phase != apiv1.CloneSucceeded || cl.Status.TargetUid != "copy-uid" {
		t.Fatalf("clone %v", cl)
	}
	if f.exists(snapName, true) || f.exists(restName, false) {
		t.Fatal("snapshot or restore left behind")
	}
}

// From a snapshot: only a restore, and the user's snapshot stays.
func TestCloneFromSnapshot(t *testing.T) {
	f := newFixture(t, newClone(apiv1.CloneSourceSnapshot, "snap"))
	f.snaps.Store.Seed(&apiv1.VirtualMachineSnapshot{Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: "snap", Uid: "s"}})
	f.settle(t)
	restName := apiv1.CloneRestoreName("cl-uid")
	if r := f.restores.Get(t, "default", restName); r.Spec.Snapshot != "snap" {
		t.Fatalf("restore %v", r)
	}
	f.restores.Update(t, "default", restName, func(r *apiv1.VirtualMachineRestore) {
		r.Status = &apiv1.VirtualMachineRestoreStatus{Phase: apiv1.RestoreFailed, Error: "boom"}
	})
	f.settle(t)
	if cl := f.clone(t); cl.Status.Phase != apiv1.CloneFailed || cl.Status.Error != `restore "`+restName+`" failed: boom` {
		t.Fatalf("clone %v", cl)
	}
	if !f.exists("snap", true) || f.exists(restName, false) {
		t.Fatal("wrong objects deleted")
	}
}

func TestCloneFailures(t *testing.T) {
	t.Run("target exists", func(t *testing.T) {
		f := newFixture(t, newClone("", "web"), vm("web"), vm("copy"))
		f.settle(t)
		if cl := f.clone(t); cl.Status.GetPhase() != apiv1.CloneFailed || cl.Status.Error != `target VM "copy" already exists` {
			t.Fatalf("clone %v", cl)
		}
		if f.exists(apiv1.CloneSnapshotName("cl-uid"), true) {
			t.Fatal("snapshot made")
		}
	})
	t.Run("snapshot failed", func(t *testing.T) {
		f := newFixture(t, newClone("", "web"), vm("web"))
		f.settle(t)
		snapName := apiv1.CloneSnapshotName("cl-uid")
		f.snaps.Update(t, "default", snapName, func(s *apiv1.VirtualMachineSnapshot) {
			s.Status = &apiv1.VirtualMachineSnapshotStatus{Phase: apiv1.SnapshotFailed, Error: "snapshot deadline exceeded"}
		})
		f.settle(t)
		if cl := f.clone(t); cl.Status.Phase != apiv1.CloneFailed || cl.Status.Error != `snapshot "`+snapName+`" failed: snapshot deadline exceeded` {
			t.Fatalf("clone %v", cl)
		}
		if f.exists(snapName, true) {
			t.Fatal("snapshot left")
		}
	})
}

// Deleting a clone deletes what it made (even what the cache has not
// shown yet), then releases it.
func TestCloneDeletion(t *testing.T) {
	f := newFixture(t, newClone("", "web"), vm("web"))
	f.settle(t)
	f.clones.Update(t, "default", "cl", func(cl *apiv1.VirtualMachineClone) { cl.Metadata.DeletionTimestamp = cl.Metadata.CreationTimestamp })
	f.settle(t)
	if _, err := f.clones.Store.Get(context.Background(), "default", "cl"); err == nil {
		t.Fatal("clone not released")
	}
	if f.exists(apiv1.CloneSnapshotName("cl-uid"), true) {
		t.Fatal("snapshot left")
	}
}
