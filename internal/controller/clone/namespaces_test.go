package clone

import (
	"context"
	"strings"
	"testing"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// Issue 33 (defect 7): a clone's source and target are names in the
// clone's namespace. A clone in team-b of VM web, which only default
// has, fails without making a snapshot of default's VM; one of snapshot
// snap makes a restore in team-b only (which then finds no team-b
// snapshot: TestRestoreResolvesNamesInItsNamespace). default's VM copy,
// the clone's target name, is no reason to refuse team-b's clone.
func TestCloneResolvesNamesInItsNamespace(t *testing.T) {
	for _, kind := range []string{apiv1.CloneSourceVM, apiv1.CloneSourceSnapshot} {
		t.Run(kind, func(t *testing.T) {
			cl := newClone(kind, "web")
			if kind == apiv1.CloneSourceSnapshot {
				cl.Spec.SourceName = "snap"
			}
			cl.Metadata.Namespace = "team-b"
			f := newFixture(t, cl, vm("web"), vm("copy"))
			f.snaps.Store.Seed(&apiv1.VirtualMachineSnapshot{
				Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: "snap", Uid: "snap-uid"},
				Spec:     &apiv1.VirtualMachineSnapshotSpec{Source: "web"},
				Status:   &apiv1.VirtualMachineSnapshotStatus{Phase: apiv1.SnapshotSucceeded, ReadyToUse: true},
			})
			for range 3 {
				f.clones.Sync(t)
				f.snaps.Sync(t)
				f.restores.Sync(t)
				f.vms.Sync(t)
				if _, err := f.c.Reconcile(context.Background(), "team-b/cl"); err != nil {
					t.Fatal(err)
				}
			}
			got := f.clones.Get(t, "team-b", "cl").GetStatus()
			snaps, _, err := f.snaps.Store.List(context.Background(), store.ListOptions{Namespace: "default"})
			if err != nil {
				t.Fatal(err)
			}
			if len(snaps) != 1 {
				t.Errorf("default holds snapshots %v, want only its own", snaps)
			}
			restores, _, err := f.restores.Store.List(context.Background(), store.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range restores {
				if r.GetMetadata().GetNamespace() != "team-b" {
					t.Errorf("restore %s/%s made outside the clone's namespace", r.GetMetadata().GetNamespace(), r.GetMetadata().GetName())
				}
			}
			if kind == apiv1.CloneSourceVM && (got.GetPhase() != apiv1.CloneFailed || !strings.Contains(got.GetError(), `source VM "web" does not exist`)) {
				t.Errorf("clone status %v, want Failed: no VM web in team-b", got)
			}
			if kind == apiv1.CloneSourceSnapshot {
				r, err := f.restores.Store.Get(context.Background(), "team-b", got.GetRestoreName())
				if got.GetPhase() != apiv1.CloneRestoreInProgress || err != nil || r.GetSpec().GetSnapshot() != "snap" || r.GetSpec().GetTarget() != "copy" {
					t.Errorf("clone status %v, restore %v (%v); want team-b's restore of snap into copy under way", got, r, err)
				}
			}
		})
	}
}
