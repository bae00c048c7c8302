package launcher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// Launchers that outlive their node agent: reattach after an agent crash,
// adoption by a new launcher, hung launchers killed by their handle.

// helperAgent is a node agent in a separate process: it launches a
// launcher, syncs the domain, prints the handle and exits without
// detaching — an agent crash. Its end closes the launcher's stdio pipes.
func helperAgent() int {
	var cfg struct {
		Opts   ManagerOptions
		Domain string
		VMI    json.RawMessage
	}
	if err := json.Unmarshal([]byte(os.Getenv(helperAgentEnv)), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	e := &env{domain: cfg.Domain}
	cfg.Opts.Logger = slog.New(slog.DiscardHandler)
	m := NewManager(cfg.Opts)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, h, err := m.Launch(ctx, e.vmi(apiv1.PhaseScheduled), e.domain)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	opts := &launcherpb.SyncOptions{DomainName: e.domain, TbCacheMib: 16}
	if _, err := c.Sync(ctx, e.vmi(apiv1.PhaseScheduled), opts); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := json.NewEncoder(os.Stdout).Encode(h); err != nil {
		return 1
	}
	return 0
}

func TestLauncherReattachAndAdopt(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// 1. An agent launches and dies.
	opts := e.opts()
	opts.Logger = nil
	cfg, _ := json.Marshal(map[string]any{"Opts": opts, "Domain": e.domain})
	agent := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	agent.Env = append(os.Environ(), helperAgentEnv+"="+string(cfg))
	out, err := agent.Output()
	if err != nil {
		t.Fatalf("helper agent: %v", err)
	}
	var h Handle
	if err := json.Unmarshal(out, &h); err != nil {
		t.Fatalf("handle %q: %v", out, err)
	}
	// Its launcher outlives it (own session, SIGPIPE ignored).
	testutil.Consistently(t, 500*time.Millisecond, "the launcher alive after its agent died", func() bool {
		return processAlive(h.Pid)
	})

	// 2. The restarted agent reattaches from the handle.
	c, err := e.m.Reattach(ctx, h)
	if err != nil {
		t.Fatalf("Reattach: %v", err)
	}
	st, err := c.GetDomain(ctx)
	wantState(t, st, err, "Running", "Booted")
	uuid, qemu := st.GetUuid(), int(st.GetQemuPid())
	if qemu <= 0 {
		t.Fatalf("no QEMU pid: %v", st)
	}

	// 3. Detach leaves the launcher running; reattach again.
	c.Detach()
	testutil.Consistently(t, 500*time.Millisecond, "the launcher alive after Detach", func() bool {
		return processAlive(h.Pid)
	})
	c, err = e.manager().Reattach(ctx, h)
	if err != nil {
		t.Fatalf("second Reattach: %v", err)
	}
	if err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	c.Detach()

	// 4. The launcher is killed; the guest is not.
	signalAndWait(t, ctx, h.Pid, syscall.SIGKILL)
	if !processAlive(qemu) {
		t.Fatal("QEMU died with the launcher")
	}
	start := time.Now()
	if _, err := e.m.Reattach(ctx, h); !errors.Is(err, ErrLauncherGone) {
		t.Fatalf("Reattach to a dead launcher = %v", err)
	}
	t.Logf("Reattach to a dead launcher failed in %s", time.Since(start).Round(time.Microsecond))

	// 5. A new launcher adopts the running domain: same UUID, same QEMU.
	c2, h2 := e.launch(ctx)
	if h2.DomainUUID != uuid {
		t.Fatalf("new handle domain uuid %q, want %q", h2.DomainUUID, uuid)
	}
	st, err = c2.Sync(ctx, e.vmi(apiv1.PhaseRunning), e.syncOpts())
	wantState(t, st, err, "Running", "Booted")
	if st.GetUuid() != uuid || int(st.GetQemuPid()) != qemu {
		t.Fatalf("adoption restarted the domain: uuid %s qemu %d, was %s %d", st.GetUuid(), st.GetQemuPid(), uuid, qemu)
	}

	// 6. One launcher per domain: a second one is refused while it runs.
	if _, _, err := e.m.Launch(ctx, e.vmi(apiv1.PhaseRunning), e.domain); err == nil ||
		!strings.Contains(err.Error(), fmt.Sprintf("another launcher (pid %d) already manages", h2.Pid)) {
		t.Fatalf("second Launch = %v", err)
	}

	// 7. Detach of a client that Launch made leaves its launcher running
	// too (go-plugin's Close would have shut it down).
	c2.Detach()
	testutil.Consistently(t, 500*time.Millisecond, "the launched launcher alive after Detach", func() bool {
		return processAlive(h2.Pid)
	})
	c3, err := e.m.Reattach(ctx, h2)
	if err != nil {
		t.Fatalf("Reattach after Detach: %v", err)
	}
	st, err = c3.Kill(ctx)
	wantState(t, st, err, "Shutoff", "Destroyed")
	deleteAndStop(t, ctx, c3)
	if processAlive(h2.Pid) {
		t.Fatal("launcher still running after Stop of a reattached client")
	}
}

// TestHungLauncherKilledByHandle: a launcher that hangs (SIGSTOP) with an
// armed lease cannot be reattached; it still holds the domain lock, so a
// replacement is refused until KillLauncher ends it. The replacement then
// adopts the running guest, and Stop of a hung launcher kills it by pid.
func TestHungLauncherKilledByHandle(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, h, st := e.launchRunning(ctx, apiv1.NodeFailurePolicyRestartElsewhere)
	qemu := int(st.GetQemuPid())
	const lease = 3 * time.Second
	if err := c.RenewLease(ctx, lease); err != nil {
		t.Fatal(err)
	}
	// The launcher armed its watchdog before it answered.
	leaseEnd := time.Now().Add(lease)
	c.Detach()
	hang(t, h.Pid)

	rctx, rcancel := context.WithTimeout(ctx, time.Second)
	if _, err := e.m.Reattach(rctx, h); err == nil {
		st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", h.Pid))
		t.Fatalf("Reattach to a hung launcher succeeded; /proc/%d/status:\n%s", h.Pid, st)
	}
	rcancel()
	if _, _, err := e.m.Launch(ctx, e.vmi(apiv1.PhaseRunning), e.domain); err == nil ||
		!strings.Contains(err.Error(), "already manages") {
		t.Fatalf("Launch next to a hung launcher = %v", err)
	}
	start := time.Now()
	if err := e.m.KillLauncher(ctx, h); err != nil {
		t.Fatal(err)
	}
	t.Logf("KillLauncher took %s", time.Since(start).Round(time.Millisecond))
	if processAlive(h.Pid) {
		t.Fatal("hung launcher survived KillLauncher")
	}
	c2, h2 := e.launch(ctx)
	st, err := c2.Sync(ctx, e.vmi(apiv1.PhaseRunning), e.policyOpts(apiv1.NodeFailurePolicyRestartElsewhere))
	wantState(t, st, err, "Running", "Booted")
	if int(st.GetQemuPid()) != qemu {
		t.Fatalf("QEMU pid %d, was %d: the guest was restarted", st.GetQemuPid(), qemu)
	}
	// The dead launcher's lease must not fence the adopted guest: watch it
	// until a second past the lease's end.
	testutil.Consistently(t, time.Until(leaseEnd)+time.Second, "the adopted guest running past the old lease", func() bool {
		st, err := c2.GetDomain(ctx)
		if err != nil || st.GetState() != "Running" {
			t.Logf("GetDomain = %v, %v", st, err)
			return false
		}
		return true
	})

	// Stop of a launcher that does not answer kills it by pid, even with
	// a context that never ends.
	hang(t, h2.Pid)
	start = time.Now()
	if err := c2.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Logf("Stop of a hung launcher took %s", time.Since(start).Round(time.Millisecond))
	if processAlive(h2.Pid) {
		t.Fatal("hung launcher survived Stop")
	}
	if !processAlive(qemu) {
		t.Fatal("stopping the launcher stopped the guest")
	}
}
