package neighbours

import (
	"crypto/rand"
	"encoding/hex"
	"net"
	"os"
	"os/exec"
	"reflect"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

func mac(s string) net.HardwareAddr {
	hw, err := net.ParseMAC(s)
	if err != nil {
		panic(err)
	}
	return hw
}

func TestGroup(t *testing.T) {
	list := []netlink.Neigh{
		{IP: net.ParseIP("fec0::5"), HardwareAddr: mac("02:00:00:00:00:01"), State: netlink.NUD_REACHABLE},
		{IP: net.ParseIP("192.0.2.7"), HardwareAddr: mac("02:00:00:00:00:01"), State: netlink.NUD_STALE},
		{IP: net.ParseIP("192.0.2.8"), HardwareAddr: mac("02:00:00:00:00:01"), State: netlink.NUD_DELAY},
		{IP: net.ParseIP("192.0.2.9"), HardwareAddr: mac("02:00:00:00:00:02"), State: netlink.NUD_PERMANENT},
		// Never answered, or no MAC: not the guest's.
		{IP: net.ParseIP("192.0.2.10"), HardwareAddr: mac("02:00:00:00:00:03"), State: netlink.NUD_FAILED},
		{IP: net.ParseIP("192.0.2.11"), State: netlink.NUD_INCOMPLETE},
		{IP: net.ParseIP("192.0.2.12"), HardwareAddr: mac("02:00:00:00:00:04"), State: netlink.NUD_NOARP},
	}
	want := []Entry{
		{MAC: "02:00:00:00:00:01", Addrs: []string{"192.0.2.7", "192.0.2.8", "fec0::5"}},
		{MAC: "02:00:00:00:00:02", Addrs: []string{"192.0.2.9"}},
	}
	if got := group(list); !reflect.DeepEqual(got, want) {
		t.Errorf("group = %+v, want %+v", got, want)
	}
}

// TestInNetNS reads entries set in a namespace of the test's own.
func TestInNetNS(t *testing.T) {
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
	name := "vp-neigh-" + hex.EncodeToString(b)
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
	ns, err := netns.GetFromName(name)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()

	if got, err := InNetNS(ns); err != nil || len(got) != 0 {
		t.Fatalf("an empty table: %v, %v", got, err)
	}
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "vpn0"}, PeerName: "vpn1"}
	if err := h.LinkAdd(veth); err != nil {
		t.Fatal(err)
	}
	link, err := h.LinkByName("vpn0")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.LinkSetUp(link); err != nil {
		t.Fatal(err)
	}
	for _, ip := range []string{"fd00::7", "192.0.2.7"} {
		n := &netlink.Neigh{LinkIndex: link.Attrs().Index, IP: net.ParseIP(ip), HardwareAddr: mac("02:00:00:00:00:07"), State: netlink.NUD_PERMANENT}
		if err := h.NeighAdd(n); err != nil {
			t.Fatalf("adding %s: %v", ip, err)
		}
	}
	got, err := InNetNS(ns)
	want := []Entry{{MAC: "02:00:00:00:00:07", Addrs: []string{"192.0.2.7", "fd00::7"}}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("InNetNS = %+v, %v; want %+v", got, err, want)
	}
	if _, err := ForPid(os.Getpid()); err != nil {
		t.Errorf("ForPid(self): %v", err)
	}
}
