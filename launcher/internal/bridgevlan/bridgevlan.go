// Package bridgevlan puts a Linux bridge port (a VM's tap) on one VLAN,
// untagged, over rtnetlink: what `bridge vlan add dev TAP vid N pvid
// untagged` and `bridge vlan del dev TAP vid 1` do.
//
// libvirt 9.0 applies <vlan> only to Open vSwitch ports, so the launcher
// does this itself once libvirt has put the tap on the bridge. The
// bridge must filter VLANs (vlan_filtering 1); a bridge that does not
// would forward the port's frames on every VLAN, so that is refused with
// the command that enables it. The work is done in the network namespace
// of a process (QEMU's, which holds the tap), which need not be the
// launcher's: a node's libvirtd may run in a namespace of its own.
package bridgevlan

import (
	"errors"
	"fmt"
	"slices"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Ports changes bridge ports in one network namespace.
type Ports struct {
	h *netlink.Handle
}

// OpenNetNS works in the namespace ns (the caller may close ns after).
func OpenNetNS(ns netns.NsHandle) (*Ports, error) {
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("netlink in network namespace %s: %w", ns, err)
	}
	return &Ports{h: h}, nil
}

// OpenForPid works in the network namespace of process pid.
func OpenForPid(pid int) (*Ports, error) {
	ns, err := netns.GetFromPid(pid)
	if err != nil {
		return nil, fmt.Errorf("network namespace of process %d: %w", pid, err)
	}
	defer ns.Close()
	return OpenNetNS(ns)
}

// Close releases the netlink socket.
func (p *Ports) Close() { p.h.Close() }

// Vlan is one VLAN of a port as the kernel lists it.
type Vlan struct {
	ID       uint16
	PVID     bool // untagged frames arriving on the port join it
	Untagged bool // its frames leave the port untagged
}

// SetAccess makes port, a port of bridge, an access port of VLAN vid
// (1-4094): vid is its PVID and egresses untagged, and every other VLAN
// (the bridge's default, 1) is removed from it. Calling it again changes
// nothing.
func (p *Ports) SetAccess(bridge, port string, vid int) error {
	if vid < 1 || vid > 4094 {
		return fmt.Errorf("VLAN %d of %s: must be between 1 and 4094", vid, port)
	}
	br, err := p.h.LinkByName(bridge)
	if err != nil {
		return fmt.Errorf("bridge %s: %w", bridge, err)
	}
	b, ok := br.(*netlink.Bridge)
	if !ok {
		return fmt.Errorf("%s is a %s, not a bridge", bridge, br.Type())
	}
	if b.VlanFiltering == nil || !*b.VlanFiltering {
		return fmt.Errorf("bridge %s does not filter VLANs (vlan_filtering is 0), which VLAN %d on it needs: "+
			"enable it with `ip link set %s type bridge vlan_filtering 1`", bridge, vid, bridge)
	}
	link, err := p.h.LinkByName(port)
	if err != nil {
		return fmt.Errorf("port %s of bridge %s: %w", port, bridge, err)
	}
	if link.Attrs().MasterIndex != b.Attrs().Index {
		return fmt.Errorf("%s is not a port of bridge %s", port, bridge)
	}
	have, err := p.vlans(link)
	if err != nil {
		return err
	}
	want := Vlan{ID: uint16(vid), PVID: true, Untagged: true}
	if !slices.Contains(have, want) {
		// Added first, so the PVID moves here from the default VLAN.
		if err := p.h.BridgeVlanAdd(link, want.ID, true, true, false, true); err != nil {
			return fmt.Errorf("adding VLAN %d to %s on bridge %s: %w", vid, port, bridge, err)
		}
	}
	for _, v := range have {
		if v.ID == want.ID {
			continue
		}
		if err := p.h.BridgeVlanDel(link, v.ID, v.PVID, v.Untagged, false, true); err != nil {
			return fmt.Errorf("removing VLAN %d from %s on bridge %s: %w", v.ID, port, bridge, err)
		}
	}
	return nil
}

// Vlans lists the VLANs of port.
func (p *Ports) Vlans(port string) ([]Vlan, error) {
	link, err := p.h.LinkByName(port)
	if err != nil {
		return nil, fmt.Errorf("port %s: %w", port, err)
	}
	return p.vlans(link)
}

func (p *Ports) vlans(link netlink.Link) ([]Vlan, error) {
	all, err := p.h.BridgeVlanList()
	if errors.Is(err, netlink.ErrDumpInterrupted) {
		// The dump raced a change elsewhere: once more.
		all, err = p.h.BridgeVlanList()
	}
	if err != nil {
		return nil, fmt.Errorf("listing bridge VLANs: %w", err)
	}
	var out []Vlan
	for _, v := range all[int32(link.Attrs().Index)] {
		if v.Flags&(nl.BRIDGE_VLAN_INFO_RANGE_BEGIN|nl.BRIDGE_VLAN_INFO_RANGE_END) != 0 {
			// Not asked for (no compressed dump), never expected.
			return nil, fmt.Errorf("%s: the kernel listed a VLAN range", link.Attrs().Name)
		}
		out = append(out, Vlan{ID: v.Vid, PVID: v.PortVID(), Untagged: v.EngressUntag()})
	}
	return out, nil
}
