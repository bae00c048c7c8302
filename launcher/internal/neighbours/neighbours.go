// Package neighbours reads a host's neighbour table (ARP and IPv6 NDP)
// over rtnetlink, by MAC address: how the launcher learns the addresses
// of a guest on a bridge, from the frames the host exchanged with it.
//
// libvirt has this as its ARP address source, but Debian 12's libvirt
// 9.0 fails it ("internal error: wrong nlmsg len") whenever netlink's
// end-of-dump message is in the read it parses: it takes that short
// message for a broken neighbour entry. That happens for an empty table
// and on kernels that send the end of a dump with its entries (`virsh
// domifaddr --source arp` fails so on this project's test host, Linux
// 6.18). It also reads IPv4 only, in libvirtd's namespace; this reads
// both families, in the namespace of QEMU's process, where the guest's
// bridge is.
package neighbours

import (
	"errors"
	"fmt"
	"net"
	"sort"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Entry is the addresses the table holds for one MAC address.
type Entry struct {
	MAC string // lower case, as net.HardwareAddr prints it
	// Addrs are IP literals: IPv4 ones first, each family in the
	// kernel's order.
	Addrs []string
}

// usable are the states of an entry whose address answered for its MAC
// recently enough to be reported (libvirt reports REACHABLE and STALE;
// DELAY and PROBE are STALE ones being checked again, PERMANENT ones were
// configured). INCOMPLETE and FAILED ones never answered.
const usable = netlink.NUD_REACHABLE | netlink.NUD_STALE | netlink.NUD_DELAY | netlink.NUD_PROBE | netlink.NUD_PERMANENT

// ForPid reads the table of the network namespace of process pid.
func ForPid(pid int) ([]Entry, error) {
	ns, err := netns.GetFromPid(pid)
	if err != nil {
		return nil, fmt.Errorf("network namespace of process %d: %w", pid, err)
	}
	defer ns.Close()
	return InNetNS(ns)
}

// InNetNS reads the table of the namespace ns.
func InNetNS(ns netns.NsHandle) ([]Entry, error) {
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("netlink in network namespace %s: %w", ns, err)
	}
	defer h.Close()
	list, err := h.NeighList(0, netlink.FAMILY_ALL)
	if errors.Is(err, netlink.ErrDumpInterrupted) {
		// The dump raced a change: once more.
		list, err = h.NeighList(0, netlink.FAMILY_ALL)
	}
	if err != nil {
		return nil, fmt.Errorf("listing neighbours: %w", err)
	}
	return group(list), nil
}

// group turns the kernel's entries into one Entry per MAC address,
// sorted by it.
func group(list []netlink.Neigh) []Entry {
	byMAC := map[string]*Entry{}
	var v6 = map[string][]string{}
	for _, n := range list {
		if n.State&usable == 0 || len(n.HardwareAddr) != 6 || n.IP == nil {
			continue
		}
		mac := net.HardwareAddr(n.HardwareAddr).String()
		e := byMAC[mac]
		if e == nil {
			e = &Entry{MAC: mac}
			byMAC[mac] = e
		}
		if n.IP.To4() != nil {
			e.Addrs = append(e.Addrs, n.IP.String())
		} else {
			v6[mac] = append(v6[mac], n.IP.String())
		}
	}
	out := make([]Entry, 0, len(byMAC))
	for mac, e := range byMAC {
		e.Addrs = append(e.Addrs, v6[mac]...)
		out = append(out, *e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].MAC < out[j].MAC })
	return out
}
