package multinode_test

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"libvirt.org/go/libvirtxml"

	"github.com/virtplane/terraform-provider-virtplane/internal/procfs"
	"github.com/virtplane/terraform-provider-virtplane/internal/testguest"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil/multinode"
)

// The libvirt tier's switch: without it these tests skip, like every test
// that runs libvirtd or QEMU.
const envLibvirtURI = "VIRTPLANE_TEST_LIBVIRT_URI"

// Generous: guests boot in ~5 s alone under TCG, several times that when
// other packages' guests share two host cores.
const (
	bootTimeout = 2 * time.Minute
	stopTimeout = time.Minute
)

func requireLibvirtTier(t *testing.T) {
	t.Helper()
	if os.Getenv(envLibvirtURI) == "" {
		t.Skipf("%s is not set; the multinode tests run private libvirtds in the libvirt tier", envLibvirtURI)
	}
}

// TestNodesAreSeparateHosts: two nodes are two libvirt hosts, each
// daemon in its node's namespaces with its own hostname and host UUID,
// reachable from the other node over TCP on the node network; after the
// cleanup no namespace, process or dir of theirs is left.
func TestNodesAreSeparateHosts(t *testing.T) {
	requireLibvirtTier(t)
	t.Parallel()
	var nodes []*multinode.Node
	var pids []int
	t.Run("nodes", func(t *testing.T) {
		began := time.Now()
		nodes = multinode.Start(t, 2, multinode.Options{})
		t.Logf("two nodes started in %s", time.Since(began).Round(time.Millisecond))
		ctx := t.Context()
		uuids := map[string]bool{}
		for _, n := range nodes {
			if host, err := n.Virsh(ctx, "hostname"); err != nil || strings.TrimSpace(host) != n.Name {
				t.Errorf("node %s: libvirt's hostname %q (%v)", n.Name, host, err)
			}
			caps := capabilities(t, n)
			if caps.Host.UUID != n.HostUUID {
				t.Errorf("node %s: host UUID %s, configured %s", n.Name, caps.Host.UUID, n.HostUUID)
			}
			uuids[caps.Host.UUID] = true
			for _, pid := range []int{n.LibvirtdPid(), n.VirtlogdPid()} {
				if in, err := n.Runs(pid); err != nil || !in {
					t.Errorf("node %s: daemon %d (%s) is not in the node's namespaces (%v)", n.Name, pid, procfs.Comm(pid), err)
				}
			}
			pids = append(pids, n.Pids()...)
		}
		if len(uuids) != 2 {
			t.Errorf("host UUIDs %v: want two distinct", uuids)
		}
		// Node 0 reaches node 1's TCP listener, as a migration's source
		// libvirtd does.
		a, b := nodes[0], nodes[1]
		out, err := exec.CommandContext(ctx, "nsenter", "--net=/run/netns/"+a.NetNS, "--", "virsh", "-c", b.TCPURI, "hostname").CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != b.Name {
			t.Errorf("from node %s, %s answered %q (%v), want %s", a.Name, b.TCPURI, out, err, b.Name)
		}
		// Each node has the guests' bridge, joined to the hub's guest
		// segment.
		for _, n := range nodes {
			out, err := exec.CommandContext(ctx, "ip", "-n", n.NetNS, "link", "show", "master", multinode.GuestBridge).CombinedOutput()
			if err != nil || strings.Count(string(out), "state UP") != 1 {
				t.Errorf("node %s: ports of %s: %v\n%s", n.Name, multinode.GuestBridge, err, out)
			}
		}
		if out, err := a.HubExec(ctx, "ip", "-4", "addr", "show", "dev", "gbr0"); err != nil || !strings.Contains(string(out), multinode.HubGuestAddr) {
			t.Errorf("the hub's guest bridge: %v\n%s", err, out)
		}
	})
	if len(nodes) == 0 {
		return
	}
	assertGone(t, nodes, pids)
}

// assertGone checks what the cleanup of nodes must have removed.
func assertGone(t *testing.T, nodes []*multinode.Node, pids []int) {
	t.Helper()
	if len(pids) == 0 {
		t.Error("no process was recorded for the nodes")
	}
	for _, pid := range pids {
		if procfs.Alive(pid) {
			t.Errorf("process %d (%s) of the nodes still runs", pid, procfs.Comm(pid))
		}
	}
	for _, n := range nodes {
		if _, err := os.Stat(filepath.Join("/run/netns", n.NetNS)); !os.IsNotExist(err) {
			t.Errorf("network namespace %s still exists (%v)", n.NetNS, err)
		}
		if _, err := os.Stat(n.Root); !os.IsNotExist(err) {
			t.Errorf("node dir %s still exists (%v)", n.Root, err)
		}
	}
}

func capabilities(t *testing.T, n *multinode.Node) *libvirtxml.Caps {
	t.Helper()
	x, err := n.Virsh(t.Context(), "capabilities")
	if err != nil {
		t.Fatal(err)
	}
	var caps libvirtxml.Caps
	if err := caps.Unmarshal(x); err != nil {
		t.Fatal(err)
	}
	return &caps
}

// TestLiveMigrationBetweenNodes: the test guest, booted on node A, is
// live-migrated peer to peer over A's TCP URI to node B and back (what
// issue 15's migrations do), its QEMU each time in the namespaces of the
// node that runs it, and it still answers the ACPI power button after
// both moves.
func TestLiveMigrationBetweenNodes(t *testing.T) {
	requireLibvirtTier(t)
	guestDir, err := testguest.Dir()
	if err != nil {
		t.Skip(err)
	}
	t.Parallel()
	nodes := multinode.Start(t, 2, multinode.Options{})
	a, b := nodes[0], nodes[1]
	ctx := t.Context()

	// Both nodes see the run's dir alike: the kernel and the console log
	// are at one path for either QEMU.
	dir := a.RunDir()
	if _, err := testguest.Install(guestDir, dir); err != nil {
		t.Fatal(err)
	}
	name := "vpmig-" + randomHex(t)
	console := filepath.Join(dir, "console.log")
	dom := testguest.Domain(name, dir, console, testguest.Cmdline(testguest.Hostname(name)))
	// The destination's QEMU reopens the console file: appending keeps
	// what the source's wrote.
	dom.Devices.Serials[0].Source.File.Append = "on"
	x, err := dom.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	xmlFile := filepath.Join(dir, "domain.xml")
	if err := os.WriteFile(xmlFile, []byte(x), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Virsh(ctx, "create", xmlFile); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	waitConsole(t, console, testguest.MarkerBooted, bootTimeout)
	t.Logf("guest booted on %s in %s", a.Name, time.Since(began).Round(time.Millisecond))
	assertRunsOn(t, name, a, b)

	for _, hop := range [][2]*multinode.Node{{a, b}, {b, a}} {
		from, to := hop[0], hop[1]
		began := time.Now()
		if _, err := from.Virsh(ctx, "migrate", "--live", "--p2p", name, to.TCPURI); err != nil {
			t.Fatalf("migrating %s from %s to %s: %v", name, from.Name, to.Name, err)
		}
		t.Logf("migrated %s → %s in %s", from.Name, to.Name, time.Since(began).Round(time.Millisecond))
		assertRunsOn(t, name, to, from)
	}

	if _, err := a.Virsh(ctx, "shutdown", name); err != nil {
		t.Fatal(err)
	}
	line := waitConsole(t, console, testguest.MarkerPoweroff, stopTimeout)
	if testguest.Fields(line)["reason"] != "acpi" {
		t.Errorf("guest powered off with %q, want reason=acpi", line)
	}
	testutil.Eventually(t, stopTimeout, name+" gone from "+a.Name, func() bool {
		ok, err := a.HasDomain(ctx, name)
		return err == nil && !ok
	})
}

// assertRunsOn checks that domain runs on node on, its QEMU in that
// node's namespaces, and that other does not have it.
func assertRunsOn(t *testing.T, domain string, on, other *multinode.Node) {
	t.Helper()
	ctx := t.Context()
	if st, err := on.DomainState(ctx, domain); err != nil || st != "running" {
		t.Fatalf("%s on %s: state %q (%v), want running", domain, on.Name, st, err)
	}
	if ok, err := other.HasDomain(ctx, domain); err != nil || ok {
		t.Errorf("%s still on %s (%v)", domain, other.Name, err)
	}
	pid := on.QEMUPid(domain)
	if pid == 0 {
		t.Fatalf("no QEMU pid file for %s in %s", domain, on.QEMUPidDir())
	}
	if in, err := on.Runs(pid); err != nil || !in {
		t.Errorf("QEMU %d of %s is not in %s's namespaces (%v)", pid, domain, on.Name, err)
	}
	if in, _ := other.Runs(pid); in {
		t.Errorf("QEMU %d of %s is in %s's namespaces", pid, domain, other.Name)
	}
}

// waitConsole waits for marker in the console file and returns the rest
// of its line.
func waitConsole(t *testing.T, file, marker string, d time.Duration) string {
	t.Helper()
	var rest string
	testutil.Every(200*time.Millisecond).Eventually(t, d, marker+" on the console", func() bool {
		b, err := os.ReadFile(file)
		if err != nil {
			return false
		}
		var ok bool
		rest, ok = testguest.FindMarker(string(b), marker)
		return ok
	})
	return rest
}

func randomHex(t *testing.T) string {
	b := make([]byte, 3)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// TestPowerOff: a node running a guest loses power; its daemons and the
// guest's QEMU are gone at once (the guest never prints its power-off
// line), only the holder of its namespaces is left, and the cleanup
// still removes everything without a daemon to ask.
func TestPowerOff(t *testing.T) {
	requireLibvirtTier(t)
	guestDir, err := testguest.Dir()
	if err != nil {
		t.Skip(err)
	}
	t.Parallel()
	var (
		n    *multinode.Node
		pids []int
	)
	t.Run("node", func(t *testing.T) {
		n = multinode.Start(t, 1, multinode.Options{})[0]
		dir := n.RunDir()
		if _, err := testguest.Install(guestDir, dir); err != nil {
			t.Fatal(err)
		}
		name := "vpoff-" + randomHex(t)
		console := filepath.Join(dir, "console.log")
		x, err := testguest.Domain(name, dir, console, testguest.Cmdline()).Marshal()
		if err != nil {
			t.Fatal(err)
		}
		xmlFile := filepath.Join(dir, "domain.xml")
		if err := os.WriteFile(xmlFile, []byte(x), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := n.Virsh(t.Context(), "create", xmlFile); err != nil {
			t.Fatal(err)
		}
		waitConsole(t, console, testguest.MarkerBooted, bootTimeout)
		qemu := n.QEMUPid(name)
		if qemu == 0 {
			t.Fatal("no QEMU")
		}
		pids = n.Pids()
		began := time.Now()
		if err := n.PowerOff(stopTimeout); err != nil {
			t.Fatal(err)
		}
		t.Logf("powered off in %s", time.Since(began).Round(time.Millisecond))
		for _, pid := range []int{qemu, n.LibvirtdPid(), n.VirtlogdPid()} {
			if procfs.Alive(pid) {
				t.Errorf("process %d (%s) survived the power-off", pid, procfs.Comm(pid))
			}
		}
		if left := n.Pids(); len(left) != 1 {
			t.Errorf("processes %v left in the node's namespace, want the holder alone", left)
		}
		if _, err := n.Virsh(t.Context(), "version"); err == nil {
			t.Error("the node's libvirtd still answers")
		}
		if b, _ := os.ReadFile(console); strings.Contains(string(b), testguest.MarkerPoweroff) {
			t.Error("the guest powered off cleanly")
		}
		if err := n.DestroyAll(t.Context()); err != nil {
			t.Errorf("DestroyAll on a powered-off node: %v", err)
		}
	})
	if n != nil {
		assertGone(t, []*multinode.Node{n}, pids)
	}
}
