package console

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// newPTY stands in for QEMU: it holds the master of a new pty (left in
// the kernel's default cooked, echoing mode) and returns the slave path.
func newPTY(t *testing.T) (*os.File, string) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no ptys here: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	rc, err := m.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var (
		n    int
		ierr error
	)
	if err := rc.Control(func(fd uintptr) {
		if ierr = unix.IoctlSetPointerInt(int(fd), unix.TIOCSPTLCK, 0); ierr == nil {
			n, ierr = unix.IoctlGetInt(int(fd), unix.TIOCGPTN)
		}
	}); err != nil || ierr != nil {
		t.Fatalf("unlocking pty: %v %v", err, ierr)
	}
	return m, fmt.Sprintf("/dev/pts/%d", n)
}

// Input reaches the guest's side unchanged; the guest's output is
// drained (never blocking it) and never echoed back as input.
func TestSerialPortInputDrainNoEcho(t *testing.T) {
	m, path := newPTY(t)
	p, err := openSerialPty(path, slog.New(slog.DiscardHandler), true)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	p.write([]byte("ls -l\r\n"))
	got := make([]byte, 64)
	_ = m.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := io.ReadAtLeast(m, got, len("ls -l\r\n"))
	if err != nil || string(got[:n]) != "ls -l\r\n" {
		t.Fatalf("guest side read %q, %v; want the input unchanged", got[:n], err)
	}

	// Far more than a pty buffers: only a drained pty takes it all.
	out := bytes.Repeat([]byte("guest output line\r\n"), 64<<10)
	wrote := make(chan error, 1)
	go func() { _, err := m.Write(out); wrote <- err }()
	select {
	case err := <-wrote:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("guest output blocked: the pty is not drained")
	}
	_ = m.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if n, err := m.Read(got); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("guest side read %q, %v: output was echoed back as input", got[:n], err)
	}
}

func TestSerialPortOnlyPtys(t *testing.T) {
	for _, path := range []string{"/etc/passwd", "/dev/pts/../../etc/passwd", "pts/1", ""} {
		if p, err := openSerialPty(path, slog.New(slog.DiscardHandler), true); err == nil {
			p.Close()
			t.Errorf("openSerialPty(%q) opened it", path)
		}
	}
}
