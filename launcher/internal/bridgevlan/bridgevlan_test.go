package bridgevlan

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// testNetNS is a network namespace of the test's own (`ip netns add`),
// deleted at the end: bridges are never made in the host's.
func testNetNS(t *testing.T) (netns.NsHandle, *netlink.Handle) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: network namespaces")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skipf("ip not found (Debian package iproute2): %v", err)
	}
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	name := "vp-brvlan-" + hex.EncodeToString(b)
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", name, err, out)
		}
	})
	ns, err := netns.GetFromName(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return ns, h
}

// addBridge adds a bridge and a veth port on it (a stand-in for a VM's
// tap: both are plain bridge ports to the kernel; veth because kernels
// without the dummy driver have it). A kernel built
// without CONFIG_BRIDGE_VLAN_FILTERING refuses a filtering bridge: the
// test is skipped there.
func addBridge(t *testing.T, h *netlink.Handle, bridge, port string, filtering bool) {
	t.Helper()
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: bridge}}
	if filtering {
		// Left out otherwise: such a kernel refuses the attribute even
		// when it is 0.
		br.VlanFiltering = &filtering
	}
	if err := h.LinkAdd(br); errors.Is(err, unix.EOPNOTSUPP) && filtering {
		t.Skipf("this kernel has no bridge VLAN filtering (CONFIG_BRIDGE_VLAN_FILTERING): adding bridge %s: %v", bridge, err)
	} else if err != nil {
		t.Fatalf("adding bridge %s: %v", bridge, err)
	}
	d := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: port}, PeerName: port + "p"}
	if err := h.LinkAdd(d); err != nil {
		t.Fatalf("adding %s: %v", port, err)
	}
	if err := h.LinkSetMaster(d, br); err != nil {
		t.Fatalf("%s on %s: %v", port, bridge, err)
	}
}

// TestSetAccessRefuses what needs no filtering bridge to see: a bridge
// that does not filter VLANs (the clear error, naming the command that
// enables it), no bridge, no VLAN number.
func TestSetAccessRefuses(t *testing.T) {
	ns, h := testNetNS(t)
	addBridge(t, h, "br1", "vptap1", false)
	if err := h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "lone0"}, PeerName: "lone1"}); err != nil {
		t.Fatal(err)
	}
	p, err := OpenNetNS(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	before, err := p.Vlans("vptap1")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		bridge, port string
		vid          int
		want         string
	}{
		{"br1", "vptap1", 10, "bridge br1 does not filter VLANs (vlan_filtering is 0), which VLAN 10 on it needs: enable it with `ip link set br1 type bridge vlan_filtering 1`"},
		{"nobr", "vptap1", 10, "bridge nobr:"},
		{"lone0", "vptap1", 10, "lone0 is a veth, not a bridge"},
		{"br1", "vptap1", 4095, "must be between 1 and 4094"},
		{"br1", "vptap1", 0, "must be between 1 and 4094"},
	} {
		err := p.SetAccess(tc.bridge, tc.port, tc.vid)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("SetAccess(%s, %s, %d) = %v, want %q", tc.bridge, tc.port, tc.vid, err, tc.want)
		}
	}
	// The refused bridge's port was left alone.
	if after, err := p.Vlans("vptap1"); err != nil || !slices.Equal(after, before) {
		t.Errorf("vptap1's VLANs went from %v to %v, %v", before, after, err)
	}
}

func TestSetAccess(t *testing.T) {
	ns, h := testNetNS(t)
	addBridge(t, h, "br0", "vptap0", true)
	addBridge(t, h, "br2", "vptap2", true)
	p, err := OpenNetNS(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	// A new port is on the bridge's default VLAN, 1.
	if got, err := p.Vlans("vptap0"); err != nil || !slices.Equal(got, []Vlan{{ID: 1, PVID: true, Untagged: true}}) {
		t.Fatalf("a new port's VLANs = %v, %v; want the default 1", got, err)
	}
	want := []Vlan{{ID: 10, PVID: true, Untagged: true}}
	for i := range 2 { // the second call finds it done
		if err := p.SetAccess("br0", "vptap0", 10); err != nil {
			t.Fatalf("SetAccess #%d: %v", i+1, err)
		}
		if got, err := p.Vlans("vptap0"); err != nil || !slices.Equal(got, want) {
			t.Fatalf("after SetAccess #%d: %v, %v; want %v", i+1, got, err, want)
		}
	}
	// Another VLAN replaces it (a tap that was set up wrong, say).
	if err := p.SetAccess("br0", "vptap0", 20); err != nil {
		t.Fatal(err)
	}
	if got, _ := p.Vlans("vptap0"); !slices.Equal(got, []Vlan{{ID: 20, PVID: true, Untagged: true}}) {
		t.Fatalf("after moving to 20: %v", got)
	}
	for _, tc := range []struct{ bridge, port, want string }{
		{"br0", "vptap2", "vptap2 is not a port of bridge br0"},
		{"br0", "nope", "port nope of bridge br0"},
	} {
		if err := p.SetAccess(tc.bridge, tc.port, 10); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("SetAccess(%s, %s) = %v, want %q", tc.bridge, tc.port, err, tc.want)
		}
	}
}

func TestOpenForPid(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: another process's network namespace")
	}
	p, err := OpenForPid(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
	if _, err := OpenForPid(1 << 30); err == nil {
		t.Error("OpenForPid of no process succeeded")
	}
}
