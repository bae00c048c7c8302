package ceph

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// EnvRequired makes a missing Ceph fail the tests that need it instead of
// skipping them: make test sets it (with the libvirt tier's variables),
// so that CI never passes without the storage tier.
const EnvRequired = "VIRTPLANE_TEST_CEPH"

// rbdModules is where Debian's qemu-block-extra puts QEMU's rbd block
// driver, per architecture: without it QEMU cannot open an rbd disk.
const rbdModules = "/usr/lib/*/qemu/block-rbd.so"

// Unavailable says why a cluster cannot run on this host, "" when it
// can: it needs root (namespaces, daemons), Ceph's daemons and tools
// (ceph-mon, ceph-osd, ceph-base, ceph-common), QEMU's rbd module
// (qemu-block-extra) and nsenter and ip.
func Unavailable() string {
	if os.Geteuid() != 0 {
		return fmt.Sprintf("ceph: needs root to enter network namespaces and run Ceph's daemons (euid %d)", os.Geteuid())
	}
	for _, bin := range []string{"ceph-mon", "ceph-osd", "ceph", "rbd", "ceph-authtool", "monmaptool", "nsenter", "ip"} {
		if _, err := exec.LookPath(bin); err != nil {
			return "ceph: " + bin + " not found (scripts/install-deps.sh test installs ceph-mon ceph-osd ceph-common): " + err.Error()
		}
	}
	if m, _ := filepath.Glob(rbdModules); len(m) == 0 {
		return "ceph: QEMU's rbd block module (" + rbdModules + ") not found (Debian package qemu-block-extra)"
	}
	return ""
}

// TB is what Require and StartForTest need of a test; *testing.T and
// *testing.B are ones.
type TB interface {
	Helper()
	Logf(format string, args ...any)
	Skip(args ...any)
	Fatal(args ...any)
	Cleanup(func())
}

// Require skips t unless a cluster can run here (Unavailable), and fails
// it instead when EnvRequired is set.
func Require(t TB) {
	t.Helper()
	reason := Unavailable()
	if reason == "" {
		return
	}
	if os.Getenv(EnvRequired) != "" {
		t.Fatal(reason + " (" + EnvRequired + " is set, as make test sets it: the storage tier must run)")
		return
	}
	t.Skip(reason)
}
