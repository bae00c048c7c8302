package driver

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
	"github.com/virtplane/terraform-provider-virtplane/launcher/internal/domxml"
)

func TestSyncDefinesStartsAndIsIdempotent(t *testing.T) {
	h := newHarness(t)
	if err := os.WriteFile(filepath.Join(h.pids, testDomain+".pid"), []byte("4242\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	st := h.mustSync(vmi(apiv1.PhaseScheduled))
	wantState(t, st, "Running", "Booted")
	if !st.GetExists() || st.GetVmiUid() != testUID || st.GetUuid() == "" || st.GetQemuPid() != 4242 {
		t.Fatalf("status = %v", st)
	}
	md := metadataOf(t, h.conn.get(testDomain))
	if md.UID != testUID || md.Namespace != "default" || md.Name != "web" || md.GracePeriodSeconds != 30 {
		t.Fatalf("metadata = %+v", md)
	}

	again := h.mustSync(vmi(apiv1.PhaseRunning))
	if again.GetUuid() != st.GetUuid() {
		t.Fatalf("uuid changed: %s → %s", st.GetUuid(), again.GetUuid())
	}
	if n := h.conn.callsMatching("Define"); n != 1 {
		t.Errorf("Define called %d times", n)
	}
	if n := h.conn.callsMatching("Create"); n != 1 {
		t.Errorf("Create called %d times", n)
	}
}

func TestSyncAdoptsExistingDomain(t *testing.T) {
	h := newHarness(t)
	md, _ := domxml.Metadata{UID: testUID, GracePeriodSeconds: 30}.MarshalElement()
	h.conn.put(&fakeState{name: testDomain, uuid: "u-1", state: StateRunning, reason: 1, metadata: md})

	st := h.mustSync(vmi(apiv1.PhaseRunning))
	wantState(t, st, "Running", "Booted")
	if st.GetUuid() != "u-1" {
		t.Fatalf("uuid = %s", st.GetUuid())
	}
	if h.conn.callsMatching("Define")+h.conn.callsMatching("Create") != 0 {
		t.Fatalf("adoption redefined or restarted the domain: %v", h.conn.callLog())
	}
}

func TestSyncRefusesForeignDomain(t *testing.T) {
	h := newHarness(t)
	md, _ := domxml.Metadata{UID: "other-uid"}.MarshalElement()
	h.conn.put(&fakeState{name: testDomain, uuid: "u-1", state: StateRunning, metadata: md})
	_, err := h.sync(vmi(apiv1.PhaseScheduled))
	wantCode(t, err, codes.FailedPrecondition, "domain default_web belongs to VMI uid other-uid")

	// Every mutating call refuses too; GetDomain reports the foreign uid.
	for name, call := range map[string]func(context.Context, *launcherpb.Empty) (*launcherpb.DomainStatus, error){
		"Kill": h.d.Kill, "Delete": h.d.Delete, "Pause": h.d.Pause, "Unpause": h.d.Unpause,
	} {
		if _, err := call(context.Background(), &launcherpb.Empty{}); status.Code(err) != codes.FailedPrecondition {
			t.Errorf("%s on a foreign domain: %v", name, err)
		}
	}
	st, err := h.d.GetDomain(context.Background(), &launcherpb.Empty{})
	if err != nil || st.GetVmiUid() != "other-uid" {
		t.Fatalf("GetDomain = %v, %v", st, err)
	}

	h2 := newHarness(t)
	h2.conn.put(&fakeState{name: testDomain, uuid: "u-2", state: StateShutoff})
	_, err = h2.sync(vmi(apiv1.PhaseScheduled))
	wantCode(t, err, codes.FailedPrecondition, "not managed by virtplane")
}

func TestSyncRejectsOtherVMIAndDomain(t *testing.T) {
	h := newHarness(t)
	v := vmi(apiv1.PhaseScheduled)
	v.Metadata.Uid = "uid-2"
	_, err := h.sync(v)
	wantCode(t, err, codes.InvalidArgument, "serves VMI uid uid-1")

	_, err = h.d.Sync(context.Background(), &launcherpb.SyncRequest{Vmi: vmi(""), Options: &launcherpb.SyncOptions{DomainName: "x"}})
	wantCode(t, err, codes.InvalidArgument, "manages domain default_web")

	bad := vmi("")
	bad.Spec.Domain.Memory = nil
	_, err = h.sync(bad)
	wantCode(t, err, codes.InvalidArgument, "memory.guest is required")
}

func TestSyncStartsOnlyBeforeTheVMIRan(t *testing.T) {
	for _, phase := range []string{apiv1.PhaseRunning, apiv1.PhaseSucceeded, apiv1.PhaseFailed} {
		t.Run(phase, func(t *testing.T) {
			h := newHarness(t)
			h.mustSync(vmi(apiv1.PhaseScheduled))
			if _, err := h.d.Kill(context.Background(), &launcherpb.Empty{}); err != nil {
				t.Fatal(err)
			}
			st := h.mustSync(vmi(phase))
			wantState(t, st, "Shutoff", "Destroyed")
			if n := h.conn.callsMatching("Create"); n != 1 {
				t.Fatalf("Create called %d times", n)
			}
		})
	}
}

func TestSyncResumesUnlessPausedByUser(t *testing.T) {
	h := newHarness(t)
	h.mustSync(vmi(apiv1.PhaseScheduled))

	// Paused by something else (say an I/O error): Sync resumes it.
	h.conn.mu.Lock()
	h.conn.doms[testDomain].state, h.conn.doms[testDomain].reason = StatePaused, 5
	h.conn.mu.Unlock()
	wantState(t, h.mustSync(vmi(apiv1.PhaseRunning)), "Running", "Unpaused")

	// Paused by the user: Sync leaves it, and so does a new launcher that
	// adopts the domain, because the mark is in the domain metadata.
	st, err := h.d.Pause(context.Background(), &launcherpb.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	wantState(t, st, "Paused", "User")
	if !st.GetPausedByUser() {
		t.Fatal("paused_by_user not reported")
	}
	wantState(t, h.mustSync(vmi(apiv1.PhaseRunning)), "Paused", "User")
	h.d.Close()
	h.d = h.newDriver()
	wantState(t, h.mustSync(vmi(apiv1.PhaseRunning)), "Paused", "User")

	st, err = h.d.Unpause(context.Background(), &launcherpb.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	wantState(t, st, "Running", "Unpaused")
	if st.GetPausedByUser() || metadataOf(t, h.conn.get(testDomain)).PausedByUser {
		t.Fatal("pause mark not cleared")
	}
}

func TestPauseFailureClearsMark(t *testing.T) {
	h := newHarness(t)
	h.mustSync(vmi(apiv1.PhaseScheduled))
	h.conn.failNext("Suspend", errors.New("qemu said no"))
	if _, err := h.d.Pause(context.Background(), &launcherpb.Empty{}); err == nil {
		t.Fatal("Pause succeeded")
	}
	if metadataOf(t, h.conn.get(testDomain)).PausedByUser {
		t.Fatal("failed Pause left the user-pause mark")
	}
}

func TestPauseOfStoppedDomainIsNoop(t *testing.T) {
	h := newHarness(t)
	h.mustSync(vmi(apiv1.PhaseScheduled))
	if _, err := h.d.Kill(context.Background(), &launcherpb.Empty{}); err != nil {
		t.Fatal(err)
	}
	st, err := h.d.Pause(context.Background(), &launcherpb.Empty{})
	if err != nil || st.GetState() != "Shutoff" || st.GetPausedByUser() {
		t.Fatalf("Pause of a stopped domain = %v, %v", st, err)
	}
}

func TestSyncStartsPausedWhenSpecSaysSo(t *testing.T) {
	h := newHarness(t)
	v := vmi(apiv1.PhaseScheduled)
	v.Spec.Paused = true
	st := h.mustSync(v)
	wantState(t, st, "Paused", "User")
	if !st.GetPausedByUser() {
		t.Fatal("start --paused is not marked as a user pause")
	}
}

func TestSyncKeepsGracePeriodCurrent(t *testing.T) {
	h := newHarness(t)
	h.mustSync(vmi(apiv1.PhaseScheduled))
	v := vmi(apiv1.PhaseRunning)
	g := int64(120)
	v.Spec.TerminationGracePeriodSeconds = &g
	h.mustSync(v)
	if got := metadataOf(t, h.conn.get(testDomain)).GracePeriodSeconds; got != 120 {
		t.Fatalf("grace period = %d", got)
	}
}

func TestShutdownRecordsFirstRequest(t *testing.T) {
	h := newHarness(t)
	h.mustSync(vmi(apiv1.PhaseScheduled))
	first := h.now.Unix()
	st, err := h.d.Shutdown(context.Background(), &launcherpb.ShutdownRequest{})
	if err != nil {
		t.Fatal(err)
	}
	wantState(t, st, "Running", "Booted")
	if st.GetShutdownRequestedAt() != first {
		t.Fatalf("first shutdown_requested_at = %d, want %d", st.GetShutdownRequestedAt(), first)
	}
	h.now = h.now.Add(5 * time.Second)
	st, err = h.d.Shutdown(context.Background(), &launcherpb.ShutdownRequest{})
	if err != nil {
		t.Fatal(err)
	}
	// No OS answers ACPI: still running, both presses sent, grace start kept.
	wantState(t, st, "Running", "Booted")
	if st.GetShutdownRequestedAt() != first {
		t.Fatalf("shutdown_requested_at = %d, want %d", st.GetShutdownRequestedAt(), first)
	}
	if n := h.conn.callsMatching("Shutdown"); n != 2 {
		t.Fatalf("ACPI shutdown sent %d times", n)
	}

	// A new boot forgets the old request.
	if _, err := h.d.Kill(context.Background(), &launcherpb.Empty{}); err != nil {
		t.Fatal(err)
	}
	if st := h.mustSync(vmi(apiv1.PhaseScheduled)); st.GetShutdownRequestedAt() != 0 {
		t.Fatalf("shutdown request survived a restart: %v", st)
	}
}

func TestShutdownOfStoppedOrMissingDomain(t *testing.T) {
	h := newHarness(t)
	st, err := h.d.Shutdown(context.Background(), &launcherpb.ShutdownRequest{})
	if err != nil || st.GetExists() {
		t.Fatalf("Shutdown without a domain = %v, %v", st, err)
	}
	h.mustSync(vmi(apiv1.PhaseScheduled))
	if _, err := h.d.Kill(context.Background(), &launcherpb.Empty{}); err != nil {
		t.Fatal(err)
	}
	st, err = h.d.Shutdown(context.Background(), &launcherpb.ShutdownRequest{})
	if err != nil || st.GetShutdownRequestedAt() != 0 || h.conn.callsMatching("Shutdown") != 0 {
		t.Fatalf("Shutdown of a shut-off domain = %v, %v", st, err)
	}
}

func TestKillFallsBackToPlainDestroy(t *testing.T) {
	h := newHarness(t)
	h.mustSync(vmi(apiv1.PhaseScheduled))
	h.conn.failNext("Destroy(graceful)", errors.New("timed out waiting for QEMU to exit"))
	st, err := h.d.Kill(context.Background(), &launcherpb.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	wantState(t, st, "Shutoff", "Destroyed")
	if h.conn.callsMatching("Destroy(graceful)") != 1 || h.conn.callsMatching("Destroy") != 2 {
		t.Fatalf("calls = %v", h.conn.callLog())
	}
	if st.GetQemuPid() != 0 {
		t.Fatalf("qemu pid reported for a stopped domain: %v", st)
	}
}

func TestDeleteRequiresShutoff(t *testing.T) {
	h := newHarness(t)
	h.mustSync(vmi(apiv1.PhaseScheduled))
	_, err := h.d.Delete(context.Background(), &launcherpb.Empty{})
	wantCode(t, err, codes.FailedPrecondition, "Kill it before Delete")

	if _, err := h.d.Kill(context.Background(), &launcherpb.Empty{}); err != nil {
		t.Fatal(err)
	}
	st, err := h.d.Delete(context.Background(), &launcherpb.Empty{})
	if err != nil || st.GetExists() || st.GetUuid() == "" {
		t.Fatalf("Delete = %v, %v", st, err)
	}
	if h.conn.get(testDomain) != nil {
		t.Fatal("domain still defined")
	}
	st, err = h.d.Delete(context.Background(), &launcherpb.Empty{})
	if err != nil || st.GetExists() {
		t.Fatalf("second Delete = %v, %v", st, err)
	}
}

func TestLibvirtUnavailable(t *testing.T) {
	h := newHarness(t)
	h.conn.setOffline(true)
	_, err := h.d.GetDomain(context.Background(), &launcherpb.Empty{})
	wantCode(t, err, codes.Unavailable, "not connected")
	_, err = h.sync(vmi(apiv1.PhaseScheduled))
	wantCode(t, err, codes.Unavailable, "not connected")
}

func TestPingReportsPid(t *testing.T) {
	h := newHarness(t)
	p, err := h.d.Ping(context.Background(), &launcherpb.Empty{})
	if err != nil || p.GetPid() != int32(os.Getpid()) || p.GetVersion() != "test" {
		t.Fatalf("Ping = %v, %v", p, err)
	}
}

func TestNames(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{StateShutoff.String(), "Shutoff"},
		{StatePMSuspended.String(), "PMSuspended"},
		{ReasonName(StateShutoff, 2), "Destroyed"},
		{ReasonName(StateShutoff, 8), "Daemon"},
		{ReasonName(StatePaused, 5), "IOError"},
		{ReasonName(StateRunning, 5), "Unpaused"},
		{ReasonName(StateRunning, 99), "Reason(99)"},
		{EventName(2, 0), "Started/Booted"},
		{EventName(5, 1), "Stopped/Destroyed"},
		{EventName(8, 0), "Crashed/Panicked"},
		{EventName(42, 0), "Event(42)/0"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}
