package provider

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// validateVM runs the provider's ValidateResourceConfig, as terraform
// validate and plan do, on a configuration with interfaces ifaces and
// wait_for_ip w, and returns its errors as "summary: detail" lines.
func validateVM(t *testing.T, ifaces []interfaceModel, w *waitForIPModel) []string {
	t.Helper()
	ctx := context.Background()
	srv, err := providerserver.NewProtocol6WithError(New("test")())()
	if err != nil {
		t.Fatal(err)
	}
	var sresp resource.SchemaResponse
	NewVMResource().Schema(ctx, resource.SchemaRequest{}, &sresp)
	typ := sresp.Schema.Type().TerraformType(ctx)
	cfg := &vmResourceModel{
		vmModel: vmModel{
			ID: types.StringNull(), Name: types.StringValue("web"), Namespace: types.StringNull(), UID: types.StringNull(),
			vmSpecModel: vmSpecModel{
				Labels: types.MapNull(types.StringType), Annotations: types.MapNull(types.StringType),
				RunStrategy: types.StringNull(), NodeFailurePolicy: types.StringNull(),
				instanceSpecModel: instanceSpecModel{
					Memory: quantityOf("160Mi"), Disks: []diskModel{}, Interfaces: ifaces, NodeSelector: types.MapNull(types.StringType),
					EvictionStrategy: types.StringNull(), TerminationGracePeriod: types.Int64Null(),
				},
			},
			RestartRequired: types.BoolNull(), Status: types.ObjectNull(statusAttrTypes),
		},
		UpdatePolicy: types.StringNull(),
		WaitForIP:    w,
		Timeouts: timeouts.Value{Object: types.ObjectNull(map[string]attr.Type{
			"create": types.StringType, "update": types.StringType, "delete": types.StringType,
		})},
	}
	st := tfsdk.State{Schema: sresp.Schema, Raw: tftypes.NewValue(typ, nil)}
	if d := st.Set(ctx, cfg); d.HasError() {
		t.Fatal(d)
	}
	dv, err := tfprotov6.NewDynamicValue(typ, st.Raw)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := srv.ValidateResourceConfig(ctx, &tfprotov6.ValidateResourceConfigRequest{TypeName: "virtplane_virtual_machine", Config: &dv})
	if err != nil {
		t.Fatal(err)
	}
	var errs []string
	for _, d := range resp.Diagnostics {
		if d.Severity == tfprotov6.DiagnosticSeverityError {
			errs = append(errs, d.Summary+": "+d.Detail)
		}
	}
	return errs
}

// iface is an interface block as a configuration gives it: unset values
// null, no port forwards an empty list.
func iface(name string, edit func(*interfaceModel)) interfaceModel {
	i := interfaceModel{Name: types.StringValue(name), Model: types.StringNull(), MACAddress: types.StringNull(), PortForwards: []portForwardModel{}}
	if edit != nil {
		edit(&i)
	}
	return i
}

func forward(host, guest int64, proto, addr string) portForwardModel {
	f := portForwardModel{HostPort: types.Int64Value(host), GuestPort: types.Int64Value(guest), Protocol: types.StringNull(), HostAddress: types.StringNull()}
	if proto != "" {
		f.Protocol = types.StringValue(proto)
	}
	if addr != "" {
		f.HostAddress = types.StringValue(addr)
	}
	return f
}

// The kind rules are the framework's validators, run where terraform
// validate and plan run them, each error naming the attributes.
func TestInterfaceKindValidation(t *testing.T) {
	bridge := func(name string) *bridgeModel {
		return &bridgeModel{Name: types.StringValue(name), VLAN: types.Int64Null()}
	}
	for _, c := range []struct {
		name   string
		ifaces []interfaceModel
		w      *waitForIPModel
		want   []string // in the errors, in any order; none for a valid config
	}{
		{"every kind", []interfaceModel{
			iface("default", func(i *interfaceModel) {
				i.PortForwards = []portForwardModel{forward(2222, 22, "", ""), forward(2222, 22, "udp", ""), forward(2222, 22, "", "127.0.0.2")}
			}),
			iface("lan", func(i *interfaceModel) {
				i.Bridge = &bridgeModel{Name: types.StringValue("br0"), VLAN: types.Int64Value(4094)}
			}),
			iface("nat", func(i *interfaceModel) { i.Network = &libvirtNetworkModel{Name: types.StringValue("default")} }),
		}, &waitForIPModel{Timeout: types.StringValue("90s"), Interface: types.StringValue("nat")}, nil},
		{"port forward on a bridge", []interfaceModel{iface("lan", func(i *interfaceModel) {
			i.Bridge = bridge("br0")
			i.PortForwards = []portForwardModel{forward(2222, 22, "", "")}
		})}, nil, []string{`Attribute "interface[0].bridge" cannot be specified when "interface[0].port_forward[0]" is specified`}},
		{"port forward on a libvirt network", []interfaceModel{iface("nat", func(i *interfaceModel) {
			i.Network = &libvirtNetworkModel{Name: types.StringValue("default")}
			i.PortForwards = []portForwardModel{forward(2222, 22, "", "")}
		})}, nil, []string{`Attribute "interface[0].network" cannot be specified when "interface[0].port_forward[0]" is specified`}},
		{"bridge and network", []interfaceModel{iface("x", func(i *interfaceModel) {
			i.Bridge = bridge("br0")
			i.Network = &libvirtNetworkModel{Name: types.StringValue("default")}
		})}, nil, []string{`Attribute "interface[0].network" cannot be specified when "interface[0].bridge" is specified`}},
		{"bridge without a name", []interfaceModel{iface("x", func(i *interfaceModel) {
			i.Bridge = &bridgeModel{Name: types.StringNull(), VLAN: types.Int64Value(5)}
		})}, nil, []string{`Attribute "interface[0].bridge.name" must be specified when "interface[0].bridge" is specified`}},
		{"bad bridge name, VLAN and network name", []interfaceModel{
			iface("x", func(i *interfaceModel) {
				i.Bridge = &bridgeModel{Name: types.StringValue("br/0"), VLAN: types.Int64Value(4095)}
			}),
			iface("y", func(i *interfaceModel) { i.Network = &libvirtNetworkModel{Name: types.StringValue("..")} }),
		}, nil, []string{"interface[0].bridge.name must be a Linux interface name", "interface[0].bridge.vlan value must be between 1 and 4094",
			`interface[1].network.name value must be none of: ["." ".."]`}},
		{"bad ports, protocol and address", []interfaceModel{iface("default", func(i *interfaceModel) {
			i.PortForwards = []portForwardModel{forward(0, 65536, "sctp", "localhost")}
		})}, nil, []string{"interface[0].port_forward[0].host_port value must be between 1 and 65535",
			"interface[0].port_forward[0].guest_port value must be between 1 and 65535",
			`interface[0].port_forward[0].protocol must be one of "tcp", "udp"`,
			`interface[0].port_forward[0].host_address "localhost" must be an IP address`}},
		{"the same forward twice, defaults spelled out once", []interfaceModel{
			iface("a", func(i *interfaceModel) { i.PortForwards = []portForwardModel{forward(8080, 80, "", "")} }),
			iface("b", func(i *interfaceModel) { i.PortForwards = []portForwardModel{forward(8080, 8080, "tcp", "127.0.0.1")} }),
		}, nil, []string{"Duplicate port forward: interface[1].port_forward[0] forwards 127.0.0.1:8080/tcp, which interface[0].port_forward[0]'s 127.0.0.1:8080/tcp overlaps"}},
		{"a forward on 0.0.0.0 and one on 127.0.0.1 of the same port", []interfaceModel{
			iface("a", func(i *interfaceModel) {
				i.PortForwards = []portForwardModel{forward(8080, 80, "", "0.0.0.0"), forward(8080, 80, "udp", "")}
			}),
			iface("b", func(i *interfaceModel) { i.PortForwards = []portForwardModel{forward(8080, 8080, "", "")} }),
		}, nil, []string{"Duplicate port forward: interface[1].port_forward[0] forwards 127.0.0.1:8080/tcp, which interface[0].port_forward[0]'s 0.0.0.0:8080/tcp overlaps"}},
		{"wait_for_ip on an unknown interface", []interfaceModel{iface("default", nil)},
			&waitForIPModel{Timeout: types.StringNull(), Interface: types.StringValue("lan")},
			[]string{`Unknown interface: wait_for_ip.interface is "lan", but the VM's interfaces are "default".`}},
		{"wait_for_ip without interfaces", []interfaceModel{}, &waitForIPModel{Timeout: types.StringNull(), Interface: types.StringNull()},
			[]string{"wait_for_ip without an interface"}},
		{"wait_for_ip with a bad timeout", []interfaceModel{iface("default", nil)},
			&waitForIPModel{Timeout: types.StringValue("5"), Interface: types.StringNull()},
			[]string{`wait_for_ip.timeout "5" is not a duration`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			errs := validateVM(t, c.ifaces, c.w)
			all := strings.Join(errs, "\n")
			if len(c.want) == 0 && len(errs) > 0 {
				t.Errorf("a valid configuration was refused:\n%s", all)
			}
			for _, w := range c.want {
				if !strings.Contains(all, w) {
					t.Errorf("errors do not say %q:\n%s", w, all)
				}
			}
		})
	}
}

func TestNetworkValidators(t *testing.T) {
	for _, c := range []struct {
		s    string
		ok   bool
		says string
	}{
		{"127.0.0.1", true, ""}, {"0.0.0.0", true, ""}, {"::1", false, "IPv4 only"}, {"fd00::5", false, "IPv4 only"},
		{"localhost", false, "must be an IP address"}, {"fe80::1%eth0", false, "must be an IP address"},
		{"::ffff:127.0.0.1", false, "not an IPv4-mapped one (write 127.0.0.1)"}, {"", false, "must be an IP address"},
	} {
		if ok, msg := validString(ipAddressValidator(), c.s); ok != c.ok || !strings.Contains(msg, c.says) {
			t.Errorf("ipAddressValidator(%q) = %v %q, want %v %q", c.s, ok, msg, c.ok, c.says)
		}
	}
	for _, c := range []struct {
		s    string
		ok   bool
		says string
	}{
		{"5m", true, ""}, {"90s", true, ""}, {"1h30m", true, ""},
		{"5", false, "is not a duration"}, {"0s", false, "must be positive"}, {"-1m", false, "must be positive"},
	} {
		if ok, msg := validString(durationValidator(), c.s); ok != c.ok || !strings.Contains(msg, c.says) {
			t.Errorf("durationValidator(%q) = %v %q, want %v %q", c.s, ok, msg, c.ok, c.says)
		}
	}
}
