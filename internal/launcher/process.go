package launcher

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"

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
		return !errors.Is(err, os.ErrNotExist)
	}
	if i := bytes.LastIndexByte(b, ')'); i > 0 && i+2 < len(b) {
		return b[i+2] != 'Z' && b[i+2] != 'X'
	}
	return true
}

// processIsLauncherFor guards against pid reuse: the process must be a
// launcher for domainName. Without /proc it cannot tell and says yes.
func processIsLauncherFor(pid int, domainName string) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return !errors.Is(err, os.ErrNotExist)
	}
	return bytes.Contains(b, []byte("\x00--domain-name\x00"+domainName+"\x00"))
}

// waitGone polls until pid has exited or ctx ends.
func waitGone(ctx context.Context, pid int) error {
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
