package provider

import (
	"cmp"
	"github.com/hashicorp/terraform-plugin-framework/types"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// Interfaces and networks between the model and the API. An interface
// block is the API's interface plus the network of the same name (an
// interface connects to the network it is named after), so the schema
// has no network list to keep consistent with the interfaces.

// interfacesFromModel returns the API interfaces and their networks, in
// the same order, one network per interface.
func interfacesFromModel(is []interfaceModel) ([]*apiv1.Interface, []*apiv1.Network) {
	ifaces := make([]*apiv1.Interface, 0, len(is))
	nets := make([]*apiv1.Network, 0, len(is))
	for _, i := range is {
		name := i.Name.ValueString()
		ifaces = append(ifaces, &apiv1.Interface{Name: name, Model: i.Model.ValueString(), MacAddress: i.MACAddress.ValueString()})
		nets = append(nets, networkFromModel(name, i))
	}
	return ifaces, nets
}

// networkFromModel is the interface's network: a bridge, a libvirt
// network, or else user-mode with the port forwards.
func networkFromModel(name string, i interfaceModel) *apiv1.Network {
	n := &apiv1.Network{Name: name}
	switch {
	case i.Bridge != nil:
		n.Bridge = &apiv1.BridgeNetwork{Bridge: i.Bridge.Name.ValueString(), Vlan: int32(i.Bridge.VLAN.ValueInt64())}
	case i.Network != nil:
		n.Network = &apiv1.LibvirtNetwork{Name: i.Network.Name.ValueString()}
	default:
		n.User = &apiv1.UserNetwork{}
		for _, f := range i.PortForwards {
			n.User.PortForwards = append(n.User.PortForwards, &apiv1.PortForward{
				HostPort: int32(f.HostPort.ValueInt64()), GuestPort: int32(f.GuestPort.ValueInt64()),
				Protocol: f.Protocol.ValueString(), HostAddress: f.HostAddress.ValueString(),
			})
		}
	}
	return n
}

// interfacesToModel reads interfaces back with their networks' kinds.
// prior (the state or plan refreshed, by position) keeps a MAC written
// as "" in that form. An interface without a network of its name (which
// the agent refuses) reads as user-mode, the kind a new one gets.
func interfacesToModel(ifaces []*apiv1.Interface, networks []*apiv1.Network, prior []interfaceModel) []interfaceModel {
	byName := make(map[string]*apiv1.Network, len(networks))
	for _, n := range networks {
		byName[n.GetName()] = n
	}
	out := make([]interfaceModel, 0, len(ifaces))
	for i, iface := range ifaces {
		var pm types.String
		if i < len(prior) {
			pm = prior[i].MACAddress
		}
		m := interfaceModel{
			Name:         types.StringValue(iface.GetName()),
			Model:        types.StringValue(cmp.Or(iface.GetModel(), apiv1.DefaultInterfaceModel)),
			MACAddress:   readString(iface.GetMacAddress(), pm),
			PortForwards: []portForwardModel{},
		}
		n := byName[iface.GetName()]
		switch {
		case n.GetBridge() != nil:
			m.Bridge = &bridgeModel{Name: types.StringValue(n.GetBridge().GetBridge()), VLAN: types.Int64Null()}
			// 0 is untagged, which the schema has as unset.
			if v := n.GetBridge().GetVlan(); v != 0 {
				m.Bridge.VLAN = types.Int64Value(int64(v))
			}
		case n.GetNetwork() != nil:
			m.Network = &libvirtNetworkModel{Name: types.StringValue(n.GetNetwork().GetName())}
		default:
			for _, f := range n.GetUser().GetPortForwards() {
				// The agent stores unset protocol and address as "";
				// the schema has their defaults.
				m.PortForwards = append(m.PortForwards, portForwardModel{
					HostPort:    types.Int64Value(int64(f.GetHostPort())),
					GuestPort:   types.Int64Value(int64(f.GetGuestPort())),
					Protocol:    types.StringValue(cmp.Or(f.GetProtocol(), apiv1.DefaultPortForwardProtocol)),
					HostAddress: types.StringValue(cmp.Or(f.GetHostAddress(), apiv1.DefaultPortForwardAddress)),
				})
			}
		}
		out = append(out, m)
	}
	return out
}
