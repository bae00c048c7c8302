package e2e

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/nodedir"
	"github.com/virtplane/terraform-provider-virtplane/internal/testguest"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// heavyMiB is the size of the random data volume of the crash test: big
// enough that copying it keeps the node agent busy for a while, so the
// test can SIGKILL it in the middle (about a second per 100 MiB here).
const heavyMiB = 192

// TestSnapshotAndRestoreSurviveNodeAgentKill is issue 20's fourth
// acceptance point: the node agent is SIGKILLed while it copies an online
// snapshot and again while it stages a restore. Each ends either done or
// cleanly failed: the guest runs on its own volume files again with no
// overlay left, no partial copy stays behind, the restored VM holds the
// snapshot's data or exactly its old data, and deleting the snapshots
// leaves no file.
func TestSnapshotAndRestoreSurviveNodeAgentKill(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	img := randomImage(t, "e2e-random-"+c.ns+".raw", heavyMiB)
	c.create(c.counterVM("heavy", apiv1.RunStrategyAlways, img, "192Mi", testguest.GuestAgent()))
	vmi, con, _, _ := c.boot("heavy", "")
	cons := []*console{con}
	testutil.Eventually(t, stateTimeout, "the counter to run", func() bool { return maxTick(cons) >= 10 })
	vmUID := c.vm("heavy").GetMetadata().GetUid()

	// 1. Online snapshot, agent killed while the content is in progress.
	c.snapshotVM("s1", "heavy")
	c.killWhen(func() bool {
		s := c.getSnapshot("s1")
		if s.GetStatus().GetContentName() == "" {
			return false
		}
		content, err := c.api.SnapshotContents.Get(c.ctx, &apiv1.GetSnapshotContentRequest{Key: c.key(s.GetStatus().GetContentName())})
		return err == nil && content.GetStatus().GetPhase() == apiv1.SnapshotInProgress
	}, func() bool {
		p := c.getSnapshot("s1").GetStatus().GetPhase()
		return p == apiv1.SnapshotSucceeded || p == apiv1.SnapshotFailed
	}, "the snapshot content in progress")
	s1 := c.waitSnapshot("s1")
	t.Logf("snapshot across the kill: phase %s ready %v error %q indications %v", s1.GetStatus().GetPhase(),
		s1.GetStatus().GetReadyToUse(), s1.GetStatus().GetError(), s1.GetStatus().GetIndications())
	testutil.Eventually(t, stateTimeout, "heavy unlocked", func() bool { return c.vm("heavy").GetStatus().GetSnapshotInProgress() == "" })
	for _, src := range c.domainDiskSources("heavy") {
		if strings.Contains(src, ".snap-") {
			t.Errorf("domain still writes to snapshot overlay %s after the agent's restart", src)
		}
	}
	if got := slices.Sorted(slices.Values(c.volumeFiles(vmUID))); !slices.Equal(got, []string{"data.qcow2", "scratch.qcow2"}) {
		t.Errorf("volumes directory holds %v, want the two volumes only", got)
	}
	before := maxTick(cons)
	testutil.Eventually(t, stateTimeout, "the guest to go on counting", func() bool { return maxTick(cons) >= before+10 })
	if cur := c.vmi("heavy"); cur.GetMetadata().GetUid() != vmi.GetMetadata().GetUid() {
		t.Fatalf("instance replaced during the snapshot")
	}
	snapName := "s1"
	if s1.GetStatus().GetPhase() != apiv1.SnapshotSucceeded {
		// Cleanly failed: nothing of it stays; take one undisturbed.
		snapName = "s2"
		c.mustSnapshot(snapName, "heavy")
	}
	noPartialFiles(t, c)
	backup := c.backupOf(snapName, "data")
	qemuImgCheck(t, backup)

	// 2. Restore, agent killed while it stages the copies.
	c.stopVM("heavy")
	volume := nodedir.VolumesDir(c.vmDir(vmUID)) + "/data.qcow2"
	oldSum := fileSHA256(t, volume)
	c.restoreVM("r1", "heavy", snapName)
	c.killWhen(func() bool {
		r := c.getRestore("r1")
		return r.GetStatus().GetPhase() == apiv1.RestoreStaging || r.GetStatus().GetPhase() == apiv1.RestoreCommitting
	}, func() bool {
		r := c.getRestore("r1")
		return r.GetStatus().GetComplete() || r.GetStatus().GetPhase() == apiv1.RestoreFailed
	}, "the restore staging")
	r1 := c.waitRestore("r1")
	t.Logf("restore across the kill: phase %s complete %v error %q", r1.GetStatus().GetPhase(), r1.GetStatus().GetComplete(), r1.GetStatus().GetError())
	if got := c.vm("heavy").GetStatus().GetRestoreInProgress(); got != "" {
		t.Errorf("VM still locked by %q", got)
	}
	if r1.GetStatus().GetComplete() {
		if out, err := exec.Command("qemu-img", "compare", "-U", backup, volume).CombinedOutput(); err != nil {
			t.Errorf("restored volume differs from the snapshot: %v\n%s", err, out)
		}
	} else if sum := fileSHA256(t, volume); sum != oldSum {
		t.Errorf("failed restore changed the volume")
	}
	if got := slices.Sorted(slices.Values(c.volumeFiles(vmUID))); !slices.Equal(got, []string{"data.qcow2", "scratch.qcow2"}) {
		t.Errorf("volumes directory holds %v after the restore, want the two volumes only", got)
	}

	// 3. Deleting the snapshots leaves no file behind.
	snaps, err := c.api.Snapshots.List(c.ctx, &apiv1.ListSnapshotsRequest{Options: &apiv1.ListOptions{Namespace: c.ns}})
	c.must(err)
	for _, s := range snaps.GetItems() {
		_, err := c.api.Snapshots.Delete(c.ctx, &apiv1.DeleteSnapshotRequest{Key: c.key(s.GetMetadata().GetName())})
		c.must(err)
	}
	testutil.Eventually(t, stateTimeout, "no snapshot data left", func() bool {
		left, err := c.api.SnapshotContents.List(c.ctx, &apiv1.ListSnapshotContentsRequest{Options: &apiv1.ListOptions{Namespace: c.ns}})
		c.must(err)
		return len(left.GetItems()) == 0 && len(filesUnder(t, c.snapshotsDir())) == 0
	})
}

// killWhen SIGKILLs the node agent as soon as busy holds (the agent is in
// the middle of the work), and starts it again. If the work ended first
// (done), the agent is killed all the same and the test says so: the
// outcome must be the same, only the middle was missed.
func (c *cluster) killWhen(busy, done func() bool, what string) {
	c.t.Helper()
	missed := false
	testutil.Eventually(c.t, snapshotTimeout, what, func() bool {
		if busy() {
			return true
		}
		missed = done()
		return missed
	})
	c.killAgent()
	if missed {
		c.t.Logf("node agent killed after %s had ended (it ended between two looks)", what)
	} else {
		c.t.Logf("node agent killed during %s", what)
	}
	c.startAgent()
}

// backupOf is the path of the copy of volume in snapshot name.
func (c *cluster) backupOf(name, volume string) string {
	c.t.Helper()
	s := c.getSnapshot(name)
	content, err := c.api.SnapshotContents.Get(c.ctx, &apiv1.GetSnapshotContentRequest{Key: c.key(s.GetStatus().GetContentName())})
	c.must(err)
	for _, b := range content.GetStatus().GetVolumeBackups() {
		if b.GetVolumeName() == volume {
			return b.GetPath()
		}
	}
	c.t.Fatalf("snapshot %s has no copy of %s: %v", name, volume, content.GetStatus())
	return ""
}

// noPartialFiles fails on a temporary or overlay file anywhere in the
// node's snapshot and VM directories.
func noPartialFiles(t *testing.T, c *cluster) {
	t.Helper()
	for _, dir := range []string{c.snapshotsDir(), c.nodeDir + "/vms"} {
		for _, f := range filesUnder(t, dir) {
			if strings.HasSuffix(f, ".tmp") || strings.Contains(f, ".snap-") || strings.Contains(f, ".restore-") {
				t.Errorf("partial file left: %s/%s", dir, f)
			}
		}
	}
}
