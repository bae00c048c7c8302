package backup

import (
	"context"
	"slices"
	"strings"
	"testing"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// A backup takes a snapshot it owns, hands the upload to the content's
// node with what the node needs, and succeeds with the node's upload;
// the next backup of the VM to the target is incremental to it, and once
// that one succeeds only its snapshot (the one with RBD snapshots) stays.
func TestBackupFlowBaseAndKeptSnapshot(t *testing.T) {
	f := newFixture(t)
	uid1 := f.newBackup("b1")
	f.settleBackup("default/b1")
	b := f.backup("b1")
	if b.Status.Phase != apiv1.BackupPending || b.Metadata.Labels[apiv1.LabelBackupVMUID] != vmUID || b.Status.Base != "" {
		t.Fatalf("first backup before its snapshot: %v", b)
	}
	snap := f.snaps.Get(t, "default", apiv1.BackupSnapshotName(uid1))
	if !ownedBy(snap, b) || snap.Spec.Source != "web" || snap.Spec.DeletionPolicy != apiv1.DeletionPolicyDelete {
		t.Fatalf("the backup's snapshot: %v", snap)
	}
	content1 := f.snapshotDone(snap.Metadata.Name, "n1", []string{"data"}, []string{"disk"})
	f.settleBackup("default/b1")
	b = f.backup("b1")
	if b.Status.Phase != apiv1.BackupInProgress || b.Status.NodeName != "n1" || b.Metadata.Labels[apiv1.LabelNodeName] != "n1" ||
		!slices.Contains(b.Metadata.Finalizers, apiv1.FinalizerBackupUpload) || b.Status.ContentUid != content1 ||
		!slices.Equal(b.Status.SnapshotVolumes, []string{"data", "disk"}) || b.Status.Source.GetMetadata().GetUid() != vmUID {
		t.Fatalf("first backup handed over: %v", b)
	}
	f.uploadDone("b1")
	f.settleBackup("default/b1")
	if b = f.backup("b1"); b.Status.Phase != apiv1.BackupSucceeded || b.Status.Completed == nil {
		t.Fatalf("first backup after its upload: %v", b.Status)
	}
	// Its snapshot holds RBD snapshots and it is the newest: kept.
	f.snaps.Get(t, "default", apiv1.BackupSnapshotName(uid1))

	f.clock.Step(60e9)
	uid2 := f.newBackup("b2")
	f.settleBackup("default/b2")
	b2 := f.backup("b2")
	if b2.Status.Base != uid1 || b2.Status.BaseBackup != "b1" || b2.Status.BaseContentUid != content1 {
		t.Fatalf("second backup's base: %v", b2.Status)
	}
	f.snapshotDone(apiv1.BackupSnapshotName(uid2), "n1", []string{"data"}, []string{"disk"})
	f.settleBackup("default/b2")
	f.uploadDone("b2")
	f.settleBackup("default/b2")
	f.settleBackup("default/b1")
	if s, err := f.snaps.Store.Get(context.Background(), "default", apiv1.BackupSnapshotName(uid1)); err == nil && s.GetMetadata().GetDeletionTimestamp() == nil {
		t.Fatal("the older backup's snapshot stays after a newer one succeeded")
	}
	f.snaps.Get(t, "default", apiv1.BackupSnapshotName(uid2)) // the newest's stays
}

// A VM with local volumes only keeps no snapshot after its backup: the
// next backup dedups against the target, it needs no RBD snapshot.
func TestBackupOfLocalVolumesKeepsNoSnapshot(t *testing.T) {
	f := newFixture(t)
	uid1 := f.newBackup("b1")
	f.settleBackup("default/b1")
	f.snapshotDone(apiv1.BackupSnapshotName(uid1), "n1", []string{"data"}, nil)
	f.settleBackup("default/b1")
	f.uploadDone("b1")
	f.settleBackup("default/b1")
	if _, err := f.snaps.Store.Get(context.Background(), "default", apiv1.BackupSnapshotName(uid1)); err == nil {
		t.Fatal("a local-only backup's snapshot stays")
	}
}

// The content's node must be one the target selects; a backup that
// cannot be uploaded fails with the field to look at.
func TestBackupFailsWhenTheTargetDoesNotSelectTheNode(t *testing.T) {
	f := newFixture(t)
	uid1 := f.newBackup("b1")
	f.settleBackup("default/b1")
	f.snapshotDone(apiv1.BackupSnapshotName(uid1), "n2", []string{"data"}, nil)
	f.settleBackup("default/b1")
	b := f.backup("b1")
	if b.Status.Phase != apiv1.BackupFailed || !strings.Contains(b.Status.Error, "does not select node n2") || !strings.Contains(b.Status.Error, "node_selector") {
		t.Fatalf("backup from a node the target does not select: %v", b.Status)
	}
}

// An rbd-only content with no node (the VM did not run) goes to a Ready
// node the target selects that reaches the class.
func TestBackupOfAnRBDOnlyVMPicksANode(t *testing.T) {
	f := newFixture(t)
	uid1 := f.newBackup("b1")
	f.settleBackup("default/b1")
	f.snapshotDone(apiv1.BackupSnapshotName(uid1), "", nil, []string{"disk"})
	f.settleBackup("default/b1")
	if b := f.backup("b1"); b.Status.NodeName != "n1" || b.Status.Phase != apiv1.BackupInProgress {
		t.Fatalf("rbd-only backup: %v", b.Status)
	}
}

// Deleting a backup with policy Delete deletes its manifest from the
// target; the node's finalizer is waited for, unless its node is gone.
func TestDeletingABackupDeletesItsManifest(t *testing.T) {
	f := newFixture(t)
	uid1 := f.newBackup("b1")
	f.settleBackup("default/b1")
	f.snapshotDone(apiv1.BackupSnapshotName(uid1), "n1", []string{"data"}, nil)
	f.settleBackup("default/b1")
	f.uploadDone("b1")
	f.settleBackup("default/b1")
	if got := f.manifests(); !slices.Equal(got, []string{uid1}) {
		t.Fatalf("manifests before the delete: %v", got)
	}
	if _, _, err := f.backups.Store.Delete(context.Background(), "default", "b1", storeDeleteOptions()); err != nil {
		t.Fatal(err)
	}
	f.sync()
	if _, err := f.bc.Reconcile(context.Background(), "default/b1"); err != nil {
		t.Fatal(err)
	}
	if got := f.manifests(); len(got) != 0 {
		t.Fatalf("manifests after deleting the backup: %v", got)
	}
	if _, err := f.backups.Store.Get(context.Background(), "default", "b1"); err == nil {
		t.Fatal("the backup stays after its finalizer")
	}
}

// A backup deleted while its node uploads waits for the node's release;
// a node deleted for good releases it.
func TestDeletingABackupWaitsForItsNode(t *testing.T) {
	f := newFixture(t)
	uid1 := f.newBackup("b1")
	f.settleBackup("default/b1")
	f.snapshotDone(apiv1.BackupSnapshotName(uid1), "n1", []string{"data"}, nil)
	f.settleBackup("default/b1")
	if _, _, err := f.backups.Store.Delete(context.Background(), "default", "b1", storeDeleteOptions()); err != nil {
		t.Fatal(err)
	}
	f.settleBackup("default/b1")
	if b := f.backup("b1"); !slices.Contains(b.Metadata.Finalizers, apiv1.FinalizerBackup) {
		t.Fatalf("released while its node uploads: %v", b.Metadata)
	}
	f.gone["n1"] = true
	for range 5 {
		f.sync()
		if _, err := f.bc.Reconcile(context.Background(), "default/b1"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.backups.Store.Get(context.Background(), "default", "b1"); err == nil {
		t.Fatal("the backup stays after its node was deleted")
	}
}

// A VM deleted has no next backup: the snapshot kept for its rbd diff
// goes, so that it does not keep the VM's images in the pool.
func TestKeptSnapshotGoesWithTheVM(t *testing.T) {
	f := newFixture(t)
	uid1 := f.newBackup("b1")
	f.settleBackup("default/b1")
	f.snapshotDone(apiv1.BackupSnapshotName(uid1), "n1", nil, []string{"disk"})
	f.settleBackup("default/b1")
	f.uploadDone("b1")
	f.settleBackup("default/b1")
	f.snaps.Get(t, "default", apiv1.BackupSnapshotName(uid1)) // kept
	if _, _, err := f.vms.Store.Delete(context.Background(), "default", "web", storeDeleteOptions()); err != nil {
		t.Fatal(err)
	}
	f.settleBackup("default/b1")
	if _, err := f.snaps.Store.Get(context.Background(), "default", apiv1.BackupSnapshotName(uid1)); err == nil {
		t.Fatal("the snapshot stays after its VM was deleted")
	}
}
