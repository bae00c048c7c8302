package driver

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"libvirt.org/go/libvirtxml"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// snapGuest is a running domain with a root image overlay (vda) and two
// persistent volumes (vdb, vdc) in dir.
func snapGuest(t *testing.T) (*harness, string) {
	t.Helper()
	h := newHarness(t)
	dir := t.TempDir()
	disks := []*launcherpb.DiskSource{
		{Name: "root", Path: filepath.Join(dir, "root.qcow2"), Format: "qcow2", Bus: "virtio"},
		{Name: "data", Path: filepath.Join(dir, "data.qcow2"), Format: "qcow2", Bus: "virtio"},
		{Name: "logs", Path: filepath.Join(dir, "logs.qcow2"), Format: "qcow2", Bus: "virtio"},
	}
	if _, err := h.d.Sync(context.Background(), &launcherpb.SyncRequest{Vmi: vmi(apiv1.PhaseScheduled),
		Options: &launcherpb.SyncOptions{DomainName: testDomain, Disks: disks}}); err != nil {
		t.Fatal(err)
	}
	return h, dir
}

func snapDisk(dir, vol string) *launcherpb.SnapshotDisk {
	p := filepath.Join(dir, vol+".qcow2")
	return &launcherpb.SnapshotDisk{Path: p, OverlayPath: p + ".snap-c1"}
}

// sources maps each disk's target to its source file and backing file.
func (h *harness) sources() map[string][2]string {
	h.t.Helper()
	var def libvirtxml.Domain
	if err := def.Unmarshal(h.conn.get(testDomain).xml); err != nil {
		h.t.Fatal(err)
	}
	out := map[string][2]string{}
	for _, d := range def.Devices.Disks {
		var back string
		if d.BackingStore != nil && d.BackingStore.Source != nil && d.BackingStore.Source.File != nil {
			back = d.BackingStore.Source.File.File
		}
		out[d.Target.Dev] = [2]string{d.Source.File.File, back}
	}
	return out
}

func TestSnapshotDisksOnlyTheVolumesAsked(t *testing.T) {
	h, dir := snapGuest(t)
	data := snapDisk(dir, "data")
	resp, err := h.d.SnapshotDisks(context.Background(), &launcherpb.SnapshotDisksRequest{Disks: []*launcherpb.SnapshotDisk{data}, Freeze: true})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{apiv1.IndicationOnline, apiv1.IndicationGuestAgent}; !slices.Equal(resp.GetIndications(), want) {
		t.Errorf("indications = %v, want %v", resp.GetIndications(), want)
	}
	if resp.GetTimeUnixMillis() != h.now.UnixMilli() {
		t.Errorf("time = %d, want %d", resp.GetTimeUnixMillis(), h.now.UnixMilli())
	}
	src := h.sources()
	if src["vdb"] != [2]string{data.OverlayPath, data.Path} {
		t.Errorf("vdb = %v, want the overlay over the volume", src["vdb"])
	}
	if src["vda"][1] != "" || src["vdc"][1] != "" {
		t.Errorf("other disks were snapshotted: %v", src)
	}
	sn := h.conn.snapState()
	if sn.freezes != 1 || sn.thaws != 1 || sn.frozen {
		t.Errorf("freezes %d thaws %d frozen %v; want one freeze, thawed", sn.freezes, sn.thaws, sn.frozen)
	}
	// Freeze, snapshot, thaw, in that order.
	var order []string
	for _, c := range h.conn.callLog() {
		if c == "FSFreeze" || c == "CreateDiskSnapshot" || c == "FSThaw" {
			order = append(order, c)
		}
	}
	if want := []string{"FSFreeze", "CreateDiskSnapshot", "FSThaw"}; !slices.Equal(order, want) {
		t.Errorf("calls = %v, want %v", order, want)
	}

	// Commit twice: the second finds the disk on its volume.
	for range 2 {
		if _, err := h.d.CommitDisks(context.Background(), &launcherpb.CommitDisksRequest{Disks: []*launcherpb.SnapshotDisk{data}}); err != nil {
			t.Fatal(err)
		}
	}
	if src := h.sources(); src["vdb"] != [2]string{data.Path, ""} {
		t.Errorf("after commit vdb = %v, want the volume alone", src["vdb"])
	}
	if _, err := os.Stat(data.OverlayPath); !os.IsNotExist(err) {
		t.Errorf("overlay still there: %v", err)
	}
	if n := h.conn.callsMatching("BlockCommit:"); n != 1 {
		t.Errorf("%d block commits, want 1", n)
	}
}

func TestSnapshotDisksIndications(t *testing.T) {
	t.Run("no guest agent", func(t *testing.T) {
		h, dir := snapGuest(t)
		h.conn.setSnap(func(s *fakeSnap) { s.noAgent = true })
		resp, err := h.d.SnapshotDisks(context.Background(), &launcherpb.SnapshotDisksRequest{Disks: []*launcherpb.SnapshotDisk{snapDisk(dir, "data")}, Freeze: true})
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{apiv1.IndicationOnline, apiv1.IndicationNoGuestAgent}; !slices.Equal(resp.GetIndications(), want) {
			t.Errorf("indications = %v, want %v", resp.GetIndications(), want)
		}
		if h.conn.callsMatching("FSThaw") != 0 {
			t.Error("thawed what was never frozen")
		}
	})
	t.Run("paused", func(t *testing.T) {
		h, dir := snapGuest(t)
		if _, err := h.d.Pause(context.Background(), &launcherpb.Empty{}); err != nil {
			t.Fatal(err)
		}
		resp, err := h.d.SnapshotDisks(context.Background(), &launcherpb.SnapshotDisksRequest{Disks: []*launcherpb.SnapshotDisk{snapDisk(dir, "data")}, Freeze: true})
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{apiv1.IndicationOnline, apiv1.IndicationPaused}; !slices.Equal(resp.GetIndications(), want) {
			t.Errorf("indications = %v, want %v", resp.GetIndications(), want)
		}
		if h.conn.callsMatching("FSFreeze") != 0 {
			t.Error("froze a paused guest")
		}
	})
}

func TestSnapshotDisksThawsWhenTheSnapshotFails(t *testing.T) {
	h, dir := snapGuest(t)
	h.conn.failNext("CreateDiskSnapshot", os.ErrPermission)
	_, err := h.d.SnapshotDisks(context.Background(), &launcherpb.SnapshotDisksRequest{Disks: []*launcherpb.SnapshotDisk{snapDisk(dir, "data")}, Freeze: true})
	wantCode(t, err, codes.Unknown, "disk snapshot")
	if sn := h.conn.snapState(); sn.frozen || sn.thaws != 1 {
		t.Errorf("frozen %v thaws %d: the guest must be thawed", sn.frozen, sn.thaws)
	}
}

func TestSnapshotDisksRefusals(t *testing.T) {
	h, dir := snapGuest(t)
	good := snapDisk(dir, "data")
	for name, disks := range map[string][]*launcherpb.SnapshotDisk{
		"no disks":          nil,
		"relative path":     {{Path: "data.qcow2", OverlayPath: "data.qcow2.snap-x"}},
		"overlay elsewhere": {{Path: good.Path, OverlayPath: "/tmp/data.qcow2.snap-x"}},
		"overlay misnamed":  {{Path: good.Path, OverlayPath: filepath.Join(dir, "other")}},
		"twice":             {good, good},
	} {
		_, err := h.d.SnapshotDisks(context.Background(), &launcherpb.SnapshotDisksRequest{Disks: disks})
		if name != "twice" || err != nil {
			wantCode(t, err, codes.InvalidArgument, "snapshot disks")
		}
		_, err = h.d.CommitDisks(context.Background(), &launcherpb.CommitDisksRequest{Disks: disks})
		wantCode(t, err, codes.InvalidArgument, "commit disks")
	}
	_, err := h.d.SnapshotDisks(context.Background(), &launcherpb.SnapshotDisksRequest{Disks: []*launcherpb.SnapshotDisk{{
		Path: filepath.Join(dir, "nope.qcow2"), OverlayPath: filepath.Join(dir, "nope.qcow2.snap-x")}}})
	wantCode(t, err, codes.FailedPrecondition, "reads")

	// During a migration (KubeVirt's refusal).
	h.d.migs.mu.Lock()
	h.d.migs.cur = &migration{st: &launcherpb.MigrationStatus{MigrationUid: "m1", Running: true}}
	h.d.migs.mu.Unlock()
	_, err = h.d.SnapshotDisks(context.Background(), &launcherpb.SnapshotDisksRequest{Disks: []*launcherpb.SnapshotDisk{good}})
	wantCode(t, err, codes.FailedPrecondition, ErrMigrating)

	// A stopped domain.
	h2 := newHarness(t)
	h2.mustSync(vmi(apiv1.PhaseScheduled))
	if _, err := h2.d.Kill(context.Background(), &launcherpb.Empty{}); err != nil {
		t.Fatal(err)
	}
	_, err = h2.d.CommitDisks(context.Background(), &launcherpb.CommitDisksRequest{Disks: []*launcherpb.SnapshotDisk{good}})
	wantCode(t, err, codes.FailedPrecondition, "not running")
}

// A commit that is not ready yet is waited for; a launcher that gave up
// waiting (its call timed out) resumes the same job.
func TestCommitDisksWaitsForTheJob(t *testing.T) {
	h, dir := snapGuest(t)
	data := snapDisk(dir, "data")
	if _, err := h.d.SnapshotDisks(context.Background(), &launcherpb.SnapshotDisksRequest{Disks: []*launcherpb.SnapshotDisk{data}}); err != nil {
		t.Fatal(err)
	}
	h.conn.setSnap(func(s *fakeSnap) { s.commitHeld = true })
	commit := func(ctx context.Context) <-chan error {
		done := make(chan error, 1)
		go func() {
			_, err := h.d.CommitDisks(ctx, &launcherpb.CommitDisksRequest{Disks: []*launcherpb.SnapshotDisk{data}})
			done <- err
		}()
		return done
	}
	// result steps the clock (the poll) until the call returns.
	result := func(done <-chan error) (err error) {
		testutil.Eventually(t, 10*time.Second, "commit returns", func() bool {
			select {
			case err = <-done:
				return true
			default:
				h.clk.Step(blockJobPoll)
				return false
			}
		})
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	first := commit(ctx)
	testutil.Eventually(t, 10*time.Second, "commit polls the job", func() bool {
		h.clk.Step(blockJobPoll)
		return h.conn.callsMatching("BlockJob") >= 3
	})
	cancel()
	wantCode(t, result(first), codes.Canceled, "")

	second := commit(context.Background())
	testutil.Eventually(t, 10*time.Second, "the second commit polls", func() bool {
		h.clk.Step(blockJobPoll)
		return h.conn.callsMatching("BlockJob") >= 5
	})
	h.conn.releaseCommits()
	if err := result(second); err != nil {
		t.Fatal(err)
	}
	if n := h.conn.callsMatching("BlockCommit:"); n != 1 {
		t.Errorf("%d block commits, want 1 (resumed)", n)
	}
	if src := h.sources(); !strings.HasSuffix(src["vdb"][0], "data.qcow2") {
		t.Errorf("vdb = %v", src["vdb"])
	}
}

// libvirt may refuse the pivot of a job whose info already says ready
// (it has not handled QEMU's READY event yet): the commit polls and
// pivots again instead of failing the snapshot (seen under load).
func TestCommitDisksRetriesAPivotRefusedAsNotReady(t *testing.T) {
	if (BlockJobInfo{Commit: true}).Ready() {
		t.Error("a job at 0 of 0 (not reported on yet) taken for ready")
	}
	h, dir := snapGuest(t)
	data := snapDisk(dir, "data")
	if _, err := h.d.SnapshotDisks(context.Background(), &launcherpb.SnapshotDisksRequest{Disks: []*launcherpb.SnapshotDisk{data}}); err != nil {
		t.Fatal(err)
	}
	h.conn.setSnap(func(s *fakeSnap) { s.pivotRefusals = 2 })
	done := make(chan error, 1)
	go func() {
		_, err := h.d.CommitDisks(context.Background(), &launcherpb.CommitDisksRequest{Disks: []*launcherpb.SnapshotDisk{data}})
		done <- err
	}()
	var err error
	testutil.Eventually(t, 10*time.Second, "commit returns", func() bool {
		select {
		case err = <-done:
			return true
		default:
			h.clk.Step(blockJobPoll)
			return false
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := h.conn.callsMatching("Pivot:"); n != 3 {
		t.Errorf("%d pivots, want 3 (two refused)", n)
	}
	if src := h.sources(); !strings.HasSuffix(src["vdb"][0], "data.qcow2") {
		t.Errorf("vdb = %v", src["vdb"])
	}
}
