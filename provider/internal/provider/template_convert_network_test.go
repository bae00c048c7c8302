package provider

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
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
