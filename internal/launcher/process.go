package launcher

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ErrLauncherGone means the launcher process or its socket no longer
// exists: there is nothing to reattach to (the domain may still run under
// libvirtd; a new Launch adopts it). It is a gRPC Unavailable status, like
// the error of a call to a launcher that died, and matches errors.Is.
var ErrLauncherGone = status.Error(codes.Unavailable, "launcher is not running")

// processAlive reports whether pid exists (a zombie counts as gone).
func processAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	if err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	// kill(0) succeeds on zombies; /proc tells them apart.
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		// A zombie reaped between the kill(0) and the read leaves its
		// /proc entry open to a read that fails with ESRCH: gone too.
		return !errors.Is(err, os.ErrNotExist) && !errors.Is(err, syscall.ESRCH)
	}
	if i := bytes.LastIndexByte(b, ')'); i > 0 && i+2 < len(b) {
		return b[i+2] != 'Z' && b[i+2] != 'X'
	}
	return true
}

// processIsLauncherFor guards against pid reuse: the process must be a
// launcher for domainName. Without /proc it cannot tell and says yes
// (reattaching to a wrong process fails at the ping anyway). Killing
// needs more certainty: see checkLauncher.
func processIsLauncherFor(pid int, domainName string) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return !errors.Is(err, os.ErrNotExist)
	}
	return bytes.Contains(b, []byte("\x00--domain-name\x00"+domainName+"\x00"))
}

// isLauncherCmdline reports whether a /proc/<pid>/cmdline is that of
// `virtplane-launcher serve … --domain-name domainName …` (the way Manager
// starts launchers; the binary may have any name).
func isLauncherCmdline(cmdline []byte, domainName string) bool {
	args := strings.Split(strings.TrimSuffix(string(cmdline), "\x00"), "\x00")
	if len(args) < 2 || args[1] != "serve" || domainName == "" {
		return false
	}
	for i, a := range args[2:] {
		if a == "--domain-name="+domainName || a == "-domain-name="+domainName {
			return true
		}
		if (a == "--domain-name" || a == "-domain-name") && i+3 < len(args) && args[i+3] == domainName {
			return true
		}
	}
	return false
}

// KillLauncher implements Manager.
func (m *manager) KillLauncher(ctx context.Context, h Handle) error {
	err := killLauncher(ctx, h.Pid, h.DomainName)
	if errors.Is(err, errNotLauncher) {
		// The pid was reused: the launcher is gone, and the process
		// that has its pid now is none of ours.
		m.log.Info("launcher is gone; its pid now runs something else", "pid", h.Pid, "domain", h.DomainName, "err", err)
		err = nil
	}
	if err != nil {
		return err
	}
	// The socket is normally unlinked by the launcher; not after SIGKILL.
	if h.Addr != "" && h.Network == "unix" {
		_ = os.Remove(h.Addr)
	}
	return nil
}

// errNotLauncher: the pid runs something other than the launcher asked for.
var errNotLauncher = errors.New("not a virtplane-launcher for this domain")

// killLauncher SIGKILLs pid if, and only if, it is a launcher serving
// domainName, then waits for it to exit. Unlike processIsLauncherFor it
// is strict: a process whose command line cannot be read is not killed.
func killLauncher(ctx context.Context, pid int, domainName string) error {
	if pid <= 0 || !processAlive(pid) {
		return nil
	}
	// A pidfd pins the process: the check below and the signal then
	// concern the same process even if pid is reused in between.
	send := func(sig syscall.Signal) error { return syscall.Kill(pid, sig) }
	if fd, err := unix.PidfdOpen(pid, 0); err == nil {
		defer unix.Close(fd)
		send = func(sig syscall.Signal) error { return unix.PidfdSendSignal(fd, sig, nil, 0) }
	} else if errors.Is(err, unix.ESRCH) {
		return nil
	}
	if err := checkLauncher(pid, domainName); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil // exited meanwhile
		}
		return fmt.Errorf("not killing pid %d: %w", pid, err)
	}
	if err := send(syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("kill launcher pid %d: %w", pid, err)
	}
	if err := waitGone(ctx, pid); err != nil {
		return fmt.Errorf("kill launcher of %s: %w", domainName, err)
	}
	return nil
}

// checkLauncher verifies from /proc that pid is a virtplane-launcher for
// domainName: its command line, and, where readable, the go-plugin cookie
// in its environment that only a launcher started by a node agent has.
func checkLauncher(pid int, domainName string) error {
	dir := "/proc/" + strconv.Itoa(pid)
	cmdline, err := os.ReadFile(dir + "/cmdline")
	if err != nil {
		return err
	}
	if !isLauncherCmdline(cmdline, domainName) {
		return fmt.Errorf("%w %s (command line %q)", errNotLauncher, domainName, strings.ReplaceAll(string(cmdline), "\x00", " "))
	}
	env, err := os.ReadFile(dir + "/environ")
	if err != nil {
		// Another user's process (an agent not running as root): the
		// command line has to do.
		return nil
	}
	cookie := Handshake.MagicCookieKey + "=" + Handshake.MagicCookieValue
	for _, kv := range strings.Split(string(env), "\x00") {
		if kv == cookie {
			return nil
		}
	}
	return fmt.Errorf("%w %s: no launcher plugin cookie in its environment", errNotLauncher, domainName)
}

// waitGone waits until pid has exited, its whole thread group: a
// launcher's leader thread shows as a zombie while its other threads may
// still be exiting and holding its files, the domain lock among them, so
// a replacement started then is refused the lock (seen in CI:
// TestHungLauncherKilledByHandle's relaunch met "another launcher (pid
// N) already manages this domain" after KillLauncher returned). A pidfd
// becomes readable only once the thread group is empty; without pidfds
// (kernels before 5.3) the zombie check is what there is.
func waitGone(ctx context.Context, pid int) error {
	fd, err := unix.PidfdOpen(pid, 0)
	switch {
	case errors.Is(err, unix.ESRCH):
		return nil
	case err == nil:
		defer unix.Close(fd)
		for {
			n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, 50)
			if err != nil && !errors.Is(err, unix.EINTR) {
				return fmt.Errorf("waiting for launcher pid %d: %w", pid, err)
			}
			if n > 0 {
				return nil
			}
			if ctx.Err() != nil {
				return fmt.Errorf("launcher pid %d still running: %w", pid, ctx.Err())
			}
		}
	}
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for processAlive(pid) {
		select {
		case <-ctx.Done():
			return fmt.Errorf("launcher pid %d still running: %w", pid, ctx.Err())
		case <-t.C:
		}
	}
	return nil
}

// attachedRunner is go-plugin's view of a launcher this process did not
// start. Unlike go-plugin's default, its Wait also returns on detach, so a
// detached client leaves no goroutine polling the pid forever.
type attachedRunner struct {
	pid      int
	detached chan struct{}
}

func newAttachedRunner(pid int) *attachedRunner {
	return &attachedRunner{pid: pid, detached: make(chan struct{})}
}

func (r *attachedRunner) Wait(ctx context.Context) error {
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for processAlive(r.pid) {
		select {
		case <-r.detached:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

func (r *attachedRunner) Kill(context.Context) error {
	if err := syscall.Kill(r.pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("kill launcher pid %d: %w", r.pid, err)
	}
	return nil
}

func (r *attachedRunner) ID() string { return strconv.Itoa(r.pid) }

func (r *attachedRunner) PluginToHost(network, addr string) (string, string, error) {
	return network, addr, nil
}

func (r *attachedRunner) HostToPlugin(network, addr string) (string, string, error) {
	return network, addr, nil
}
