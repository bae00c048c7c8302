package restore

import (
	"slices"
	"strings"
	"testing"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// onRBD makes the fixture's content one of an rbd volume: an RBD
// snapshot, taken by node n1 (online), and data's class in the spec.
func onRBD(f *fixture, t *testing.T, extraLocal bool) {
	t.Helper()
	f.contents.Update(t, "default", apiv1.SnapshotContentName("snap-uid"), func(ct *apiv1.VirtualMachineSnapshotContent) {
		ct.Spec.Source.Spec.Template.Spec.Volumes[0].Persistent.StorageClass = "ceph"
		ct.Status.VolumeBackups = []*apiv1.VolumeBackup{{VolumeName: "data", StorageClass: "ceph", RbdSnapshot: "vp/vm-vm-uid-vol-data@snap-c"}}
		if extraLocal {
			ct.Status.VolumeBackups = append(ct.Status.VolumeBackups, &apiv1.VolumeBackup{VolumeName: "logs", Path: "/data/snapshots/c/logs.qcow2"})
		}
	})
}

// An RBD snapshot is restored by the storage controller alone: no node,
// no node label or finalizer; the commit point waits for its
// storage_staged, the end for its storage_swapped.
func TestRestoreOfRBDSnapshotNeedsNoNode(t *testing.T) {
	f := newFixture(t, newRestore("web"), nil, changedVM())
	onRBD(f, t, false)
	f.settle(t)
	r := f.restore(t)
	st := r.Status
	if st.Phase != apiv1.RestoreStaging || st.NodeName != "" || r.Metadata.Labels[apiv1.LabelNodeName] != "" ||
		slices.Contains(r.Metadata.Finalizers, apiv1.FinalizerRestoreData) || !st.Staged || !st.Swapped ||
		st.StorageStaged || st.StorageSwapped || len(st.Restores) != 1 || !st.Restores[0].OnRBD() || st.Restores[0].StorageClass != "ceph" {
		t.Fatalf("restore %v", r)
	}
	f.node(t, func(st *apiv1.VirtualMachineRestoreStatus) { st.StorageStaged = true })
	f.settle(t)
	if st := f.restore(t).Status; st.Phase != apiv1.RestoreCommitting || !st.SpecRestored {
		t.Fatalf("status %v", st)
	}
	if vm := f.vm("web"); vm.Status.RestoreInProgress != "rest" {
		t.Fatal("unlocked before the storage controller swapped the images")
	}
	f.node(t, func(st *apiv1.VirtualMachineRestoreStatus) { st.StorageSwapped = true })
	f.settle(t)
	if st := f.restore(t).Status; st.Phase != apiv1.RestoreSucceeded || !st.Complete {
		t.Fatalf("status %v", st)
	}
}

// A snapshot with both: the node stages the files, the storage
// controller the RBD snapshots; the commit point needs both.
func TestRestoreMixedWaitsForBothParts(t *testing.T) {
	f := newFixture(t, newRestore("web"), nil, changedVM())
	onRBD(f, t, true)
	f.settle(t)
	r := f.restore(t)
	if st := r.Status; st.NodeName != "n1" || r.Metadata.Labels[apiv1.LabelNodeName] != "n1" || st.Staged || st.StorageStaged {
		t.Fatalf("restore %v", r)
	}
	f.node(t, func(st *apiv1.VirtualMachineRestoreStatus) { st.Staged = true })
	f.settle(t)
	if st := f.restore(t).Status; st.Phase != apiv1.RestoreStaging {
		t.Fatalf("committed without the RBD part: %v", st)
	}
	f.node(t, func(st *apiv1.VirtualMachineRestoreStatus) { st.StorageStaged = true })
	f.settle(t)
	f.node(t, func(st *apiv1.VirtualMachineRestoreStatus) { st.Swapped = true })
	f.settle(t)
	if st := f.restore(t).Status; st.Phase != apiv1.RestoreCommitting {
		t.Fatalf("ended without the RBD swap: %v", st)
	}
	f.node(t, func(st *apiv1.VirtualMachineRestoreStatus) { st.StorageSwapped = true })
	f.settle(t)
	if st := f.restore(t).Status; st.Phase != apiv1.RestoreSucceeded {
		t.Fatalf("status %v", st)
	}
}

// The node that took an RBD snapshot is deleted: the restore goes on
// without it, and a target whose last node was another is restored too
// (an rbd volume pins no VM); a new target is not pinned to the gone
// node.
func TestRestoreOfRBDSnapshotAfterItsNodeWasDeleted(t *testing.T) {
	vm := changedVM()
	vm.Status.NodeName = "n2"
	f := newFixture(t, newRestore("web"), nil, vm)
	onRBD(f, t, false)
	f.goneNodes["n1"] = true
	f.settle(t)
	if st := f.restore(t).Status; st.Phase != apiv1.RestoreStaging || st.Error != "" {
		t.Fatalf("status %v", st)
	}

	r := newRestore("copy")
	r.Spec.NewIdentity = true
	g := newFixture(t, r, nil, sourceVM())
	onRBD(g, t, false)
	g.goneNodes["n1"] = true
	g.settle(t)
	if vm := g.vm("copy"); vm == nil || vm.Status.NodeName != "" {
		t.Fatalf("new target %v: want one pinned to no node", vm)
	}
}

// A local volume's copy went with its deleted node: the restore fails at
// once, saying so, rather than waiting for a node that never comes.
func TestRestoreFailsWhenTheCopiesNodeIsGone(t *testing.T) {
	f := newFixture(t, newRestore("web"), nil, changedVM())
	f.goneNodes["n1"] = true
	f.settle(t)
	st := f.restore(t).Status
	if st.Phase != apiv1.RestoreFailed || !strings.Contains(st.Error, `node "n1", which was deleted`) {
		t.Fatalf("status %v", st)
	}
	if vm := f.vm("web"); vm.Status.RestoreInProgress != "" {
		t.Fatal("target left locked")
	}
}

// The storage controller's error fails the restore before its commit
// point.
func TestRestoreFailsOnTheStorageControllersError(t *testing.T) {
	f := newFixture(t, newRestore("web"), nil, changedVM())
	onRBD(f, t, false)
	f.settle(t)
	f.node(t, func(st *apiv1.VirtualMachineRestoreStatus) { st.Error = "volume data: the RBD snapshot: not found" })
	f.settle(t)
	if st := f.restore(t).Status; st.Phase != apiv1.RestoreFailed || !strings.Contains(st.Error, "not found") {
		t.Fatalf("status %v", st)
	}
}
