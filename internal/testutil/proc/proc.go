// Package proc runs the child processes of the test harnesses and of the
// benchmark (libvirtd and virtlogd of a multinode host, agents, etcd
// members), each with its output in a file, and finds loopback ports for
// their listen flags. It is the one child-process type of the tree: the
// harness and the benchmark need the same start, stop and kill, and
// differ only in how a child's life is tied to theirs (Tie).
//
// Package proc itself imports no testing package, so a program can use
// it: demo-cluster and virtplane-bench do (both still link testing,
// through multinode and testguest).
package proc

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"time"
)

// Tie is how a child's life is tied to the process that started it.
type Tie int

const (
	// DiesWithParent: the kernel SIGKILLs the child when the process
	// that started it dies (Pdeathsig), so a test killed by go test's
	// -timeout, or an interrupted demo, leaves none behind.
	DiesWithParent Tie = iota
	// OwnGroup: the child gets a process group of its own, so a Ctrl-C
	// at the terminal reaches only the benchmark, which then stops its
	// children in order and keeps what they logged.
	OwnGroup
)

// KillWait bounds the wait for a SIGKILLed process to be reaped: it is
// gone within milliseconds unless the kernel is stuck on it. Harnesses
// wait as long for SIGKILLed processes they did not start (launchers).
const KillWait = 10 * time.Second

// Proc is a child process, its stdout and stderr in a file.
type Proc struct {
	Name    string    // for messages: "libvirtd", "node agent n1", a binary's path
	Log     string    // the file its stdout and stderr go to
	Cmd     *exec.Cmd // to signal it otherwise (SIGSTOP a node agent)
	Started time.Time // just before it was started

	exited chan struct{}
	err    error // Wait's, once exited is closed
}

// Start runs bin with args, stdout and stderr to the file log (created,
// or truncated: callers that keep earlier runs' output name a new file
// per start). name is what messages call it.
func Start(tie Tie, name, log, bin string, args ...string) (*Proc, error) {
	f, err := os.Create(log)
	if err != nil {
		return nil, fmt.Errorf("opening the log of %s: %w", name, err)
	}
	defer f.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	switch tie {
	case OwnGroup:
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	default:
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	}
	p := &Proc{Name: name, Log: log, Cmd: cmd, exited: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		if tie == DiesWithParent {
			// The kernel sends Pdeathsig when the thread that started
			// the child ends, not the process (golang/go#27505), and Go
			// ends a thread whenever a goroutine that locked it exits,
			// as those that enter a network namespace do (guestnet, the
			// e2e tests): a libvirtd started from such a thread was
			// killed mid-test. Started from a thread locked to this
			// goroutine, which lives until the child is reaped, the
			// child dies with the process only.
			runtime.LockOSThread()
		}
		p.Started = time.Now()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		p.err = cmd.Wait()
		close(p.exited)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	return p, nil
}

// Pid is the process id; 0 for nil.
func (p *Proc) Pid() int {
	if p == nil {
		return 0
	}
	return p.Cmd.Process.Pid
}

// Alive reports whether the process has not exited (and been reaped);
// false for nil.
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

// Wait waits until the process has exited and returns how it ended
// (exec.Cmd.Wait's error).
func (p *Proc) Wait() error {
	<-p.exited
	return p.err
}

// Stop sends SIGTERM, and SIGKILL after grace, and waits up to grace
// again for the exit; nil or exited does nothing.
func (p *Proc) Stop(grace time.Duration) error {
	if !p.Alive() {
		return nil
	}
	_ = p.Cmd.Process.Signal(syscall.SIGTERM)
	if p.exitedWithin(grace) {
		return nil
	}
	return p.kill(grace)
}

// Kill sends SIGKILL and waits until the process is gone; nil or exited
// does nothing.
func (p *Proc) Kill() error { return p.kill(KillWait) }

func (p *Proc) kill(d time.Duration) error {
	if !p.Alive() {
		return nil
	}
	if err := p.Cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("killing %s (pid %d): %w", p.Name, p.Pid(), err)
	}
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
