package restore

import (
	"context"
	"testing"

	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// Issue 33 (defect 7): a restore names its snapshot and target by name,
// and names resolve in the restore's own namespace only. A restore in
// team-b of "snap" onto "web", where only default has a snapshot snap
// and a VM web, waits for team-b's snapshot: it neither reads default's
// snapshot nor locks or makes a VM from it.
func TestRestoreResolvesNamesInItsNamespace(t *testing.T) {
	r := newRestore("web")
	r.Metadata.Namespace = "team-b"
	f := newFixture(t, r, nil, sourceVM())
	for range 3 {
		f.sync(t)
		if _, err := f.c.Reconcile(context.Background(), "team-b/rest"); err != nil {
			t.Fatal(err)
		}
	}
	got := f.restores.Get(t, "team-b", "rest").GetStatus()
	if got.GetPhase() != apiv1.RestorePending || got.GetMessage() != `VMSnapshot "snap" does not exist` {
		t.Errorf("status %v, want Pending on team-b's missing snapshot", got)
	}
	if got.GetTargetUid() != "" || len(got.GetRestores()) != 0 || got.GetNodeName() != "" {
		t.Errorf("status %v hands default's snapshot data to a node", got)
	}
	if vm := f.vm("web"); vm.GetStatus().GetRestoreInProgress() != "" {
		t.Errorf("default's VM web locked by team-b's restore: %v", vm.GetStatus())
	}
	if _, err := f.vms.Store.Get(context.Background(), "team-b", "web"); err == nil {
		t.Error("a VM was made in team-b from default's snapshot")
	}

	// team-b's own snapshot snap comes: the restore goes on from it, and
	// its target web is team-b's, which it makes, never default's web,
	// which it neither locks nor changes.
	snap, content := newSnapshot(), newContent()
	snap.Metadata.Namespace, snap.Metadata.Uid = "team-b", "snap-b-uid"
	snap.Status.ContentName, snap.Status.SourceUid = apiv1.SnapshotContentName("snap-b-uid"), "vm-b-uid"
	content.Metadata.Namespace, content.Metadata.Name = "team-b", apiv1.SnapshotContentName("snap-b-uid")
	content.Spec.SnapshotUid = "snap-b-uid"
	content.Spec.Source.Metadata.Namespace, content.Spec.Source.Metadata.Uid = "team-b", "vm-b-uid"
	content.Status.VolumeBackups = []*apiv1.VolumeBackup{{VolumeName: "data", Path: "/data/snapshots/b/data.qcow2"}}
	f.snaps.Store.Seed(snap)
	f.contents.Store.Seed(content)
	before := f.vm("web")
	for range 3 {
		f.sync(t)
		if _, err := f.c.Reconcile(context.Background(), "team-b/rest"); err != nil {
			t.Fatal(err)
		}
	}
	got = f.restores.Get(t, "team-b", "rest").GetStatus()
	made, err := f.vms.Store.Get(context.Background(), "team-b", "web")
	if err != nil || got.GetTargetUid() != made.GetMetadata().GetUid() || !got.GetTargetCreated() {
		t.Fatalf("status %v, team-b's web %v (%v): want team-b's web made and targeted", got, made, err)
	}
	if len(got.GetRestores()) != 1 || got.GetRestores()[0].GetSourcePath() != "/data/snapshots/b/data.qcow2" {
		t.Errorf("restores %v, want team-b's snapshot's volume", got.GetRestores())
	}
	if vm := f.vm("web"); !proto.Equal(vm, before) {
		t.Errorf("default's VM web changed by team-b's restore:\n%v\nwas\n%v", vm, before)
	}
}
