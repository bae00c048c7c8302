package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// Process is a child process the benchmark started (an agent), logging to
// a file.
type Process struct {
	Path    string
	Args    []string
	LogPath string
	Pid     int
	Started time.Time

	cmd    *exec.Cmd
	exited chan struct{}
}

// StartProcess runs path with args, stdout and stderr appended to logPath.
// The child gets a process group of its own, so a Ctrl-C reaches only the
// benchmark, which then cleans up in order.
func StartProcess(path string, args []string, logPath string) (*Process, error) {
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening log: %w", err)
	}
	defer logf.Close()
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p := &Process{Path: path, Args: args, LogPath: logPath, cmd: cmd, exited: make(chan struct{})}
	p.Started = time.Now()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", path, err)
	}
	p.Pid = cmd.Process.Pid
	go func() { _ = cmd.Wait(); close(p.exited) }()
	return p, nil
}

// Exited is closed once the process has exited and was reaped.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// gone reports whether there is no process to end: none was started, or
// it has exited.
func (p *Process) gone() bool {
	if p == nil {
		return true
	}
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// Kill sends SIGKILL and waits until the process is gone.
func (p *Process) Kill() error {
	if p.gone() {
		return nil
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("killing pid %d: %w", p.Pid, err)
	}
	select {
	case <-p.exited:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("pid %d did not exit after SIGKILL", p.Pid)
	}
}

// Stop sends SIGTERM and waits up to grace, then kills.
func (p *Process) Stop(grace time.Duration) error {
	if p.gone() {
		return nil
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return nil
	case <-time.After(grace):
		return p.Kill()
	}
}

// WaitExited waits until the process exits or ctx ends.
func (p *Process) WaitExited(ctx context.Context) error {
	select {
	case <-p.exited:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// FreeLoopbackAddr returns a 127.0.0.1 address with a port that was free a
// moment ago, for listeners whose flag does not report the bound port.
func FreeLoopbackAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("finding a free port: %w", err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		return "", fmt.Errorf("finding a free port: %w", err)
	}
	return addr, nil
}
