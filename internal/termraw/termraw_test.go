package termraw

import (
	"fmt"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// openPTY returns a new pty pair (master, slave).
func openPTY(t *testing.T) (*os.File, *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no ptys here: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	var n int
	var ierr error
	rc, err := m.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	if err := rc.Control(func(fd uintptr) {
		if ierr = unix.IoctlSetPointerInt(int(fd), unix.TIOCSPTLCK, 0); ierr == nil {
			n, ierr = unix.IoctlGetInt(int(fd), unix.TIOCGPTN)
		}
	}); err != nil || ierr != nil {
		t.Fatalf("unlocking pty: %v %v", err, ierr)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return m, s
}

func TestMakeRawAndRestore(t *testing.T) {
	_, s := openPTY(t)
	if !IsTerminal(s) {
		t.Fatal("a pty is no terminal")
	}
	before, err := get(s)
	if err != nil {
		t.Fatal(err)
	}
	if before.Lflag&unix.ECHO == 0 || before.Lflag&unix.ICANON == 0 {
		t.Fatalf("a new pty is already raw: lflag %#x", before.Lflag)
	}
	restore, err := MakeRaw(s)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := get(s)
	if err != nil {
		t.Fatal(err)
	}
	if raw.Lflag&(unix.ECHO|unix.ICANON|unix.ISIG) != 0 || raw.Iflag&unix.ICRNL != 0 || raw.Oflag&unix.OPOST != 0 {
		t.Fatalf("not raw: iflag %#x oflag %#x lflag %#x", raw.Iflag, raw.Oflag, raw.Lflag)
	}
	if err := restore(); err != nil {
		t.Fatal(err)
	}
	after, err := get(s)
	if err != nil {
		t.Fatal(err)
	}
	if *after != *before {
		t.Fatalf("restore: %+v, want %+v", after, before)
	}
}

func TestRegularFileIsNoTerminal(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "f")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if IsTerminal(f) {
		t.Fatal("a regular file is a terminal")
	}
	if _, err := MakeRaw(f); err == nil {
		t.Fatal("MakeRaw of a regular file: no error")
	}
}
