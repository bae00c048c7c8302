package provider

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
)

// fmtInterface renders an interface block for comparisons; no port
// forwards and an empty list of them are the same (Terraform holds an
// absent list block as an empty list).
func fmtInterface(i interfaceModel) string {
	var b strings.Builder
	fmt.Fprintf(&b, "{name=%s model=%s mac=%s", i.Name, i.Model, i.MACAddress)
	if i.Bridge != nil {
		fmt.Fprintf(&b, " bridge{name=%s vlan=%s}", i.Bridge.Name, i.Bridge.VLAN)
	}
	if i.Network != nil {
		fmt.Fprintf(&b, " network{name=%s}", i.Network.Name)
	}
	for _, f := range i.PortForwards {
		fmt.Fprintf(&b, " port_forward{%s:%s->%s/%s}", f.HostAddress, f.HostPort, f.GuestPort, f.Protocol)
	}
	return b.String() + "}"
}

// Each interface block becomes an interface and the network of its name,
// of the block's kind; port forwards go to the user network only.
func TestInterfacesFromModel(t *testing.T) {
	m := fullModel(t)
	vm, d := vmFromModel(context.Background(), &m)
	if d.HasError() {
		t.Fatal(d)
	}
	spec := vm.GetSpec().GetTemplate().GetSpec()
	want := &apiv1.VirtualMachineInstanceSpec{Networks: []*apiv1.Network{
		{Name: "default", User: &apiv1.UserNetwork{PortForwards: []*apiv1.PortForward{
			{HostPort: 2222, GuestPort: 22, Protocol: "tcp", HostAddress: "0.0.0.0"},
			{HostPort: 5353, GuestPort: 53, Protocol: "udp", HostAddress: "127.0.0.1"},
		}}},
		{Name: "lan", Bridge: &apiv1.BridgeNetwork{Bridge: "br0", Vlan: 42}},
		{Name: "nat", Network: &apiv1.LibvirtNetwork{Name: "default"}},
	}}
	if got := (&apiv1.VirtualMachineInstanceSpec{Networks: spec.GetNetworks()}); !proto.Equal(got, want) {
		t.Errorf("networks:\n%s\nwant:\n%s", prototext.Format(got), prototext.Format(want))
	}
	var names []string
	for _, i := range spec.GetDomain().GetDevices().GetInterfaces() {
		names = append(names, i.GetName()+"/"+i.GetMacAddress())
	}
	if got := strings.Join(names, " "); got != "default/02:00:00:00:00:01 lan/02:00:00:00:00:02 nat/02:00:00:00:00:03" {
		t.Errorf("interfaces = %s", got)
	}
}

// What the agent stores unset reads back as the schema's defaults: a
// forward's protocol and address, and an untagged bridge has no vlan. A
// VM written by another tool (import) is read the same way.
func TestInterfacesToModelDefaults(t *testing.T) {
	ifaces := []*apiv1.Interface{{Name: "a", MacAddress: "02:00:00:00:00:0a"}, {Name: "b"}, {Name: "c", Model: "e1000"}, {Name: "orphan"}}
	nets := []*apiv1.Network{
		{Name: "a", User: &apiv1.UserNetwork{PortForwards: []*apiv1.PortForward{{HostPort: 8080, GuestPort: 80}}}},
		{Name: "b", Bridge: &apiv1.BridgeNetwork{Bridge: "br0"}},
		{Name: "c", Network: &apiv1.LibvirtNetwork{Name: "default"}},
	}
	got := interfacesToModel(ifaces, nets, nil)
	want := []string{
		`{name="a" model="virtio" mac="02:00:00:00:00:0a" port_forward{"127.0.0.1":8080->80/"tcp"}}`,
		`{name="b" model="virtio" mac=<null> bridge{name="br0" vlan=<null>}}`,
		`{name="c" model="e1000" mac=<null> network{name="default"}}`,
		`{name="orphan" model="virtio" mac=<null>}`,
	}
	for i, w := range want {
		if g := fmtInterface(got[i]); g != w {
			t.Errorf("interface[%d] = %s, want %s", i, g, w)
		}
		// Never null: a list block the state holds as null would be
		// an "inconsistent result" for Terraform.
		if got[i].PortForwards == nil {
			t.Errorf("interface[%d].port_forward is nil, want an empty list", i)
		}
	}
}

// Every interface kind survives the agent's defaulting and validation,
// and its change is seen by restartChanges only when it is one.
func TestInterfaceKindsRoundTrip(t *testing.T) {
	ctx := context.Background()
	in := fullModel(t)
	vm, _ := vmFromModel(ctx, &in)
	out, d := vmToModel(ctx, stored(t, vm), nil, readOptions{prior: &in})
	if d.HasError() {
		t.Fatal(d)
	}
	for i := range in.Interfaces {
		if a, b := fmtInterface(in.Interfaces[i]), fmtInterface(out.Interfaces[i]); a != b {
			t.Errorf("interface[%d] read back as %s, want %s", i, b, a)
		}
	}
}

// status.interfaces shows what the node reports of a running instance,
// with unset values null and the address list never null; a stopped or
// finished VM shows none, not its last instance's addresses.
func TestInterfaceStatusList(t *testing.T) {
	vmi := vmiWith("i1", apiv1.PhaseRunning, true)
	vmi.Status.Interfaces = []*apiv1.InterfaceStatus{
		{Name: "default", MacAddress: "02:00:00:00:00:01", IpAddress: "10.0.2.15", IpAddresses: []string{"10.0.2.15", "fec0::5054:ff:fe12:3456"},
			Source: apiv1.InterfaceSourceAgent, InterfaceName: "eth0"},
		{Name: "lan", MacAddress: "02:00:00:00:00:02", Info: "no DHCP lease for 02:00:00:00:00:02"},
	}
	var diags diagsT
	list := interfaceStatusList(vmi, &diags.d)
	if diags.d.HasError() {
		t.Fatal(diags.d)
	}
	got := list.String()
	for _, want := range []string{
		`"ip_address":"10.0.2.15"`, `"ip_addresses":["10.0.2.15","fec0::5054:ff:fe12:3456"]`, `"source":"agent"`,
		`"interface_name":"eth0"`, `"info":<null>`,
		`"ip_address":<null>`, `"ip_addresses":[]`, `"info":"no DHCP lease for 02:00:00:00:00:02"`, `"source":<null>`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("status.interfaces = %s\nlacks %s", got, want)
		}
	}
	for name, vmi := range map[string]*apiv1.VirtualMachineInstance{"no instance": nil, "finished": vmiWith("i2", apiv1.PhaseSucceeded, false)} {
		if vmi != nil {
			vmi.Status.Interfaces = []*apiv1.InterfaceStatus{{Name: "default", IpAddress: "10.0.2.15"}}
		}
		l := interfaceStatusList(vmi, &diags.d)
		if l.IsNull() || len(l.Elements()) != 0 {
			t.Errorf("%s: status.interfaces = %s, want []", name, l)
		}
	}
}

func TestNetworkAttributePath(t *testing.T) {
	const nets = "spec.template.spec.networks"
	for field, want := range map[string]string{
		nets + "[2]":                                        "interface[2]",
		nets + "[2].name":                                   "interface[2].name",
		nets + "[0].bridge":                                 "interface[0].bridge",
		nets + "[0].bridge.bridge":                          "interface[0].bridge.name",
		nets + "[0].bridge.vlan":                            "interface[0].bridge.vlan",
		nets + "[1].network":                                "interface[1].network",
		nets + "[1].network.name":                           "interface[1].network.name",
		nets + "[0].user":                                   "interface[0].port_forward",
		nets + "[0].user.port_forwards[3]":                  "interface[0].port_forward[3]",
		nets + "[0].user.port_forwards[3].host_port":        "interface[0].port_forward[3].host_port",
		nets + "[0].user.port_forwards[1].guest_port":       "interface[0].port_forward[1].guest_port",
		nets + "[0].user.port_forwards[1].protocol":         "interface[0].port_forward[1].protocol",
		nets + "[0].user.port_forwards[1].host_address":     "interface[0].port_forward[1].host_address",
		nets + "[0].user.port_forwards[1].something.deeper": "interface[0].port_forward[1]",
		nets: "interface",
		"spec.template.spec.domain.devices.interfaces": "interface",
	} {
		p, ok := vmAttributePath(field)
		if !ok || p.String() != want {
			t.Errorf("vmAttributePath(%q) = %s, %v; want %s", field, p, ok, want)
		}
	}
}

// What only the agent checks of networks (two forwards on one port
// across interfaces; a bridge name too long for Linux) comes back on the
// attribute that set it.
func TestNetworkAgentErrorsLandOnAttributes(t *testing.T) {
	ctx := context.Background()
	m := fullModel(t)
	m.Interfaces[0].PortForwards[1].HostPort = types.Int64Value(2222)
	m.Interfaces[0].PortForwards[1].Protocol = types.StringValue("tcp")
	m.Interfaces[0].PortForwards[1].HostAddress = types.StringValue("0.0.0.0")
	m.Interfaces[1].Bridge = &bridgeModel{Name: types.StringValue("a-bridge-name-too-long"), VLAN: types.Int64Null()}
	vm, _ := vmFromModel(ctx, &m)
	validation.DefaultVirtualMachine(vm)
	err := validation.ToStatusError("VirtualMachine", "web", validation.ValidateVirtualMachine(vm, validation.Options{}))
	if err == nil {
		t.Fatal("the agent accepted an invalid VM")
	}
	var diags diagsT
	addObjectError(&diags.d, err, "unix:///x", "create virtual machine prod/web", vmKind)
	got := map[string]bool{}
	for _, e := range diags.d.Errors() {
		if wp, ok := e.(interface{ Path() path.Path }); ok {
			got[wp.Path().String()] = true
		}
	}
	for _, want := range []string{"interface[0].port_forward[1].host_port", "interface[1].bridge.name"} {
		if !got[want] {
			t.Errorf("no error on %s; got errors on %v (%v)", want, got, diags.d)
		}
	}
}
