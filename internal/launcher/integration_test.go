package launcher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
)

// These tests run the real virtplane-launcher against a real libvirtd with
// a TCG guest that has no disk: it sits in SeaBIOS, which is all the
// lifecycle needs. They run when VIRTPLANE_TEST_LIBVIRT_URI is set
// (make test sets qemu:///system).

const helperAgentEnv = "VIRTPLANE_LAUNCHER_TEST_AGENT"

func TestMain(m *testing.M) {
	if os.Getenv(helperAgentEnv) != "" {
		os.Exit(helperAgent())
	}
	if os.Getenv(helperSleeperEnv) != "" {
		// A stand-in launcher process for KillLauncher (process_test.go).
		time.Sleep(time.Hour)
		os.Exit(0)
	}
	code := m.Run()
	if builtDir != "" {
		_ = os.RemoveAll(builtDir)
	}
	os.Exit(code)
}

var (
	buildOnce sync.Once
	builtDir  string
	builtBin  string
	buildErr  error
)

// launcherBinary builds virtplane-launcher once per test run, with the
// libvirt tag (cgo: it needs libvirt's development files, which a host
// that runs these tests has).
func launcherBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		builtDir, buildErr = os.MkdirTemp("", "virtplane-launcher-bin")
		if buildErr != nil {
			return
		}
		builtBin = filepath.Join(builtDir, "virtplane-launcher")
		cmd := exec.Command("go", "build", "-tags", "libvirt", "-ldflags", "-X main.version=it", "-o", builtBin,
			"github.com/virtplane/terraform-provider-virtplane/launcher")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build -tags libvirt launcher (needs libvirt's development files, Debian libvirt-dev): %w\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtBin
}

func requireLibvirt(t *testing.T) string {
	t.Helper()
	uri := os.Getenv("VIRTPLANE_TEST_LIBVIRT_URI")
	if uri == "" {
		t.Skip("VIRTPLANE_TEST_LIBVIRT_URI is not set")
	}
	return uri
}

type env struct {
	t      *testing.T
	uri    string
	bin    string
	dir    string
	domain string
	m      Manager
}

func newEnv(t *testing.T) *env {
	uri := requireLibvirt(t)
	e := &env{t: t, uri: uri, bin: launcherBinary(t), dir: t.TempDir()}
	e.domain = fmt.Sprintf("vp-it-%d", time.Now().UnixNano()%1_000_000_000)
	e.m = e.manager()
	// Registered after TempDir, so it runs before the directory goes.
	t.Cleanup(e.cleanup)
	return e
}

func (e *env) opts() ManagerOptions {
	f, err := os.OpenFile(filepath.Join(e.dir, "agent.log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		e.t.Fatal(err)
	}
	return ManagerOptions{
		LauncherPath: e.bin,
		LibvirtURI:   e.uri,
		LogDir:       filepath.Join(e.dir, "logs"),
		SocketDir:    filepath.Join(e.dir, "sock"),
		Logger:       slog.New(slog.NewTextHandler(f, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
}

func (e *env) manager() Manager { return NewManager(e.opts()) }

// cleanup kills any launcher of this domain and removes the domain.
func (e *env) cleanup() {
	if out, err := exec.Command("pgrep", "-f", "--", "--domain-name "+e.domain+" ").Output(); err == nil {
		for _, f := range strings.Fields(string(out)) {
			if pid, err := strconv.Atoi(f); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	_ = exec.Command("virsh", "-c", e.uri, "destroy", e.domain).Run()
	_ = exec.Command("virsh", "-c", e.uri, "undefine", e.domain, "--nvram").Run()
	if e.t.Failed() {
		for _, f := range []string{"agent.log", "logs/" + e.domain + ".log"} {
			if b, err := os.ReadFile(filepath.Join(e.dir, f)); err == nil {
				e.t.Logf("--- %s\n%s", f, b)
			}
		}
	}
}

func (e *env) vmi(phase string) *apiv1.VirtualMachineInstance {
	grace := int64(5)
	return &apiv1.VirtualMachineInstance{
		Metadata: &apiv1.ObjectMeta{Namespace: "it", Name: e.domain, Uid: "uid-" + e.domain},
		Spec: &apiv1.VirtualMachineInstanceSpec{
			Domain: &apiv1.DomainSpec{
				Cpu:    &apiv1.CPU{Cores: 1},
				Memory: &apiv1.Memory{Guest: "128Mi"},
			},
			TerminationGracePeriodSeconds: &grace,
		},
		Status: &apiv1.VirtualMachineInstanceStatus{Phase: phase},
	}
}

func (e *env) syncOpts() *launcherpb.SyncOptions {
	return &launcherpb.SyncOptions{
		DomainName:     e.domain,
		TbCacheMib:     16,
		ConsoleLogPath: filepath.Join(e.dir, "console.log"),
	}
}

func (e *env) launch(ctx context.Context) (Client, Handle) {
	e.t.Helper()
	start := time.Now()
	c, h, err := e.m.Launch(ctx, e.vmi(apiv1.PhaseScheduled), e.domain)
	if err != nil {
		e.t.Fatalf("Launch: %v", err)
	}
	e.t.Logf("Launch took %s (launcher pid %d, %s)", time.Since(start).Round(time.Millisecond), h.Pid, h.Addr)
	return c, h
}

func wantState(t *testing.T, st *launcherpb.DomainStatus, err error, state, reason string) {
	t.Helper()
	if err != nil {
		t.Fatalf("want %s/%s: %v", state, reason, err)
	}
	if st.GetState() != state || (reason != "" && st.GetReason() != reason) {
		t.Fatalf("status %s/%s, want %s/%s: %v", st.GetState(), st.GetReason(), state, reason, st)
	}
}

func waitEvent(t *testing.T, ch <-chan *launcherpb.DomainEvent, event string) *launcherpb.DomainEvent {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatalf("event stream ended before %s", event)
			}
			if ev.GetEvent() == event {
				return ev
			}
		case <-timeout:
			t.Fatalf("no %s event within 30s", event)
		}
	}
}

// rss reads VmRSS and its anonymous and file-backed parts (KiB) of pid.
func rss(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return err.Error()
	}
	var parts []string
	for _, line := range strings.Split(string(b), "\n") {
		for _, k := range []string{"VmRSS:", "RssAnon:", "RssFile:"} {
			if strings.HasPrefix(line, k) {
				parts = append(parts, strings.Join(strings.Fields(line), " "))
			}
		}
	}
	return strings.Join(parts, ", ")
}

func sessionID(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return -1
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	sid, _ := strconv.Atoi(f[3])
	return sid
}

func TestLauncherLifecycle(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, h := e.launch(ctx)
	if sid := sessionID(h.Pid); sid != h.Pid {
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

	// Let the guest settle in SeaBIOS, then measure.
	time.Sleep(3 * time.Second)
	t.Logf("launcher RSS: %s", rss(h.Pid))
	t.Logf("QEMU RSS (128 MiB TCG guest, no OS, tb-cache 16 MiB): %s", rss(qemu))
	if out, err := exec.Command("ps", "-o", "pid,rss,comm", "-p", fmt.Sprintf("%d,%d", h.Pid, qemu)).Output(); err == nil {
		t.Logf("ps:\n%s", out)
	}

	// No OS answers ACPI: the domain keeps running, the request is kept.
	st, err = c.Shutdown(ctx)
	wantState(t, st, err, "Running", "")
	first := st.GetShutdownRequestedAt()
	if first == 0 {
		t.Fatal("shutdown request time not recorded")
	}
	time.Sleep(1100 * time.Millisecond)
	st, err = c.Shutdown(ctx)
	wantState(t, st, err, "Running", "")
	if st.GetShutdownRequestedAt() != first {
		t.Fatalf("shutdown_requested_at moved: %d → %d", first, st.GetShutdownRequestedAt())
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
	time.Sleep(500 * time.Millisecond)
	if !processAlive(h.Pid) {
		t.Fatal("launcher died with its agent")
	}

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
	time.Sleep(500 * time.Millisecond)
	if !processAlive(h.Pid) {
		t.Fatal("Detach ended the launcher")
	}
	c, err = e.manager().Reattach(ctx, h)
	if err != nil {
		t.Fatalf("second Reattach: %v", err)
	}
	if err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	c.Detach()

	// 4. The launcher is killed; the guest is not.
	if err := syscall.Kill(h.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if err := waitGone(wctx, h.Pid); err != nil {
		t.Fatal(err)
	}
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
	time.Sleep(500 * time.Millisecond)
	if !processAlive(h2.Pid) {
		t.Fatal("Detach ended the launched launcher")
	}
	c3, err := e.m.Reattach(ctx, h2)
	if err != nil {
		t.Fatalf("Reattach after Detach: %v", err)
	}
	st, err = c3.Kill(ctx)
	wantState(t, st, err, "Shutoff", "Destroyed")
	if _, err := c3.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c3.Stop(ctx); err != nil {
		t.Fatal(err)
	}
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
	c, h := e.launch(ctx)
	opts := e.syncOpts()
	opts.NodeFailurePolicy = apiv1.NodeFailurePolicyRestartElsewhere
	st, err := c.Sync(ctx, e.vmi(apiv1.PhaseScheduled), opts)
	wantState(t, st, err, "Running", "Booted")
	qemu := int(st.GetQemuPid())
	if err := c.RenewLease(ctx, 3*time.Second); err != nil {
		t.Fatal(err)
	}
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
	st, err = c2.Sync(ctx, e.vmi(apiv1.PhaseRunning), opts)
	wantState(t, st, err, "Running", "Booted")
	if int(st.GetQemuPid()) != qemu {
		t.Fatalf("QEMU pid %d, was %d: the guest was restarted", st.GetQemuPid(), qemu)
	}
	// The dead launcher's lease (3 s) must not fence the adopted guest.
	time.Sleep(4 * time.Second)
	if st, err := c2.GetDomain(ctx); err != nil || st.GetState() != "Running" {
		t.Fatalf("after the old lease ran out: %v, %v", st, err)
	}

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

func TestLauncherLeaseFences(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, _ := e.launch(ctx)
	// Recorded Wait first: the launcher refuses to arm the watchdog.
	opts := e.syncOpts()
	opts.NodeFailurePolicy = apiv1.NodeFailurePolicyWait
	st, err := c.Sync(ctx, e.vmi(apiv1.PhaseScheduled), opts)
	wantState(t, st, err, "Running", "Booted")
	if err := c.RenewLease(ctx, time.Second); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("RenewLease of a Wait domain = %v, want FailedPrecondition", err)
	}
	opts.NodeFailurePolicy = apiv1.NodeFailurePolicyRestartElsewhere
	st, err = c.Sync(ctx, e.vmi(apiv1.PhaseRunning), opts)
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

	if _, err := c.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
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

	c, _ := e.launch(ctx)
	opts := e.syncOpts()
	opts.NodeFailurePolicy = apiv1.NodeFailurePolicyWait
	st, err := c.Sync(ctx, e.vmi(apiv1.PhaseScheduled), opts)
	wantState(t, st, err, "Running", "Booted")
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
	if _, err := c.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestLauncherSIGTERMLeavesDomain: SIGTERM (a systemd stop of the agent's
// unit, say) ends the launcher, never the guest.
func TestLauncherSIGTERMLeavesDomain(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, h := e.launch(ctx)
	st, err := c.Sync(ctx, e.vmi(apiv1.PhaseScheduled), e.syncOpts())
	wantState(t, st, err, "Running", "Booted")
	c.Detach()

	start := time.Now()
	if err := syscall.Kill(h.Pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if err := waitGone(wctx, h.Pid); err != nil {
		t.Fatal(err)
	}
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
