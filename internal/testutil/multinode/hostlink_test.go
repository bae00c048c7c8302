package multinode

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/virtplane/terraform-provider-virtplane/internal/procfs"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil/proc"
)

// These tests make runs of no nodes: namespaces, bridges and veths, but
// no libvirtd, so they run wherever Launch may (root).

func requireLaunch(t *testing.T) {
	t.Helper()
	if reason := Unavailable(); reason != "" {
		t.Skip(reason)
	}
}

// launchHub launches a run of no nodes with a host link, closed when t
// ends.
func launchHub(t *testing.T) *Run {
	t.Helper()
	r, err := Launch(t.Context(), 0, Options{HostLink: true}, t)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Close(t, false); err != nil {
			t.Error(err)
		}
	})
	return r
}

// reachable reports whether the host's namespace reaches addr: a TCP
// connection to a port nobody listens on is refused at once by the hub's
// kernel when the path works, and times out (or finds no route) when not.
func reachable(addr string) error {
	c, err := net.DialTimeout("tcp", net.JoinHostPort(addr, "9"), 3*time.Second)
	if err == nil {
		c.Close()
		return nil
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		return nil
	}
	return err
}

// TestHostLink: a run with a host link puts HostAddr on an interface of
// the host's namespace, through which the hub's address is reached, and
// nothing else of the run; a
// second run forced onto the same subnet finds it taken (the route is the
// claim) and moves to another; Close removes both interfaces.
func TestHostLink(t *testing.T) {
	requireLaunch(t)
	var a, b Hub
	t.Run("runs", func(t *testing.T) {
		r1 := launchHub(t)
		a = r1.Hub()
		if err := reachable(a.Addr); err != nil {
			t.Errorf("the hub's %s from the host's namespace: %v", a.Addr, err)
		}
		if ifc, err := net.InterfaceByName(hostLinkName(r1.id)); err != nil {
			t.Error(err)
		} else if addrs, _ := ifc.Addrs(); len(addrs) != 1 || addrs[0].String() != a.HostAddr+"/32" {
			t.Errorf("the host link's addresses %v, want %s/32", addrs, a.HostAddr)
		}
		// The hub, not the nodes: a node's address is not routed there.
		node := strings.TrimSuffix(a.Addr, "254") + "1"
		if out, err := output(t.Context(), "ip", "-4", "route", "get", node); err == nil && strings.Contains(out, hostLinkName(r1.id)) {
			t.Errorf("the host's namespace routes %s through the host link: %s", node, out)
		}

		r2, err := newRun(0, Options{HostLink: true})
		if err != nil {
			t.Fatal(err)
		}
		r2.setSubnet(r1.subnet)
		t.Cleanup(func() {
			if err := r2.Close(t, false); err != nil {
				t.Error(err)
			}
		})
		if err := r2.start(t.Context()); err != nil {
			t.Fatal(err)
		}
		b = r2.Hub()
		if r2.subnet == r1.subnet {
			t.Fatalf("two host links on 169.254.%d.0/24", r1.subnet)
		}
		for _, h := range []Hub{a, b} {
			if err := reachable(h.Addr); err != nil {
				t.Errorf("the hub's %s from the host's namespace: %v", h.Addr, err)
			}
		}
	})
	for _, h := range []Hub{a, b} {
		assertHostAddrGone(t, h.HostAddr)
	}
}

func assertHostAddrGone(t *testing.T, addr string) {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if strings.HasPrefix(a.String(), addr+"/") {
			t.Errorf("the host's namespace still has %s", a)
		}
	}
}

// TestSweepRemovesHostLinkAndHubProcesses: a run whose owner died is swept
// with what runs in its hub (a Ceph cluster's daemons would) and its host
// link.
func TestSweepRemovesHostLinkAndHubProcesses(t *testing.T) {
	requireLaunch(t)
	r := launchHub(t)
	h := r.Hub()
	p := startInHub(t, h)
	// The owner is gone: pid 1 did not start at that tick.
	if err := os.WriteFile(filepath.Join(r.dir, ownerFile), []byte("1 999999999999\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sweepStale(t)

	ctx, cancel := context.WithTimeout(t.Context(), proc.KillWait)
	defer cancel()
	select {
	case <-ctx.Done():
		t.Errorf("the hub's process %d (%s) survived the sweep", p.Pid(), procfs.Comm(p.Pid()))
	case <-exited(p):
	}
	if _, err := os.Stat(filepath.Join(netnsDir, h.NetNS)); !os.IsNotExist(err) {
		t.Errorf("namespace %s is still there (%v)", h.NetNS, err)
	}
	if _, err := net.InterfaceByName(hostLinkName(r.id)); err == nil {
		t.Errorf("host link %s is still there", hostLinkName(r.id))
	}
	assertHostAddrGone(t, h.HostAddr)
	if _, err := os.Stat(r.dir); !os.IsNotExist(err) {
		t.Errorf("%s is still there (%v)", r.dir, err)
	}
}

func exited(p *proc.Proc) <-chan struct{} {
	ch := make(chan struct{})
	go func() { _ = p.Wait(); close(ch) }()
	return ch
}

// TestCloseKillsWhatRunsInTheHub: Close kills what still runs in the
// run's hub (a Ceph cluster nobody closed), which would otherwise keep the
// hub's namespace alive after ip netns delete, and the host link with it.
func TestCloseKillsWhatRunsInTheHub(t *testing.T) {
	requireLaunch(t)
	r, err := Launch(t.Context(), 0, Options{HostLink: true}, t)
	if err != nil {
		t.Fatal(err)
	}
	h := r.Hub()
	p := startInHub(t, h)
	if err := r.Close(t, false); err != nil {
		t.Error(err)
	}
	select {
	case <-time.After(proc.KillWait):
		t.Errorf("the hub's process %d (%s) survived Close", p.Pid(), procfs.Comm(p.Pid()))
	case <-exited(p):
	}
	if _, err := net.InterfaceByName(hostLinkName(r.id)); err == nil {
		t.Errorf("host link %s is still there", hostLinkName(r.id))
	}
	assertHostAddrGone(t, h.HostAddr)
}

// startInHub starts sleep in hub's namespace, killed when t ends.
func startInHub(t *testing.T, h Hub) *proc.Proc {
	t.Helper()
	p, err := proc.Start(proc.DiesWithParent, "sleep in the hub", filepath.Join(t.TempDir(), "sleep.out"),
		"nsenter", "--net="+filepath.Join(netnsDir, h.NetNS), "--", "sleep", "infinity")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Kill() })
	if err := waitComm(t.Context(), p, "sleep"); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestSubnetAvoidsTheMetadataService: no run's hub is 169.254.169.254,
// the cloud metadata service, which a host link would route into the hub.
func TestSubnetAvoidsTheMetadataService(t *testing.T) {
	var r Run
	for range 5000 {
		if err := r.pickSubnet(); err != nil {
			t.Fatal(err)
		}
		if r.subnet == metadataSubnet || r.subnet < 1 || r.subnet > 254 {
			t.Fatalf("subnet %d", r.subnet)
		}
	}
}
