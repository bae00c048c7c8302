package restore

import (
	"context"
	"testing"

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
}
