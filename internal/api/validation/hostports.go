package validation

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// MaxPortForwards bounds an instance's port forwards, all its user-mode
// networks together. Each is a host port its node holds for it: without a
// bound one VM could take every port the policy allows on its node (a
// 1 MiB VM holds some 60,000 forwards), and placement would index them.
const MaxPortForwards = 64

// HostPort is what a port forward takes on its node: a protocol, a host
// address and a port, which no other forward there may overlap.
type HostPort struct {
	Protocol string // tcp or udp
	Addr     netip.Addr
	Port     uint16
}

// ForwardHostPort is the host side of f with the API's defaults applied
// (tcp, 127.0.0.1). ok is false when f names nothing a forward could bind:
// an address that does not parse or has a zone, a port outside 1-65535
// (validation refuses those; placement, reading objects that may have
// been written past it, skips them).
func ForwardHostPort(f *apiv1.PortForward) (hp HostPort, ok bool) {
	addr, err := netip.ParseAddr(cmp.Or(f.GetHostAddress(), apiv1.DefaultPortForwardAddress))
	port := f.GetHostPort()
	if err != nil || addr.Zone() != "" || port < 1 || port > 65535 {
		return HostPort{}, false
	}
	return HostPort{Protocol: cmp.Or(f.GetProtocol(), apiv1.DefaultPortForwardProtocol), Addr: addr.Unmap(), Port: uint16(port)}, true
}

// Overlaps reports whether h and o cannot both be bound on one host: the
// same protocol and port, and the same address or either the unspecified
// one (0.0.0.0 or ::), which binds every address of the host.
func (h HostPort) Overlaps(o HostPort) bool {
	return h.Protocol == o.Protocol && h.Port == o.Port &&
		(h.Addr == o.Addr || h.Addr.IsUnspecified() || o.Addr.IsUnspecified())
}

// Slot is what h shares with every host port it overlaps: its protocol
// and port. Forwards are filed by it (the API's check of an instance's
// own, placement's index of a node's), so that one is compared only with
// the few of its slot.
func (h HostPort) Slot() PortSlot { return PortSlot{h.Protocol, h.Port} }

// PortSlot is a protocol and port (HostPort.Slot).
type PortSlot struct {
	Protocol string
	Port     uint16
}

// String is h as messages name it: "127.0.0.1:18080/tcp".
func (h HostPort) String() string {
	return fmt.Sprintf("%s/%s", netip.AddrPortFrom(h.Addr, h.Port), h.Protocol)
}

// SpecHostPorts are the host ports spec's forwards take on its node, each
// once, in order (protocol, port, address); forwards ForwardHostPort
// cannot read are left out.
func SpecHostPorts(spec *apiv1.VirtualMachineInstanceSpec) []HostPort {
	var out []HostPort
	for _, n := range spec.GetNetworks() {
		for _, f := range n.GetUser().GetPortForwards() {
			if hp, ok := ForwardHostPort(f); ok {
				out = append(out, hp)
			}
		}
	}
	slices.SortFunc(out, CompareHostPorts)
	return slices.Compact(out)
}

// CompareHostPorts orders host ports by protocol, port and address.
func CompareHostPorts(a, b HostPort) int {
	return cmp.Or(cmp.Compare(a.Protocol, b.Protocol), cmp.Compare(a.Port, b.Port), a.Addr.Compare(b.Addr))
}
