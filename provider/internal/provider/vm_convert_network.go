package provider

import (
	"strconv"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
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
			Model:        types.StringValue(orDefault(iface.GetModel(), apiv1.DefaultInterfaceModel)),
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
					Protocol:    types.StringValue(orDefault(f.GetProtocol(), apiv1.DefaultPortForwardProtocol)),
					HostAddress: types.StringValue(orDefault(f.GetHostAddress(), apiv1.DefaultPortForwardAddress)),
				})
			}
		}
		out = append(out, m)
	}
	return out
}

// interfaceStatusList is status.interfaces: what the node reports of a
// running instance's interfaces; empty without one, so that a stopped
// VM never shows the addresses its last instance had.
func interfaceStatusList(vmi *apiv1.VirtualMachineInstance, diags *diag.Diagnostics) types.List {
	elemType := types.ObjectType{AttrTypes: interfaceStatusAttrTypes}
	elems := []attr.Value{}
	if vmi != nil && !apiv1.IsFinal(vmi.GetStatus().GetPhase()) {
		for _, s := range vmi.GetStatus().GetInterfaces() {
			elems = append(elems, interfaceStatusObject(s, diags))
		}
	}
	list, d := types.ListValue(elemType, elems)
	diags.Append(d...)
	return list
}

func interfaceStatusObject(s *apiv1.InterfaceStatus, diags *diag.Diagnostics) types.Object {
	ips := make([]attr.Value, 0, len(s.GetIpAddresses()))
	for _, ip := range s.GetIpAddresses() {
		ips = append(ips, types.StringValue(ip))
	}
	ipList, d := types.ListValue(types.StringType, ips)
	diags.Append(d...)
	obj, d := types.ObjectValue(interfaceStatusAttrTypes, map[string]attr.Value{
		"name":           types.StringValue(s.GetName()),
		"mac_address":    optString(s.GetMacAddress()),
		"ip_address":     optString(s.GetIpAddress()),
		"ip_addresses":   ipList,
		"source":         optString(s.GetSource()),
		"info":           optString(s.GetInfo()),
		"interface_name": optString(s.GetInterfaceName()),
	})
	diags.Append(d...)
	return obj
}

// networkAttributePath maps the field path of a network, rest after
// "networks[i]", to the attribute that set it. Networks are written in
// interface order, one per interface, so networks[i] is interface[i];
// args are the indexes of the field path ([i], then [j] of a port
// forward).
func networkAttributePath(rest string, args []string) path.Path {
	p := path.Root("interface")
	if len(args) == 0 {
		return p
	}
	i, err := strconv.Atoi(args[0])
	if err != nil {
		return p
	}
	p = p.AtListIndex(i)
	const forwards = ".user.port_forwards[*]"
	switch {
	case rest == ".name":
		return p.AtName("name")
	case rest == ".bridge", rest == ".network":
		return p.AtName(rest[1:])
	case rest == ".bridge.bridge":
		return p.AtName("bridge").AtName("name")
	case rest == ".bridge.vlan":
		return p.AtName("bridge").AtName("vlan")
	case rest == ".network.name":
		return p.AtName("network").AtName("name")
	case strings.HasPrefix(rest, forwards):
		j, err := strconv.Atoi(argAt(args, 1))
		if err != nil {
			return p.AtName("port_forward")
		}
		f := p.AtName("port_forward").AtListIndex(j)
		switch n := strings.TrimPrefix(rest, forwards); n {
		case ".host_port", ".guest_port", ".protocol", ".host_address":
			return f.AtName(n[1:])
		}
		return f
	case rest == ".user", rest == ".user.port_forwards":
		return p.AtName("port_forward")
	}
	return p
}

func argAt(args []string, i int) string {
	if i < len(args) {
		return args[i]
	}
	return ""
}
