package hostns

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
)

func TestSocket(t *testing.T) {
	for _, tc := range []struct {
		uri, want string
		err       error
	}{
		{uri: "qemu+unix:///system?socket=/tmp/x/libvirt-sock", want: "/tmp/x/libvirt-sock"},
		{uri: "qemu:///system?socket=/tmp/y", want: "/tmp/y"},
		{uri: "qemu+tcp://169.254.1.1:16509/system", err: ErrNotLocal},
		{uri: "qemu+ssh://root@host/system", err: ErrNotLocal},
		{uri: "qemu://host/system", err: ErrNotLocal},
	} {
		got, err := Socket(tc.uri)
		if tc.err != nil {
			if !errors.Is(err, tc.err) {
				t.Errorf("Socket(%q) = %q, %v; want %v", tc.uri, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("Socket(%q) = %q, %v; want %q", tc.uri, got, err, tc.want)
		}
	}
}

// TestDaemonNetNSIsTheListener: the namespace found is the one of the
// process that listens on the socket (here the test itself).
func TestDaemonNetNSIsTheListener(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	got, err := DaemonNetNS("qemu+unix:///system?socket=" + sock)
	if want := fmt.Sprintf("/proc/%d/ns/net", os.Getpid()); err != nil || got != want {
		t.Fatalf("DaemonNetNS = %q, %v; want %q", got, err, want)
	}
	if _, err := DaemonNetNS("qemu+unix:///system?socket=" + sock + "-missing"); err == nil {
		t.Fatal("no error for a socket nobody listens on")
	}
}
