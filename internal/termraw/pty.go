package termraw

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// OpenPty opens the pty at path (a guest's serial pty, as libvirt
// reports it) with flag (os.O_RDONLY, os.O_RDWR) and puts it into raw
// mode: an echoing pty would feed the guest's output back to it as
// input. The path comes from another process and the callers run as
// root: nothing but a clean /dev/pts/ path is opened, never as the
// controlling terminal.
func OpenPty(path string, flag int) (*os.File, error) {
	if !strings.HasPrefix(path, "/dev/pts/") || filepath.Clean(path) != path {
		return nil, fmt.Errorf("%q is not a pty", path)
	}
	f, err := os.OpenFile(path, flag|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	if _, err := MakeRaw(f); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
