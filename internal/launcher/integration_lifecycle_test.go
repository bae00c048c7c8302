package launcher

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/procfs"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// One launcher's life against the real libvirtd: define, start, pause,
// shutdown requests, kill, delete, stop; lease fencing; SIGTERM; the
// one-shot probe and list-domains commands.

func TestLauncherLifecycle(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, h := e.launch(ctx)
	if sid := procfs.SessionID(h.Pid); sid != h.Pid {
		t.Errorf("launcher session %d: not its own session", sid)
	}

	events, err := c.Events(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ev := <-events; ev.GetEvent() != "Current" || ev.GetStatus().GetExists() {
		t.Fatalf("first event = %v", ev)
	}

	start := time.Now()
	st, err := c.Sync(ctx, e.vmi(apiv1.PhaseScheduled), e.syncOpts())
	wantState(t, st, err, "Running", "Booted")
	t.Logf("Sync (define + start) took %s", time.Since(start).Round(time.Millisecond))
	if st.GetQemuPid() <= 0 || !processAlive(int(st.GetQemuPid())) || st.GetUuid() == "" {
		t.Fatalf("no running QEMU: %v", st)
	}
	qemu := int(st.GetQemuPid())
	waitEvent(t, events, "Started/Booted")
	if _, err := os.Stat(e.syncOpts().GetConsoleLogPath()); err != nil {
		t.Errorf("console log: %v", err)
	}

	// Idempotent.
	again, err := c.Sync(ctx, e.vmi(apiv1.PhaseRunning), e.syncOpts())
	wantState(t, again, err, "Running", "Booted")
	if again.GetQemuPid() != st.GetQemuPid() || again.GetUuid() != st.GetUuid() {
		t.Fatalf("second Sync changed the domain: %v → %v", st, again)
	}

	st, err = c.Pause(ctx)
	wantState(t, st, err, "Paused", "User")
	waitEvent(t, events, "Suspended/Paused")
	st, err = c.Sync(ctx, e.vmi(apiv1.PhaseRunning), e.syncOpts())
	wantState(t, st, err, "Paused", "User")
	st, err = c.Unpause(ctx)
	wantState(t, st, err, "Running", "Unpaused")
	waitEvent(t, events, "Resumed/Unpaused")

	// No OS answers ACPI: the domain keeps running, the request is kept.
	st, err = c.Shutdown(ctx)
	wantState(t, st, err, "Running", "")
	first := st.GetShutdownRequestedAt()
	if first == 0 {
		t.Fatal("shutdown request time not recorded")
	}
	// The record has a resolution of one second: press again in a later
	// one, where a request recorded anew would show.
	testutil.Eventually(t, 5*time.Second, "the clock to pass the recorded second", func() bool {
		return time.Now().Unix() > first
	})
	st, err = c.Shutdown(ctx)
	wantState(t, st, err, "Running", "")
	if st.GetShutdownRequestedAt() != first {
		t.Fatalf("shutdown_requested_at moved: %d → %d", first, st.GetShutdownRequestedAt())
	}

	// For the record, with the guest a second or more in SeaBIOS.
	t.Logf("launcher RSS: %s", rss(h.Pid))
	t.Logf("QEMU RSS (128 MiB TCG guest, no OS, tb-cache 16 MiB): %s", rss(qemu))
	if out, err := exec.Command("ps", "-o", "pid,rss,comm", "-p", fmt.Sprintf("%d,%d", h.Pid, qemu)).Output(); err == nil {
		t.Logf("ps:\n%s", out)
	}

	if _, err := c.Delete(ctx); err == nil {
		t.Fatal("Delete of a running domain succeeded")
	}
	st, err = c.Kill(ctx)
	wantState(t, st, err, "Shutoff", "Destroyed")
	waitEvent(t, events, "Stopped/Destroyed")
	if processAlive(qemu) {
		t.Fatalf("QEMU pid %d still running after Kill", qemu)
	}
	st, err = c.Delete(ctx)
	if err != nil || st.GetExists() {
		t.Fatalf("Delete = %v, %v", st, err)
	}
	waitEvent(t, events, "Undefined/Removed")
	if st, err := c.GetDomain(ctx); err != nil || st.GetExists() {
		t.Fatalf("GetDomain after Delete = %v, %v", st, err)
	}

	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if processAlive(h.Pid) {
		t.Fatal("launcher still running after Stop")
	}
	if _, err := os.Stat(h.Addr); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("socket left behind: %v", err)
	}
}

func TestLauncherLeaseFences(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Recorded Wait first: the launcher refuses to arm the watchdog.
	c, _, _ := e.launchRunning(ctx, apiv1.NodeFailurePolicyWait)
	if err := c.RenewLease(ctx, time.Second); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("RenewLease of a Wait domain = %v, want FailedPrecondition", err)
	}
	st, err := c.Sync(ctx, e.vmi(apiv1.PhaseRunning), e.policyOpts(apiv1.NodeFailurePolicyRestartElsewhere))
	wantState(t, st, err, "Running", "Booted")
	events, err := c.Events(ctx)
	if err != nil {
		t.Fatal(err)
	}

	if err := c.RenewLease(ctx, time.Second); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	ev := waitEvent(t, events, "Fenced/LeaseExpired")
	t.Logf("fenced %s after the last renewal", time.Since(start).Round(time.Millisecond))
	wantState(t, ev.GetStatus(), nil, "Shutoff", "Destroyed")
	deleteAndStop(t, ctx, c)
}

func TestProbeAndListDomains(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := Probe(ctx, e.bin, e.uri)
	if err != nil {
		t.Fatal(err)
	}
	if p.LibvirtVersion == "" || p.QEMUVersion == "" || p.Hostname == "" || p.LauncherVersion != "it" {
		t.Fatalf("probe = %+v", p)
	}
	t.Logf("probe: %+v", p)
	if v, err := Version(ctx, e.bin); err != nil || v != "it" {
		t.Fatalf("version = %q, %v", v, err)
	}

	c, _, st := e.launchRunning(ctx, apiv1.NodeFailurePolicyWait)
	ds, err := ListDomains(ctx, e.bin, e.uri)
	if err != nil {
		t.Fatal(err)
	}
	var found *DomainInfo
	for i := range ds {
		if ds[i].Name == e.domain {
			found = &ds[i]
		}
	}
	if found == nil || found.UUID != st.GetUuid() || found.VMIUID != "uid-"+e.domain || found.VMINamespace != "it" ||
		found.State != "Running" || found.GracePeriodSeconds != 5 || found.QEMUPid != int(st.GetQemuPid()) ||
		found.NodeFailurePolicy != apiv1.NodeFailurePolicyWait {
		t.Fatalf("list-domains = %+v", ds)
	}
	if _, err := c.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	deleteAndStop(t, ctx, c)
}

// TestLauncherSIGTERMLeavesDomain: SIGTERM (a systemd stop of the agent's
// unit, say) ends the launcher, never the guest.
func TestLauncherSIGTERMLeavesDomain(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, h, st := e.launchRunning(ctx, "")
	c.Detach()

	start := time.Now()
	signalAndWait(t, ctx, h.Pid, syscall.SIGTERM)
	t.Logf("launcher exited %s after SIGTERM", time.Since(start).Round(time.Millisecond))
	if !processAlive(int(st.GetQemuPid())) {
		t.Fatal("SIGTERM to the launcher stopped the guest")
	}

	c2, _ := e.launch(ctx)
	again, err := c2.Sync(ctx, e.vmi(apiv1.PhaseRunning), e.syncOpts())
	wantState(t, again, err, "Running", "Booted")
	if again.GetQemuPid() != st.GetQemuPid() {
		t.Fatalf("guest restarted: qemu %d → %d", st.GetQemuPid(), again.GetQemuPid())
	}
	start = time.Now()
	if _, err := c2.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("Kill took %s", time.Since(start).Round(time.Millisecond))
	if _, err := c2.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	if err := c2.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("Stop took %s", time.Since(start).Round(time.Millisecond))
}
