package driver

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
	"github.com/virtplane/terraform-provider-virtplane/launcher/internal/domxml"
)

const (
	testDomain = "default_web"
	testUID    = "uid-1"
)

type harness struct {
	t    *testing.T
	conn *fakeConn
	d    *Driver
	now  time.Time
	pids string
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	h := &harness{t: t, conn: newFakeConn(), now: time.Unix(1_700_000_000, 0), pids: t.TempDir()}
	h.d = h.newDriver()
	return h
}

// newDriver is a fresh launcher over the same libvirt, as after a launcher
// crash.
func (h *harness) newDriver() *Driver {
	h.t.Helper()
	d, err := New(h.conn, h.conn.events, Config{
		DomainName: testDomain,
		VMIUID:     testUID,
		QEMUPidDir: h.pids,
		Version:    "test",
		Now:        func() time.Time { return h.now },
	})
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(d.Close)
	return d
}

func vmi(phase string) *apiv1.VirtualMachineInstance {
	return &apiv1.VirtualMachineInstance{
		Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: "web", Uid: testUID},
		Spec: &apiv1.VirtualMachineInstanceSpec{Domain: &apiv1.DomainSpec{
			Memory: &apiv1.Memory{Guest: "128Mi"},
		}},
		Status: &apiv1.VirtualMachineInstanceStatus{Phase: phase},
	}
}

func (h *harness) sync(v *apiv1.VirtualMachineInstance) (*launcherpb.DomainStatus, error) {
	return h.syncPolicy(v, "")
}

// syncPolicy syncs as the node agent does, which passes the VMI's node
// failure policy.
func (h *harness) syncPolicy(v *apiv1.VirtualMachineInstance, policy string) (*launcherpb.DomainStatus, error) {
	return h.d.Sync(context.Background(), &launcherpb.SyncRequest{Vmi: v,
		Options: &launcherpb.SyncOptions{DomainName: testDomain, NodeFailurePolicy: policy}})
}

func (h *harness) renew(d time.Duration) error {
	_, err := h.d.RenewLease(context.Background(), &launcherpb.LeaseRequest{ValidForMillis: d.Milliseconds()})
	return err
}

// waitShutoff waits until the watchdog destroyed the domain.
func (h *harness) waitShutoff(why string) {
	h.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for h.conn.get(testDomain).state != StateShutoff {
		if time.Now().After(deadline) {
			h.t.Fatal(why)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (h *harness) mustSync(v *apiv1.VirtualMachineInstance) *launcherpb.DomainStatus {
	h.t.Helper()
	st, err := h.sync(v)
	if err != nil {
		h.t.Fatalf("Sync: %v", err)
	}
	return st
}

func wantState(t *testing.T, st *launcherpb.DomainStatus, state, reason string) {
	t.Helper()
	if st.GetState() != state || st.GetReason() != reason {
		t.Fatalf("status = %s/%s, want %s/%s (%v)", st.GetState(), st.GetReason(), state, reason, st)
	}
}

func wantCode(t *testing.T, err error, code codes.Code, msg string) {
	t.Helper()
	if status.Code(err) != code || !strings.Contains(err.Error(), msg) {
		t.Fatalf("error = %v, want %s containing %q", err, code, msg)
	}
}

func metadataOf(t *testing.T, s *fakeState) domxml.Metadata {
	t.Helper()
	md, err := domxml.ParseMetadata(s.metadata)
	if err != nil {
		t.Fatal(err)
	}
	return md
}

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

// fakeStream is the server side of an Events stream.
type fakeStream struct {
	grpc.ServerStream
	ctx context.Context
	out chan *launcherpb.DomainEvent
}

func (s *fakeStream) Context() context.Context { return s.ctx }

func (s *fakeStream) Send(ev *launcherpb.DomainEvent) error {
	s.out <- ev
	return nil
}

func (s *fakeStream) next(t *testing.T) *launcherpb.DomainEvent {
	t.Helper()
	select {
	case ev := <-s.out:
		return ev
	case <-time.After(5 * time.Second):
		t.Fatal("no event within 5s")
		return nil
	}
}

func TestEventsStream(t *testing.T) {
	h := newHarness(t)
	ctx, cancel := context.WithCancel(context.Background())
	s := &fakeStream{ctx: ctx, out: make(chan *launcherpb.DomainEvent, 16)}
	done := make(chan error, 1)
	go func() { done <- h.d.Events(&launcherpb.Empty{}, s) }()

	first := s.next(t)
	if first.GetEvent() != "Current" || first.GetStatus().GetExists() {
		t.Fatalf("first event = %v", first)
	}
	h.mustSync(vmi(apiv1.PhaseScheduled))
	var got []string
	for len(got) < 2 {
		ev := s.next(t)
		got = append(got, ev.GetEvent()+" "+ev.GetStatus().GetState())
	}
	if got[0] != "Defined/Added Running" && got[0] != "Defined/Added Shutoff" || got[1] != "Started/Booted Running" {
		t.Fatalf("events = %v", got)
	}

	// Events of other domains are filtered; a reconnect republishes.
	h.conn.emit("someone_else", 2, 0)
	h.conn.events <- Event{Kind: EventReconnected}
	if ev := s.next(t); ev.GetEvent() != "Reconnected" || ev.GetStatus().GetState() != "Running" {
		t.Fatalf("after reconnect = %v", ev)
	}

	cancel()
	if err := <-done; status.Code(err) != codes.Canceled {
		t.Fatalf("Events returned %v", err)
	}
}

func TestEventsEndWhenDriverCloses(t *testing.T) {
	h := newHarness(t)
	s := &fakeStream{ctx: context.Background(), out: make(chan *launcherpb.DomainEvent, 16)}
	done := make(chan error, 1)
	go func() { done <- h.d.Events(&launcherpb.Empty{}, s) }()
	s.next(t)
	h.d.Close()
	if err := <-done; status.Code(err) != codes.Unavailable {
		t.Fatalf("Events returned %v", err)
	}
}

func TestBroadcasterKeepsLatest(t *testing.T) {
	b := newBroadcaster()
	_, ch, _ := b.subscribe()
	for i := 0; i < subscriberBuffer+10; i++ {
		b.publish(&launcherpb.DomainEvent{Event: strconv.Itoa(i)})
	}
	var last *launcherpb.DomainEvent
	for len(ch) > 0 {
		last = <-ch
	}
	if last.GetEvent() != strconv.Itoa(subscriberBuffer+9) {
		t.Fatalf("last event = %v", last)
	}
}

func TestLeaseExpiryDestroysDomain(t *testing.T) {
	h := newHarness(t)
	if _, err := h.syncPolicy(vmi(apiv1.PhaseScheduled), apiv1.NodeFailurePolicyRestartElsewhere); err != nil {
		t.Fatal(err)
	}
	renew := func(d time.Duration) {
		t.Helper()
		if err := h.renew(d); err != nil {
			t.Fatal(err)
		}
	}

	// Renewed in time, or disarmed: the domain keeps running.
	renew(100 * time.Millisecond)
	for i := 0; i < 4; i++ {
		time.Sleep(40 * time.Millisecond)
		renew(100 * time.Millisecond)
	}
	renew(0)
	time.Sleep(200 * time.Millisecond)
	if s := h.conn.get(testDomain); s.state != StateRunning {
		t.Fatalf("domain %s with a renewed or disarmed lease", s.state)
	}

	// Not renewed: fenced.
	renew(50 * time.Millisecond)
	h.waitShutoff("domain still running after the lease expired")
}

func TestLeaseFenceRetriesUntilDestroyed(t *testing.T) {
	h := newHarness(t)
	if _, err := h.syncPolicy(vmi(apiv1.PhaseScheduled), apiv1.NodeFailurePolicyRestartElsewhere); err != nil {
		t.Fatal(err)
	}
	h.conn.setOffline(true)
	// Armed although the policy cannot be read: refusing a renewal
	// because libvirtd is briefly away would fence a healthy guest.
	if err := h.renew(10 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	h.conn.setOffline(false)
	h.waitShutoff("fence did not retry after libvirt came back")
}

// Sync records the node failure policy in the domain, also when adopting
// a domain defined without it.
func TestSyncRecordsNodeFailurePolicy(t *testing.T) {
	h := newHarness(t)
	if _, err := h.syncPolicy(vmi(apiv1.PhaseScheduled), apiv1.NodeFailurePolicyWait); err != nil {
		t.Fatal(err)
	}
	if md := metadataOf(t, h.conn.get(testDomain)); md.NodeFailurePolicy != apiv1.NodeFailurePolicyWait {
		t.Fatalf("metadata after define = %+v", md)
	}

	old, _ := domxml.Metadata{UID: testUID, GracePeriodSeconds: 30}.MarshalElement()
	h.conn.get(testDomain).metadata = old
	if _, err := h.syncPolicy(vmi(apiv1.PhaseRunning), apiv1.NodeFailurePolicyRestartElsewhere); err != nil {
		t.Fatal(err)
	}
	if md := metadataOf(t, h.conn.get(testDomain)); md.NodeFailurePolicy != apiv1.NodeFailurePolicyRestartElsewhere {
		t.Fatalf("metadata after adoption = %+v", md)
	}
	// An empty policy (an older agent) keeps what the domain records.
	h.mustSync(vmi(apiv1.PhaseRunning))
	if md := metadataOf(t, h.conn.get(testDomain)); md.NodeFailurePolicy != apiv1.NodeFailurePolicyRestartElsewhere {
		t.Fatalf("metadata after a sync without policy = %+v", md)
	}
}

// The launcher refuses to arm the watchdog of a Wait domain, including
// one with no recorded policy (Wait is the default).
func TestLeaseRefusedForWaitDomain(t *testing.T) {
	for _, policy := range []string{apiv1.NodeFailurePolicyWait, ""} {
		h := newHarness(t)
		if _, err := h.syncPolicy(vmi(apiv1.PhaseScheduled), policy); err != nil {
			t.Fatal(err)
		}
		wantCode(t, h.renew(50*time.Millisecond), codes.FailedPrecondition, "node failure policy Wait")
		if err := h.renew(0); err != nil {
			t.Fatalf("disarming: %v", err)
		}
		time.Sleep(150 * time.Millisecond)
		if s := h.conn.get(testDomain); s.state != StateRunning {
			t.Fatalf("policy %q: Wait domain %s after a refused lease", policy, s.state)
		}
	}
}

// A new launcher is renewed before its first Sync, when there is no
// domain to read the policy from. The watchdog is armed then, but neither
// Sync of a Wait VMI nor expiry may kill a Wait domain.
func TestWatchdogNeverKillsWaitDomain(t *testing.T) {
	t.Run("disarmed by Sync", func(t *testing.T) {
		h := newHarness(t)
		if err := h.renew(80 * time.Millisecond); err != nil {
			t.Fatal(err)
		}
		if _, err := h.syncPolicy(vmi(apiv1.PhaseScheduled), apiv1.NodeFailurePolicyWait); err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
		if s := h.conn.get(testDomain); s.state != StateRunning {
			t.Fatalf("Wait domain %s after the early lease expired", s.state)
		}
	})
	t.Run("checked at expiry", func(t *testing.T) {
		h := newHarness(t)
		if err := h.renew(50 * time.Millisecond); err != nil {
			t.Fatal(err)
		}
		// Defined meanwhile by another launcher, as a Wait domain.
		md, _ := domxml.Metadata{UID: testUID, NodeFailurePolicy: apiv1.NodeFailurePolicyWait}.MarshalElement()
		h.conn.put(&fakeState{name: testDomain, uuid: "u-1", state: StateRunning, reason: 1, metadata: md})
		time.Sleep(200 * time.Millisecond)
		if s := h.conn.get(testDomain); s.state != StateRunning {
			t.Fatalf("Wait domain %s after lease expiry", s.state)
		}
		if n := h.conn.callsMatching("Destroy"); n != 0 {
			t.Fatalf("%d Destroy calls on a Wait domain", n)
		}
	})
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
