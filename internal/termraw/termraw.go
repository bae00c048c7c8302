// Package termraw puts terminals into raw mode (cfmakeraw) without cgo:
// the console command's local terminal, and the ends of a guest's serial
// pty that the node agent (input) and an adopted domain's launcher (the
// console log) open, both through OpenPty.
package termraw

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// IsTerminal reports whether f is a terminal.
func IsTerminal(f *os.File) bool {
	_, err := get(f)
	return err == nil
}

// MakeRaw puts the terminal f into raw mode: no echo, no line editing, no
// signals from keys, bytes passed through as they are. The returned
// function restores the previous mode.
func MakeRaw(f *os.File) (restore func() error, err error) {
	old, err := get(f)
	if err != nil {
		return nil, err
	}
	raw := *old
	// cfmakeraw(3).
	raw.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON
	raw.Oflag &^= unix.OPOST
	raw.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
	raw.Cflag &^= unix.CSIZE | unix.PARENB
	raw.Cflag |= unix.CS8
	raw.Cc[unix.VMIN] = 1
	raw.Cc[unix.VTIME] = 0
	if err := set(f, &raw); err != nil {
		return nil, err
	}
	return func() error { return set(f, old) }, nil
}

// get and set go through SyscallConn: File.Fd would switch the file to
// blocking mode, and a blocked read could then no longer be interrupted
// by Close.
func get(f *os.File) (*unix.Termios, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("terminal %s: %w", f.Name(), err)
	}
	var (
		t    *unix.Termios
		terr error
	)
	if err := rc.Control(func(fd uintptr) { t, terr = unix.IoctlGetTermios(int(fd), unix.TCGETS) }); err != nil {
		return nil, fmt.Errorf("terminal %s: %w", f.Name(), err)
	}
	if terr != nil {
		return nil, fmt.Errorf("terminal %s: %w", f.Name(), terr)
	}
	return t, nil
}

func set(f *os.File, t *unix.Termios) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return fmt.Errorf("terminal %s: %w", f.Name(), err)
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = unix.IoctlSetTermios(int(fd), unix.TCSETS, t) }); err != nil {
		return fmt.Errorf("terminal %s: %w", f.Name(), err)
	}
	if serr != nil {
		return fmt.Errorf("terminal %s: %w", f.Name(), serr)
	}
	return nil
}
