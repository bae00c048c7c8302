package multinode

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/virtplane/terraform-provider-virtplane/internal/procfs"
)

// Proc is a process the harness (or a cluster on it) started as its
// child, its output in a file.
type Proc struct {
	Name string // for messages: "libvirtd", "node agent <name>"
	Out  string // the file its stdout and stderr go to
	Cmd  *exec.Cmd

	exited chan struct{}
	err    error // Wait's, once exited is closed
}

// StartProc starts bin with args, output to the file out. The child dies
// with the process that started it (Pdeathsig), so a test killed by go
// test's -timeout, or an interrupted demo, leaves none behind.
func StartProc(what, out, bin string, args ...string) (*Proc, error) {
	f, err := os.Create(out)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", what, err)
	}
	p := &Proc{Name: what, Out: out, Cmd: cmd, exited: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.exited) }()
	return p, nil
}

// Pid is the process id; 0 for nil.
func (p *Proc) Pid() int {
	if p == nil {
		return 0
	}
	return p.Cmd.Process.Pid
}

// Alive reports whether the process has not exited; false for nil.
func (p *Proc) Alive() bool {
	if p == nil {
		return false
	}
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// waitErr is how the process ended; call after Alive is false.
func (p *Proc) waitErr() error {
	<-p.exited
	return p.err
}

// waitComm waits until the process runs the program named comm (after
// the execs that lead to it).
func (p *Proc) waitComm(ctx context.Context, comm string) error {
	return wait.PollUntilContextCancel(ctx, 5*time.Millisecond, true, func(context.Context) (bool, error) {
		if !p.Alive() {
			return false, fmt.Errorf("%s exited: %v: %s", p.Name, p.waitErr(), tail(p.Out, 2000))
		}
		return procfs.Comm(p.Pid()) == comm, nil
	})
}

// Stop sends SIGTERM, and SIGKILL after grace, and waits for the exit;
// nil or exited does nothing.
func (p *Proc) Stop(grace time.Duration) error {
	if !p.Alive() {
		return nil
	}
	_ = p.Cmd.Process.Signal(syscall.SIGTERM)
	if p.exitedWithin(grace) {
		return nil
	}
	return p.Kill(grace)
}

// Kill sends SIGKILL and waits up to d for the exit; nil or exited does
// nothing.
func (p *Proc) Kill(d time.Duration) error {
	if !p.Alive() {
		return nil
	}
	_ = p.Cmd.Process.Kill()
	if !p.exitedWithin(d) {
		return fmt.Errorf("%s (pid %d) survives SIGKILL", p.Name, p.Pid())
	}
	return nil
}

func (p *Proc) exitedWithin(d time.Duration) bool {
	select {
	case <-p.exited:
		return true
	case <-time.After(d):
		return false
	}
}
