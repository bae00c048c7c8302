package proc

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

func start(t *testing.T, tie Tie, script string) *Proc {
	t.Helper()
	p, err := Start(tie, "sh", filepath.Join(t.TempDir(), "out"), "/bin/sh", "-c", script)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Kill() })
	return p
}

// The child's stdout and stderr both reach the log, and Wait says how it
// ended once it has.
func TestStartLogsAndWait(t *testing.T) {
	p := start(t, DiesWithParent, `echo out; echo err >&2; exit 3`)
	if err := p.Wait(); exitCode(err) != 3 {
		t.Fatalf("Wait = %v, want exit status 3", err)
	}
	if p.Alive() {
		t.Error("Alive after Wait returned")
	}
	b, err := os.ReadFile(p.Log)
	if err != nil || string(b) != "out\nerr\n" {
		t.Errorf("log = %q, %v", b, err)
	}
	if p.Started.IsZero() || p.Pid() == 0 {
		t.Errorf("Started %v, pid %d", p.Started, p.Pid())
	}
}

// The log is created afresh on each start: callers that keep earlier
// output name a new file.
func TestStartTruncatesTheLog(t *testing.T) {
	log := filepath.Join(t.TempDir(), "out")
	if err := os.WriteFile(log, []byte("old run\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := Start(DiesWithParent, "sh", log, "/bin/sh", "-c", "echo new")
	if err != nil {
		t.Fatal(err)
	}
	_ = p.Wait()
	if b, _ := os.ReadFile(log); string(b) != "new\n" {
		t.Errorf("log = %q", b)
	}
}

func TestStartErrorNamesTheChild(t *testing.T) {
	_, err := Start(DiesWithParent, "the daemon", filepath.Join(t.TempDir(), "out"), "/nonexistent/daemon")
	if err == nil || !strings.HasPrefix(err.Error(), "starting the daemon: ") {
		t.Fatalf("Start = %v", err)
	}
}

// OwnGroup puts the child in a process group of its own (a Ctrl-C at the
// terminal does not reach it); DiesWithParent leaves it in ours.
func TestTieProcessGroup(t *testing.T) {
	own := start(t, OwnGroup, `exec sleep 60`)
	if g, err := syscall.Getpgid(own.Pid()); err != nil || g != own.Pid() {
		t.Errorf("OwnGroup: pgid %d, %v, want the child's pid %d", g, err, own.Pid())
	}
	tied := start(t, DiesWithParent, `exec sleep 60`)
	if g, err := syscall.Getpgid(tied.Pid()); err != nil || g != syscall.Getpgrp() {
		t.Errorf("DiesWithParent: pgid %d, %v, want ours %d", g, err, syscall.Getpgrp())
	}
}

// Stop ends a child that honours SIGTERM within grace, and SIGKILLs one
// that ignores it; Kill needs no grace. Nil and exited processes need
// nothing.
func TestStopAndKill(t *testing.T) {
	p := start(t, DiesWithParent, `exec sleep 60`)
	if err := p.Stop(10 * time.Second); err != nil || p.Alive() {
		t.Fatalf("Stop = %v, alive %v", err, p.Alive())
	}
	if killedBy(p.Wait()) != syscall.SIGTERM {
		t.Errorf("a stopped sleep ended by %v, want SIGTERM", p.Wait())
	}

	stubborn := start(t, DiesWithParent, `trap '' TERM; echo trapped; while :; do sleep 0.05; done`)
	waitLogged(t, stubborn, "trapped")
	began := time.Now()
	if err := stubborn.Stop(200 * time.Millisecond); err != nil || stubborn.Alive() {
		t.Fatalf("Stop of a process ignoring SIGTERM = %v, alive %v", err, stubborn.Alive())
	}
	if killedBy(stubborn.Wait()) != syscall.SIGKILL {
		t.Errorf("a process ignoring SIGTERM ended by %v, want SIGKILL", stubborn.Wait())
	}
	if d := time.Since(began); d < 200*time.Millisecond {
		t.Errorf("SIGKILL after %v, before the grace", d)
	}

	k := start(t, DiesWithParent, `exec sleep 60`)
	if err := k.Kill(); err != nil || k.Alive() {
		t.Fatalf("Kill = %v, alive %v", err, k.Alive())
	}
	if err := k.Kill(); err != nil {
		t.Errorf("Kill of an exited process = %v", err)
	}
	if err := k.Stop(time.Second); err != nil {
		t.Errorf("Stop of an exited process = %v", err)
	}

	var none *Proc
	if none.Alive() || none.Pid() != 0 || none.Kill() != nil || none.Stop(time.Second) != nil {
		t.Error("a nil Proc is not a gone one")
	}
}

// status is how a process ended by Wait's error; ok false when it did
// not end by exiting or a signal.
func status(err error) (ws syscall.WaitStatus, ok bool) {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return 0, false
	}
	ws, ok = ee.Sys().(syscall.WaitStatus)
	return ws, ok
}

func exitCode(err error) int {
	if ws, ok := status(err); ok && ws.Exited() {
		return ws.ExitStatus()
	}
	return -1
}

// killedBy is the signal that ended a process, 0 when none did.
func killedBy(err error) syscall.Signal {
	if ws, ok := status(err); ok && ws.Signaled() {
		return ws.Signal()
	}
	return 0
}

func waitLogged(t *testing.T, p *Proc, s string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if b, _ := os.ReadFile(p.Log); strings.Contains(string(b), s) {
			return
		}
	}
	t.Fatalf("%q never in the log", s)
}

// FreeAddr's port is on loopback, free for its network (a listener gets
// it), and other networks are refused.
func TestFreeAddr(t *testing.T) {
	tcp, err := FreeAddr("tcp")
	if err != nil || !tcp.Addr().IsLoopback() || tcp.Port() == 0 {
		t.Fatalf("FreeAddr(tcp) = %v, %v", tcp, err)
	}
	l, err := net.Listen("tcp", tcp.String())
	if err != nil {
		t.Fatalf("listening on the free %v: %v", tcp, err)
	}
	l.Close()

	udp, err := FreeAddr("udp")
	if err != nil || !udp.Addr().IsLoopback() || udp.Port() == 0 {
		t.Fatalf("FreeAddr(udp) = %v, %v", udp, err)
	}
	c, err := net.ListenPacket("udp", udp.String())
	if err != nil {
		t.Fatalf("listening on the free %v: %v", udp, err)
	}
	c.Close()

	if a, err := FreeAddr("unix"); err == nil {
		t.Errorf("FreeAddr(unix) = %v, want an error", a)
	}
}

// A child tied to its parent dies with the process, not with the thread
// that happened to start it: Go ends the thread of a goroutine that
// locked it and exits (as entering a network namespace does), and the
// kernel sends Pdeathsig when the starting thread ends.
func TestDiesWithParentOutlivesTheStartingThread(t *testing.T) {
	type started struct {
		p   *Proc
		tid int
		err error
	}
	log := filepath.Join(t.TempDir(), "out")
	var onEndingThread func() started
	onEndingThread = func() started {
		ch := make(chan started)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
			if syscall.Gettid() == os.Getpid() {
				// The main thread, which Go never ends: hold it while
				// another goroutine, on another thread, starts the child.
				defer runtime.UnlockOSThread()
				ch <- onEndingThread()
				return
			}
			p, err := Start(DiesWithParent, "sleep", log, "/bin/sleep", "60")
			ch <- started{p, syscall.Gettid(), err}
		}()
		return <-ch
	}
	s := onEndingThread()
	if s.err != nil {
		t.Fatal(s.err)
	}
	t.Cleanup(func() { _ = s.p.Kill() })
	task := fmt.Sprintf("/proc/self/task/%d", s.tid)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(task); errors.Is(err, os.ErrNotExist) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("thread %d of the starting goroutine still runs", s.tid)
		}
		runtime.Gosched()
	}
	// The thread is gone, and Pdeathsig would have been sent with it: a
	// child killed by it is reaped within milliseconds.
	select {
	case <-s.p.exited:
		t.Fatalf("the child died with the thread that started it: %v", s.p.err)
	case <-time.After(300 * time.Millisecond):
	}
	if !s.p.Alive() {
		t.Fatal("the child is gone")
	}
}
