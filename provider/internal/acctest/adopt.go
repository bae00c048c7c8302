package acctest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"libvirt.org/go/libvirtxml"

	"github.com/virtplane/terraform-provider-virtplane/internal/launcher"
	"github.com/virtplane/terraform-provider-virtplane/internal/procfs"
	"github.com/virtplane/terraform-provider-virtplane/internal/testguest"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// Domains defined outside virtplane on the real node, for the tests of
// adoption (docs/adopt.md): the node agent allows adoption from a
// directory of the run's (--adopt-dir).

// CanAdopt reports whether the nodes can adopt a domain: only the real
// node, whose libvirtd the harness reaches.
func (n *Nodes) CanAdopt() bool { return n.host != nil }

// StartAdoptable defines and starts, with virsh, the test guest as domain
// name on the real node (testguest.AdoptableDomain: its boot counter on a
// 64 MiB raw disk in the node's adopt directory, a user NIC with MAC mac),
// waits until it booted, and returns its QEMU pid. The domain is
// destroyed and undefined at the end of t whatever happened (adopted or
// not).
func (n *Nodes) StartAdoptable(t *testing.T, name, mac string) int {
	t.Helper()
	h := n.host
	disk := filepath.Join(h.adoptDir, name+".raw")
	f, err := os.OpenFile(disk, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o660)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(64 << 20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	bootLog := filepath.Join(h.adoptDir, name+".log")
	d := testguest.AdoptableDomain(name, h.imageDir, h.kernel, disk, bootLog)
	d.Devices.Interfaces[0].MAC = &libvirtxml.DomainInterfaceMAC{Address: mac}
	x, err := d.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	def := filepath.Join(t.TempDir(), name+".xml")
	if err := os.WriteFile(def, []byte(x), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, pid := range procfs.LauncherPids(h.launcher, name) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		_, _ = h.virsh(ctx, "destroy", name)
		_, _ = h.virsh(ctx, "undefine", name, "--nvram")
		_ = os.Remove(disk)
		_ = os.Remove(bootLog)
	})
	if _, err := h.virsh(t.Context(), "define", def); err != nil {
		t.Fatal(err)
	}
	if _, err := h.virsh(t.Context(), "start", name); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyNoError(t, GuestBootTimeout, name+" booted", func() error {
		b, _ := os.ReadFile(bootLog)
		if _, ok := testguest.FindMarker(string(b), testguest.MarkerBooted); !ok {
			return fmt.Errorf("no %s on its console yet", testguest.MarkerBooted)
		}
		return nil
	})
	return n.QEMUPid(t, name)
}

// QEMUPid is the QEMU process of the real node's running domain name,
// from libvirtd's pid file; 0 when it runs none.
func (n *Nodes) QEMUPid(t *testing.T, name string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(launcher.DefaultQEMUPidDir, name+".pid"))
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("%s.pid: %v", name, err)
	}
	return pid
}
