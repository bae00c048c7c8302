package launcher

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

func validHandle() Handle {
	return Handle{
		Version: HandleVersion, VMIUID: "u", VMIKey: "ns/vm", DomainName: "ns_vm",
		Protocol: "grpc", ProtocolVersion: int(Handshake.ProtocolVersion),
		Network: "unix", Addr: "/nonexistent/plugin.sock", Pid: os.Getpid(),
	}
}

func TestReattachRejectsBadHandles(t *testing.T) {
	m := NewManager(ManagerOptions{LogDir: t.TempDir()})
	for name, mutate := range map[string]func(*Handle){
		"old version":      func(h *Handle) { h.Version = 0 },
		"netrpc":           func(h *Handle) { h.Protocol = "netrpc" },
		"no address":       func(h *Handle) { h.Addr = "" },
		"protocol version": func(h *Handle) { h.ProtocolVersion = 99 },
	} {
		t.Run(name, func(t *testing.T) {
			h := validHandle()
			mutate(&h)
			if _, err := m.Reattach(context.Background(), h); err == nil {
				t.Fatal("Reattach accepted the handle")
			}
		})
	}
}

func TestReattachFailsFastWhenGone(t *testing.T) {
	m := NewManager(ManagerOptions{LogDir: t.TempDir()})

	// A process that has exited.
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	h := validHandle()
	h.Pid = cmd.Process.Pid
	start := time.Now()
	_, err := m.Reattach(context.Background(), h)
	if !errors.Is(err, ErrLauncherGone) || status.Code(err) != codes.Unavailable {
		t.Fatalf("Reattach to a dead pid = %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("Reattach took %s", d)
	}

	// A live process that is not a launcher for this domain (pid reuse).
	h = validHandle()
	if _, err := m.Reattach(context.Background(), h); !errors.Is(err, ErrLauncherGone) || !strings.Contains(err.Error(), "pid reused") {
		t.Fatalf("Reattach to a foreign pid = %v", err)
	}
}

func TestProcessHelpers(t *testing.T) {
	if !processAlive(os.Getpid()) {
		t.Fatal("own pid not alive")
	}
	if processAlive(0) || processAlive(-1) {
		t.Fatal("pid <= 0 alive")
	}
	// sh carries the extra arguments in its cmdline like a launcher would.
	cmd := exec.Command("sh", "-c", "sleep 30", "sh", "--domain-name", "ns_vm")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	// Until the child has exec'd, /proc shows this test's command line.
	testutil.Eventually(t, 10*time.Second, "the cmdline match of ns_vm", func() bool {
		return processIsLauncherFor(cmd.Process.Pid, "ns_vm")
	})
	if processIsLauncherFor(cmd.Process.Pid, "ns_v") {
		t.Fatal("cmdline match wrong: prefix ns_v matched")
	}
	_ = cmd.Process.Kill()
	// Killed but not yet reaped: a zombie is gone.
	testutil.Eventually(t, 10*time.Second, "the killed (zombie) child to count as gone", func() bool {
		return !processAlive(cmd.Process.Pid)
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := waitGone(ctx, cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
}

func TestCPUHasVirt(t *testing.T) {
	dir := t.TempDir()
	write := func(s string) string {
		p := filepath.Join(dir, "cpuinfo")
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for in, want := range map[string]bool{
		"processor\t: 0\nflags\t\t: fpu vme de pse vmx sse\n": true,
		"flags\t\t: fpu svm\n":                                true,
		"flags\t\t: fpu vmxnet hypervisor\n":                  false,
		"model name\t: vmx\n":                                 false,
	} {
		got, err := cpuHasVirt(write(in))
		if err != nil || got != want {
			t.Errorf("cpuHasVirt(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
}

func TestHCLogBridge(t *testing.T) {
	var buf bytes.Buffer
	l := HCLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	l.Named("plugin").With("k", "v").Warn("hello", "n", 1)
	l.Trace("dropped")
	out := buf.String()
	if !strings.Contains(out, "level=WARN") || !strings.Contains(out, "logger=plugin") || !strings.Contains(out, "k=v") || !strings.Contains(out, "n=1") {
		t.Fatalf("bridged log = %q", out)
	}
	if strings.Contains(out, "dropped") {
		t.Fatal("trace logged at debug level")
	}
	if l.GetLevel() != hclog.Debug || l.IsTrace() || !l.IsDebug() {
		t.Fatalf("level = %v", l.GetLevel())
	}
}

func TestLaunchValidates(t *testing.T) {
	m := NewManager(ManagerOptions{LogDir: t.TempDir()})
	if _, _, err := m.Launch(context.Background(), nil, "d"); err == nil {
		t.Fatal("Launch without a VMI succeeded")
	}
}

// Launchers are told where their libvirtd writes QEMU pid files: the
// system one's by default, a private host's when configured.
func TestLaunchPassesQEMUPidDir(t *testing.T) {
	flag := func(args []string) string {
		i := slices.Index(args, "--qemu-pid-dir")
		if i < 0 || i+1 >= len(args) {
			return ""
		}
		return args[i+1]
	}
	vmi := &apiv1.VirtualMachineInstance{Metadata: &apiv1.ObjectMeta{Namespace: "ns", Name: "a", Uid: "u"}}
	m := NewManager(ManagerOptions{LogDir: t.TempDir()}).(*manager)
	if got := flag(m.args(vmi, "ns_a")); got != DefaultQEMUPidDir {
		t.Errorf("default --qemu-pid-dir %q, want %q", got, DefaultQEMUPidDir)
	}
	m = NewManager(ManagerOptions{LogDir: t.TempDir(), QEMUPidDir: "/tmp/n1/run/qemu"}).(*manager)
	if got := flag(m.args(vmi, "ns_a")); got != "/tmp/n1/run/qemu" {
		t.Errorf("--qemu-pid-dir %q, want /tmp/n1/run/qemu", got)
	}
	m = NewManager(ManagerOptions{LogDir: t.TempDir(), LauncherPath: "/bin/true", QEMUPidDir: "run/qemu"}).(*manager)
	if _, _, err := m.Launch(context.Background(), vmi, "ns_a"); err == nil || !strings.Contains(err.Error(), "qemu pid dir") {
		t.Errorf("Launch with a relative pid dir: %v, want an error naming it", err)
	}
}
