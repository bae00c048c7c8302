package vmi

import (
	"net"
	"slices"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// Reasons a node cannot take a VMI's networks, one per missing bridge,
// libvirt network or MAC in use, kube-scheduler style: "0/2 nodes are
// available: 2 node(s) didn't have bridge br0."
const (
	reasonBridgePrefix  = "node(s) didn't have bridge "
	reasonNetworkPrefix = "node(s) didn't have libvirt network "
	reasonMACPrefix     = "node(s) had an instance with MAC "
)

// networkNeeds are the bridges and libvirt networks spec attaches to,
// sorted, each once.
func networkNeeds(spec *apiv1.VirtualMachineInstanceSpec) (bridges, networks []string) {
	for _, n := range spec.GetNetworks() {
		if b := n.GetBridge(); b != nil {
			bridges = append(bridges, b.GetBridge())
		}
		if ln := n.GetNetwork(); ln != nil {
			networks = append(networks, ln.GetName())
		}
	}
	slices.Sort(bridges)
	slices.Sort(networks)
	return slices.Compact(bridges), slices.Compact(networks)
}

// nodeMACs are the MACs of spec's interfaces that share a node's layer 2
// with other guests: those on a bridge or a libvirt network, normalised
// (lower case), each once. A user-mode interface has no device on the
// host and its own private network, so its MAC may be anyone's; two
// guests with one MAC on a node's bridge or macvtap parent would take
// each other's frames (macvtap refuses the second outright).
func nodeMACs(spec *apiv1.VirtualMachineInstanceSpec) []string {
	ifaces := spec.GetDomain().GetDevices().GetInterfaces()
	if len(ifaces) == 0 {
		return nil
	}
	var out []string
	for _, i := range ifaces {
		if !sharesLayer2(spec.GetNetworks(), i.GetName()) {
			continue
		}
		hw, err := net.ParseMAC(i.GetMacAddress())
		if err != nil {
			continue // none yet, or one validation refused
		}
		out = append(out, hw.String())
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func sharesLayer2(networks []*apiv1.Network, name string) bool {
	for _, n := range networks {
		if n.GetName() == name {
			return n.GetBridge() != nil || n.GetNetwork() != nil
		}
	}
	return false
}

// networkReasons returns why node cannot take what nd attaches to: each
// bridge and libvirt network it does not list, each of the VMI's MACs
// another instance holds there (c.macsInUse), and each of its host ports
// in use there (c.portsInUse).
func networkReasons(c candidate, nd needs) []string {
	st := c.node.GetStatus()
	var out []string
	for _, b := range nd.bridges {
		if !slices.Contains(st.GetBridges(), b) {
			out = append(out, reasonBridgePrefix+b)
		}
	}
	for _, n := range nd.networks {
		if !slices.Contains(st.GetNetworks(), n) {
			out = append(out, reasonNetworkPrefix+n)
		}
	}
	for _, mac := range c.macsInUse {
		out = append(out, reasonMACPrefix+mac)
	}
	return append(out, portReasons(c.portsInUse)...)
}
