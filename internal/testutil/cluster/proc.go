package cluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// Proc is an agent process of a cluster, its output in a log file.
type Proc struct {
	What string // for messages: "server", "node agent <name>"
	Log  string
	Cmd  *exec.Cmd

	exited chan struct{}
}

// StartProc starts bin with args, its output to the file log. The process
// dies with the one that started it (Pdeathsig), so a test killed by go
// test's -timeout, or an interrupted demo, leaves none behind.
func StartProc(what, log, bin string, args ...string) (*Proc, error) {
	f, err := os.Create(log)
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
	p := &Proc{What: what, Log: log, Cmd: cmd, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.exited) }()
	return p, nil
}

// Pid is the process id.
func (p *Proc) Pid() int { return p.Cmd.Process.Pid }

// Alive reports whether the process has not exited.
func (p *Proc) Alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// Signal sends sig to the process and reports whether it is gone within
// d.
func (p *Proc) Signal(sig syscall.Signal, d time.Duration) bool {
	_ = p.Cmd.Process.Signal(sig)
	select {
	case <-p.exited:
		return true
	case <-time.After(d):
		return false
	}
}

// Kill SIGKILLs the process and waits until it is gone; nil does
// nothing.
func (p *Proc) Kill() error {
	if p != nil && !p.Signal(syscall.SIGKILL, 10*time.Second) {
		return fmt.Errorf("%s (pid %d) did not die on SIGKILL", p.What, p.Pid())
	}
	return nil
}

// Stop asks the process to shut down (SIGTERM) and kills it if it has
// not within 15 s; nil does nothing.
func (p *Proc) Stop() error {
	if p != nil && !p.Signal(syscall.SIGTERM, 15*time.Second) {
		return errors.Join(fmt.Errorf("%s (pid %d) did not stop on SIGTERM within 15 s", p.What, p.Pid()), p.Kill())
	}
	return nil
}
