package termraw

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// OpenPty opens nothing but a clean /dev/pts/ path, and leaves the pty raw.
func TestOpenPty(t *testing.T) {
	for _, path := range []string{"/etc/passwd", "/dev/pts/../../etc/passwd", "/dev/pts//0", "pts/1", ""} {
		if f, err := OpenPty(path, os.O_RDONLY); err == nil {
			f.Close()
			t.Errorf("OpenPty(%q) opened it", path)
		}
	}
	_, s := openPTY(t)
	f, err := OpenPty(s.Name(), os.O_RDONLY)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := get(f)
	if err != nil {
		t.Fatal(err)
	}
	if got.Lflag&(unix.ECHO|unix.ICANON) != 0 {
		t.Errorf("the pty is not raw: lflag %#x", got.Lflag)
	}
}
