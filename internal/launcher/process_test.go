package launcher

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/virtplane/terraform-provider-virtplane/internal/procfs"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// helperSleeperEnv makes the test binary sleep (TestMain): a process with
// the command line and environment of a launcher, without libvirt.
const helperSleeperEnv = "VIRTPLANE_LAUNCHER_TEST_SLEEPER"

func TestIsLauncherCmdline(t *testing.T) {
	for _, c := range []struct {
		cmdline string
		want    bool
	}{
		{"/usr/bin/virtplane-launcher\x00serve\x00--libvirt-uri\x00qemu:///system\x00--domain-name\x00default_web\x00--vmi-uid\x00u\x00", true},
		{"/x/launcher\x00serve\x00--domain-name=default_web\x00", true},
		{"/usr/bin/virtplane-launcher\x00serve\x00--domain-name\x00default_web2\x00", false},
		{"/usr/bin/virtplane-launcher\x00serve\x00--vmi-key\x00default_web\x00", false},
		{"/usr/bin/virtplane-launcher\x00list-domains\x00--domain-name\x00default_web\x00", false},
		{"/usr/bin/virtplane-launcher\x00serve\x00--domain-name\x00", false},
		{"", false},
	} {
		if got := isLauncherCmdline([]byte(c.cmdline), "default_web"); got != c.want {
			t.Errorf("%q: %v, want %v", strings.ReplaceAll(c.cmdline, "\x00", " "), got, c.want)
		}
	}
}

// hang stops pid with SIGSTOP, as a hung launcher that never answers,
// and waits until the kernel shows it stopped.
func hang(t *testing.T, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, fmt.Sprintf("pid %d stopped", pid), func() bool { return procfs.State(pid) == 'T' })
}

// sleeper starts a process that looks like the launcher of domain (or not,
// without the plugin cookie) and returns its pid; it is killed and reaped
// at cleanup.
func sleeper(t *testing.T, domain string, cookie bool) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "serve", "--domain-name", domain)
	cmd.Env = append(os.Environ(), helperSleeperEnv+"=1")
	if cookie {
		cmd.Env = append(cmd.Env, Handshake.MagicCookieKey+"="+Handshake.MagicCookieValue)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	// Wait until the child runs the test binary (its cmdline is set at
	// exec).
	testutil.Eventually(t, 10*time.Second, "the sleeper to exec", func() bool {
		return processIsLauncherFor(cmd.Process.Pid, domain)
	})
	return cmd
}

func TestKillLauncherChecksTheProcess(t *testing.T) {
	m := NewManager(ManagerOptions{LauncherPath: "unused", LogDir: t.TempDir()})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// Another domain's launcher, or a process without the plugin cookie,
	// is left alone; for the caller, that launcher is gone (pid reused).
	other := sleeper(t, "default_other", true)
	if err := killLauncher(ctx, other.Process.Pid, "default_web"); !errors.Is(err, errNotLauncher) {
		t.Fatalf("killLauncher of another domain's launcher: %v", err)
	}
	if err := m.KillLauncher(ctx, Handle{Pid: other.Process.Pid, DomainName: "default_web"}); err != nil || !processAlive(other.Process.Pid) {
		t.Fatalf("KillLauncher of another domain's launcher: %v (alive %v)", err, processAlive(other.Process.Pid))
	}
	if os.Geteuid() == 0 {
		plain := sleeper(t, "default_web", false)
		if err := killLauncher(ctx, plain.Process.Pid, "default_web"); !errors.Is(err, errNotLauncher) || !processAlive(plain.Process.Pid) {
			t.Fatalf("killLauncher of a process without the cookie: %v", err)
		}
	}

	// The launcher itself, even stopped (SIGSTOP: hung), is killed.
	l := sleeper(t, "default_web", true)
	hang(t, l.Process.Pid)
	sock := t.TempDir() + "/launcher.sock"
	if err := os.WriteFile(sock, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := m.KillLauncher(ctx, Handle{Pid: l.Process.Pid, DomainName: "default_web", Network: "unix", Addr: sock}); err != nil {
		t.Fatal(err)
	}
	if processAlive(l.Process.Pid) {
		t.Fatal("launcher still alive")
	}
	if _, err := os.Stat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stale socket left: %v", err)
	}
	// Gone already: nothing to do.
	if err := m.KillLauncher(ctx, Handle{Pid: l.Process.Pid, DomainName: "default_web"}); err != nil {
		t.Fatal(err)
	}
}

// Stop ends a launcher that does not answer, by pid, even with a context
// that never ends.
func TestStopKillsUnresponsiveLauncher(t *testing.T) {
	l := sleeper(t, "default_web", true)
	hang(t, l.Process.Pid)
	m := NewManager(ManagerOptions{LauncherPath: "unused", LogDir: t.TempDir()}).(*manager)
	m.askTimeout = 100 * time.Millisecond
	// go-plugin's polite request, as it behaves with a hung launcher:
	// blocked until the process is gone.
	asked := make(chan struct{})
	ask := func() {
		close(asked)
		_ = waitGone(context.Background(), l.Process.Pid)
	}
	start := time.Now()
	if err := m.stopLauncher(context.Background(), ask, l.Process.Pid, "default_web"); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	<-asked
	if processAlive(l.Process.Pid) {
		t.Fatal("launcher still alive after Stop")
	}
	// Killed once the polite request timed out, not sooner, and soon
	// after.
	if took < m.askTimeout || took > m.askTimeout+3*time.Second {
		t.Errorf("Stop took %v, want between %v and %v", took, m.askTimeout, m.askTimeout+3*time.Second)
	}
}
