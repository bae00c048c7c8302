package guestnet

import (
	"context"
	"net"
	"net/netip"
	"testing"
)

// TestStorageEndpoints: with the table in a namespace of the test's own,
// the QEMU user reaches exactly the storage endpoints it was given on the
// host's own addresses (IPv4 and IPv6), and nothing else there: not
// another port of the same address, not loopback. The sets follow each
// change, and a set emptied by hand is put back by Ensure.
func TestStorageEndpoints(t *testing.T) {
	ns := newTestNS(t)
	ns.run("ip", "link", "set", "lo", "up")
	ns.run("ip", "link", "add", "vp0", "type", "veth", "peer", "name", "vp1")
	ns.run("ip", "addr", "add", "198.18.0.1/24", "dev", "vp0")
	ns.run("ip", "addr", "add", "fd00::1/64", "dev", "vp0", "nodad")
	ns.run("ip", "link", "set", "vp0", "up")
	ns.run("ip", "link", "set", "vp1", "up")

	mon := ns.serve("tcp", "198.18.0.1:0")   // a monitor of a local cluster
	osd6 := ns.serve("tcp", "[fd00::1]:0")   // an OSD on IPv6
	other := ns.serve("tcp", "198.18.0.1:0") // another service on the monitor's address
	other6 := ns.serve("tcp", "[fd00::1]:0")
	lo := ns.serve("tcp", "127.0.0.1:0") // where slirp sends 10.0.2.2
	targets := []string{mon, osd6, other, other6, lo}

	ctx := context.Background()
	fw, err := New(Config{UIDs: []uint32{guestUID}, NetNS: func() (string, error) { return ns.path, nil }, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fw.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	check := func(when string, want ...string) {
		t.Helper()
		got := ns.dialAs(true, "tcp", targets...)
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("%s: %s as the QEMU user: %s, want %s", when, targets[i], got[i], want[i])
			}
		}
	}
	check("no endpoints", "refused", "refused", "refused", "refused", "refused")

	// A remote endpoint too: it never matters (the table sees only local
	// destinations), and it goes in like the rest.
	eps := []netip.AddrPort{ap(t, mon), ap(t, osd6), netip.MustParseAddrPort("192.0.2.9:6800")}
	if err := fw.SetStorageEndpoints(ctx, eps); err != nil {
		t.Fatal(err)
	}
	check("endpoints set", "ok", "ok", "refused", "refused", "refused")
	if got := ns.dial1(false, "tcp", other); got != "ok" {
		t.Errorf("root to %s: %s, want ok (root is not QEMU)", other, got)
	}
	if changed, err := fw.Ensure(ctx); err != nil || changed {
		t.Errorf("Ensure after SetStorageEndpoints = %v, %v; want left alone", changed, err)
	}

	// An OSD that moved: the set follows.
	if err := fw.SetStorageEndpoints(ctx, eps[:1]); err != nil {
		t.Fatal(err)
	}
	check("the IPv6 endpoint dropped", "ok", "refused", "refused", "refused", "refused")

	// Emptied by hand (a reload): Ensure fills it again.
	ns.run("nft", "flush", "set", "inet", Table, setStorage4)
	check("set flushed by hand", "refused")
	if changed, err := fw.Ensure(ctx); err != nil || !changed {
		t.Fatalf("Ensure after a flushed set = %v, %v; want put back", changed, err)
	}
	check("put back", "ok", "refused", "refused", "refused", "refused")

	// The table deleted: SetStorageEndpoints installs it whole.
	ns.run("nft", "delete", "table", "inet", Table)
	if err := fw.SetStorageEndpoints(ctx, eps); err != nil {
		t.Fatal(err)
	}
	check("installed by SetStorageEndpoints", "ok", "ok", "refused", "refused", "refused")
}

func ap(t *testing.T, hostport string) netip.AddrPort {
	t.Helper()
	h, p, err := net.SplitHostPort(hostport)
	if err != nil {
		t.Fatal(err)
	}
	a, err := netip.ParseAddrPort(net.JoinHostPort(h, p))
	if err != nil {
		t.Fatal(err)
	}
	return a
}
