package validation

import (
	"fmt"
	"net/netip"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// validateNetworks checks each network: a unique name and exactly one
// kind, each kind's own fields, and port forwards that do not collide
// within the instance (two forwards whose host ports overlap could not
// both bind: HostPort.Overlaps).
func validateNetworks(networks []*apiv1.Network, path *field.Path) namedResult {
	r := namedResult{names: nameIndex{}}
	forwards := forwardsSeen{}
	r.errs = eachNamed(networks, path, r.names, true, func(n *apiv1.Network, p *field.Path, _ bool) field.ErrorList {
		var kinds []string
		if n.GetUser() != nil {
			kinds = append(kinds, "user")
		}
		if n.GetBridge() != nil {
			kinds = append(kinds, "bridge")
		}
		if n.GetNetwork() != nil {
			kinds = append(kinds, "network")
		}
		switch len(kinds) {
		case 0:
			return field.ErrorList{field.Required(p, "a network needs exactly one kind: user, bridge or network")}
		case 1:
		default:
			return field.ErrorList{field.Forbidden(p.Child(kinds[1]), "may not be set together with "+kinds[0]+"; a network has one kind")}
		}
		var errs field.ErrorList
		if u := n.GetUser(); u != nil {
			for i, f := range u.GetPortForwards() {
				errs = append(errs, validatePortForward(f, p.Child("user", "port_forwards").Index(i), forwards)...)
			}
		}
		if b := n.GetBridge(); b != nil {
			errs = append(errs, validateIfName(b.GetBridge(), p.Child("bridge", "bridge"))...)
			if v := b.GetVlan(); v < 0 || v > 4094 {
				errs = append(errs, field.Invalid(p.Child("bridge", "vlan"), v, "must be between 1 and 4094, or 0 for untagged"))
			}
		}
		if ln := n.GetNetwork(); ln != nil {
			errs = append(errs, validateLibvirtNetworkName(ln.GetName(), p.Child("network", "name"))...)
		}
		return errs
	})
	return r
}

// Port forward protocols.
var portForwardProtocols = []string{"tcp", "udp"}

// forwardsSeen are the forwards of an instance checked so far, by slot
// (HostPort.Slot): a new one is compared with the few of its port, not
// with all.
type forwardsSeen map[PortSlot][]seenForward

type seenForward struct {
	hp   HostPort
	path *field.Path
}

// validatePortForward checks one forward; seen holds the forwards checked
// so far, to refuse one that overlaps an earlier one.
func validatePortForward(f *apiv1.PortForward, p *field.Path, seen forwardsSeen) field.ErrorList {
	if f == nil {
		return field.ErrorList{field.Required(p, "")}
	}
	var errs field.ErrorList
	for _, port := range []struct {
		name string
		v    int32
	}{{"host_port", f.GetHostPort()}, {"guest_port", f.GetGuestPort()}} {
		if port.v < 1 || port.v > 65535 {
			errs = append(errs, field.Invalid(p.Child(port.name), port.v, "must be a port between 1 and 65535"))
		}
	}
	proto := f.GetProtocol()
	if proto != "" {
		errs = append(errs, oneOf(proto, p.Child("protocol"), portForwardProtocols)...)
	} else {
		proto = apiv1.DefaultPortForwardProtocol
	}
	addr := f.GetHostAddress()
	if addr == "" {
		addr = apiv1.DefaultPortForwardAddress
	}
	ip, err := netip.ParseAddr(addr)
	switch {
	case err != nil || ip.Zone() != "":
		errs = append(errs, field.Invalid(p.Child("host_address"), f.GetHostAddress(), "must be an IP address such as 127.0.0.1"))
	case !ip.Is4():
		// QEMU 7.2's user-mode networking forwards from IPv4 host
		// addresses only (hostfwd_add refuses the rest).
		errs = append(errs, field.Invalid(p.Child("host_address"), f.GetHostAddress(), "must be an IPv4 address such as 127.0.0.1 (user-mode networking forwards IPv4 only)"))
	}
	if len(errs) > 0 {
		return errs
	}
	hp := HostPort{Protocol: proto, Addr: ip, Port: uint16(f.GetHostPort())}
	slot := hp.Slot()
	for _, s := range seen[slot] {
		if s.hp.Overlaps(hp) {
			return field.ErrorList{field.Duplicate(p.Child("host_port"), fmt.Sprintf("%s (overlaps %s of %s)", hp, s.hp, s.path))}
		}
	}
	seen[slot] = append(seen[slot], seenForward{hp, p})
	return nil
}

// validateIfName checks a Linux interface name: 1 to 15 bytes, no '/',
// no whitespace or ':', not "." or "..".
func validateIfName(name string, p *field.Path) field.ErrorList {
	switch {
	case name == "":
		return field.ErrorList{field.Required(p, "the bridge's interface name on the node")}
	case len(name) > 15:
		return field.ErrorList{field.TooLong(p, name, 15)}
	case name == "." || name == ".." || strings.ContainsAny(name, "/: \t\n\x00"):
		return field.ErrorList{field.Invalid(p, name, "must be a Linux interface name: no '/', ':' or whitespace, not '.' or '..'")}
	}
	return nil
}

// validateLibvirtNetworkName checks a libvirt network name: libvirt
// refuses '/' and names become file names under its state directory.
func validateLibvirtNetworkName(name string, p *field.Path) field.ErrorList {
	switch {
	case name == "":
		return field.ErrorList{field.Required(p, "the libvirt network's name on the node")}
	case len(name) > 63:
		return field.ErrorList{field.TooLong(p, name, 63)}
	case name == "." || name == ".." || strings.ContainsAny(name, "/\n\x00"):
		return field.ErrorList{field.Invalid(p, name, "must be a libvirt network name: no '/', not '.' or '..'")}
	}
	return nil
}
