package launcher

import (
	"context"
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

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
	"github.com/virtplane/terraform-provider-virtplane/internal/procfs"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
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
		buildErr = testutil.BuildLauncher(context.Background(), builtBin, "it")
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

// policyOpts is syncOpts with a node failure policy.
func (e *env) policyOpts(policy string) *launcherpb.SyncOptions {
	o := e.syncOpts()
	o.NodeFailurePolicy = policy
	return o
}

// launchRunning launches a launcher and boots a new VMI through it with
// policy ("" for none, as from an older agent).
func (e *env) launchRunning(ctx context.Context, policy string) (Client, Handle, *launcherpb.DomainStatus) {
	e.t.Helper()
	c, h := e.launch(ctx)
	st, err := c.Sync(ctx, e.vmi(apiv1.PhaseScheduled), e.policyOpts(policy))
	wantState(e.t, st, err, "Running", "Booted")
	return c, h, st
}

// signalAndWait sends sig to process pid (a launcher) and waits up to
// 10 s until it is gone.
func signalAndWait(t *testing.T, ctx context.Context, pid int, sig syscall.Signal) {
	t.Helper()
	if err := syscall.Kill(pid, sig); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := waitGone(wctx, pid); err != nil {
		t.Fatal(err)
	}
}

// deleteAndStop deletes c's domain, which must be shut off, and stops the
// launcher.
func deleteAndStop(t *testing.T, ctx context.Context, c Client) {
	t.Helper()
	if _, err := c.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
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
// rss is pid's resident memory for the log: total, anonymous, file pages.
func rss(pid int) string {
	kb, err := procfs.ProcStatus(pid, "VmRSS", "RssAnon", "RssFile")
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("VmRSS %d kB, RssAnon %d kB, RssFile %d kB", kb["VmRSS"], kb["RssAnon"], kb["RssFile"])
}
