package domxml

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"strings"

	"libvirt.org/go/libvirtxml"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// Interface kinds, as the live XML's <interface type=...> names them and
// as the API's Network kinds are called.
const (
	KindUser    = "user"
	KindBridge  = "bridge"
	KindNetwork = "network"
)

// GuestAgentChannel is the virtio-serial port name qemu-ga (and the test
// guest's stand-in) opens in the guest; libvirt talks to whatever answers
// there.
const GuestAgentChannel = "org.qemu.guest_agent.0"

// interfaceAliasPrefix starts the alias of an interface's device; the
// rest is the spec's interface name.
const interfaceAliasPrefix = "ua-net-"

// tapPrefix starts the host-side tap names virtplane picks. libvirt
// discards names starting with vnet, macvtap or macvlan from a definition
// (they are its own generated ones), so a name of those would not be kept.
const tapPrefix = "vp"

// nicModels maps the API's interface models to QEMU's; unset is the
// API's default.
var nicModels = map[string]string{
	"":                          apiv1.DefaultInterfaceModel,
	apiv1.InterfaceModelVirtio:  "virtio",
	apiv1.InterfaceModelE1000:   "e1000",
	apiv1.InterfaceModelRTL8139: "rtl8139",
}

// TapName is the host tap device of the bridge or network interface
// iface of the instance vmiUID: "vp" and 13 hex digits of a hash of both,
// 15 bytes, Linux's limit. It is fixed for the instance, so that the
// launcher finds the tap to put on a VLAN, on the migration target too
// (the instance's uid does not change when it moves), and unique per
// instance, so that an instance never takes over another's device.
func TapName(vmiUID, iface string) string {
	sum := sha256.Sum256([]byte(vmiUID + "/" + iface))
	return tapPrefix + hex.EncodeToString(sum[:])[:13]
}

// buildInterfaces adds one NIC per interface of spec, of its network's
// kind: user (QEMU's slirp; port forwards are added by the launcher once
// QEMU runs, as libvirt 9.0 cannot express them), bridge (a tap on an
// existing Linux bridge; the launcher sets a VLAN on the tap, as libvirt
// supports <vlan> only on Open vSwitch) or network (a libvirt network).
func buildInterfaces(vmiUID string, spec *apiv1.VirtualMachineInstanceSpec) ([]libvirtxml.DomainInterface, error) {
	networks := map[string]*apiv1.Network{}
	for _, n := range spec.GetNetworks() {
		networks[n.GetName()] = n
	}
	var out []libvirtxml.DomainInterface
	for _, iface := range spec.GetDomain().GetDevices().GetInterfaces() {
		name := iface.GetName()
		n, ok := networks[name]
		if !ok {
			return nil, fmt.Errorf("interface %q: no network of that name", name)
		}
		model, ok := nicModels[iface.GetModel()]
		if !ok {
			return nil, fmt.Errorf("interface %q: unknown model %q (virtio, e1000 or rtl8139)", name, iface.GetModel())
		}
		nic := libvirtxml.DomainInterface{
			Model: &libvirtxml.DomainInterfaceModel{Type: model},
			Alias: alias("net", name),
		}
		switch {
		case n.GetUser() != nil:
			nic.Source = &libvirtxml.DomainInterfaceSource{User: &libvirtxml.DomainInterfaceSourceUser{}}
		case n.GetBridge() != nil:
			br := n.GetBridge().GetBridge()
			if br == "" {
				return nil, fmt.Errorf("interface %q: network %q names no bridge", name, n.GetName())
			}
			nic.Source = &libvirtxml.DomainInterfaceSource{Bridge: &libvirtxml.DomainInterfaceSourceBridge{Bridge: br}}
			nic.Target = &libvirtxml.DomainInterfaceTarget{Dev: TapName(vmiUID, name)}
		case n.GetNetwork() != nil:
			ln := n.GetNetwork().GetName()
			if ln == "" {
				return nil, fmt.Errorf("interface %q: network %q names no libvirt network", name, n.GetName())
			}
			nic.Source = &libvirtxml.DomainInterfaceSource{Network: &libvirtxml.DomainInterfaceSourceNetwork{Network: ln}}
			nic.Target = &libvirtxml.DomainInterfaceTarget{Dev: TapName(vmiUID, name)}
		default:
			return nil, fmt.Errorf("interface %q: network %q has no kind (user, bridge or network)", name, n.GetName())
		}
		if mac := iface.GetMacAddress(); mac != "" {
			hw, err := net.ParseMAC(mac)
			if err != nil || len(hw) != 6 {
				return nil, fmt.Errorf("interface %q: invalid MAC address %q", name, mac)
			}
			nic.MAC = &libvirtxml.DomainInterfaceMAC{Address: hw.String()}
		}
		out = append(out, nic)
	}
	return out, nil
}

// guestAgentChannel is the QEMU guest agent's virtio-serial port, on every
// domain: a guest that runs qemu-ga tells the launcher its addresses
// through it. libvirt picks the socket's path (mode bind, no path) and
// connects to it itself once the guest opens the port.
func guestAgentChannel() libvirtxml.DomainChannel {
	return libvirtxml.DomainChannel{
		Source: &libvirtxml.DomainChardevSource{UNIX: &libvirtxml.DomainChardevSourceUNIX{Mode: "bind"}},
		Target: &libvirtxml.DomainChannelTarget{VirtIO: &libvirtxml.DomainChannelTargetVirtIO{Name: GuestAgentChannel}},
	}
}

// LiveInterface is one interface of a running domain as its live XML
// tells it.
type LiveInterface struct {
	// Name is the spec's interface name (from the device alias); empty
	// for an interface virtplane did not define.
	Name string
	// Kind is user, bridge or network (or another libvirt type).
	Kind string
	// MAC is lower case, as net.HardwareAddr prints it.
	MAC string
	// Alias is libvirt's device alias; QEMU's netdev is "host" + Alias.
	Alias string
	// Tap is the host device (bridge and network kinds).
	Tap string
	// Bridge is the bridge the tap is on: the bridge kind's, or the one
	// libvirt's network uses.
	Bridge string
	// Network is the libvirt network's name (network kind).
	Network string
}

// LiveNetwork is what the live XML says of a running domain's network.
type LiveNetwork struct {
	Interfaces []LiveInterface
	// AgentConnected: the guest opened the guest agent's port (libvirt
	// follows QEMU's VSERPORT_CHANGE events into the channel's state).
	AgentConnected bool
}

// Interface returns the interface of the spec's name, or nil.
func (n LiveNetwork) Interface(name string) *LiveInterface {
	for i := range n.Interfaces {
		if n.Interfaces[i].Name == name {
			return &n.Interfaces[i]
		}
	}
	return nil
}

// NetdevID is the id of QEMU's netdev behind an interface of the given
// alias: libvirt names it "host" and the alias (checked against QEMU 7.2
// with libvirt 9.0: `info network` lists hostua-net-default for the alias
// ua-net-default).
func NetdevID(alias string) string { return "host" + alias }

// ParseLiveNetwork reads the interfaces, in the definition's order, and
// the guest agent channel's state from a running domain's XML.
func ParseLiveNetwork(domainXML string) (LiveNetwork, error) {
	var d libvirtxml.Domain
	if err := d.Unmarshal(domainXML); err != nil {
		return LiveNetwork{}, fmt.Errorf("parsing domain XML: %w", err)
	}
	var out LiveNetwork
	if d.Devices == nil {
		return out, nil
	}
	for _, nic := range d.Devices.Interfaces {
		li := LiveInterface{}
		if nic.Alias != nil {
			li.Alias = nic.Alias.Name
			li.Name, _ = strings.CutPrefix(nic.Alias.Name, interfaceAliasPrefix)
			if li.Name == nic.Alias.Name {
				li.Name = ""
			}
		}
		if nic.MAC != nil {
			if hw, err := net.ParseMAC(nic.MAC.Address); err == nil {
				li.MAC = hw.String()
			}
		}
		if nic.Target != nil {
			li.Tap = nic.Target.Dev
		}
		if s := nic.Source; s != nil {
			switch {
			case s.User != nil:
				li.Kind = KindUser
			case s.Bridge != nil:
				li.Kind, li.Bridge = KindBridge, s.Bridge.Bridge
			case s.Network != nil:
				// A running domain's network interface shows the bridge
				// libvirt's network put it on.
				li.Kind, li.Network, li.Bridge = KindNetwork, s.Network.Network, s.Network.Bridge
			}
		}
		out.Interfaces = append(out.Interfaces, li)
	}
	for _, ch := range d.Devices.Channels {
		if t := ch.Target; t != nil && t.VirtIO != nil && t.VirtIO.Name == GuestAgentChannel {
			out.AgentConnected = t.VirtIO.State == "connected"
		}
	}
	return out, nil
}
