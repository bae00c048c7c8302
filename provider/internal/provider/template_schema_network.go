package provider

import (
	"fmt"
	"regexp"
	"strconv"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/objectvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// The networking part of the template schema: interface blocks with their
// network kind and port forwards.

// portForwardProtocols are the protocols a port forward takes, in the
// order the documentation lists them.
var portForwardProtocols = []string{"tcp", "udp"}

// The agent's rules for names on the node (internal/api/validation,
// network.go), as framework validators so that plan catches them: Linux
// interface names are at most 15 bytes without '/', ':' or whitespace;
// libvirt network names at most 63 without '/'.
var (
	ifNameChars     = regexp.MustCompile(`^[^/:\s\x00]+$`)
	libvirtNetChars = regexp.MustCompile(`^[^/\n\x00]+$`)
)

func interfaceBlock(o specSchema) schema.ListNestedBlock {
	// An element of port_forward lives at interface[i].port_forward[j]:
	// two steps up is its interface.
	iface := path.MatchRelative().AtParent().AtParent()
	return schema.ListNestedBlock{
		Description: "Network interfaces, in order. Each connects to a network of its own, of one kind: " +
			"user-mode NAT (the default, with optional `port_forward`s), a `bridge` on the node, or a libvirt " +
			"`network` on the node." + o.vm(" Changing interfaces, their kind or their port forwards needs a restart."),
		NestedObject: schema.NestedBlockObject{
			Attributes: map[string]schema.Attribute{
				"name": schema.StringAttribute{
					Required:    true,
					Description: "Name of the interface and its network, unique in the VM; a DNS-1123 label.",
					Validators:  []validator.String{dnsLabelValidator()},
				},
				"model": schema.StringAttribute{
					Optional:    true,
					Computed:    true,
					Default:     stringdefault.StaticString(apiv1.DefaultInterfaceModel),
					Description: "Device model: `virtio` (default), `e1000` or `rtl8139`.",
					Validators:  []validator.String{oneOf(apiv1.InterfaceModels()...)},
				},
				"mac_address": macAddressAttribute(o),
			},
			Blocks: map[string]schema.Block{
				"bridge": schema.SingleNestedBlock{
					Description: "Connect to an existing Linux bridge on the node (`br0`); the VM is placed only on " +
						"nodes that have it (data source `virtplane_nodes`, `bridges`). The guest is on the bridge's " +
						"network and gets its address there (DHCP or static, from the guest's own configuration). " +
						"The agent must allow the bridge (`serve --allowed-bridges`; none by default). " +
						"Not with `network` or `port_forward`.",
					Attributes: map[string]schema.Attribute{
						"name": schema.StringAttribute{
							// Required in the block; AlsoRequires below, since a
							// Required attribute would be required of interfaces
							// without the block too.
							Optional:    true,
							Description: "The bridge's interface name on the node, at most 15 bytes; required in a `bridge` block.",
							Validators: []validator.String{
								stringvalidator.LengthBetween(1, 15),
								stringvalidator.NoneOf(".", ".."),
								stringvalidator.RegexMatches(ifNameChars, "must be a Linux interface name: no '/', ':' or whitespace"),
							},
						},
						"vlan": schema.Int64Attribute{
							Optional:    true,
							Description: "802.1Q VLAN tag the guest's traffic gets on the bridge, 1-4094; unset is untagged.",
							Validators:  []validator.Int64{int64validator.Between(1, 4094)},
						},
					},
					Validators: []validator.Object{
						objectvalidator.AlsoRequires(path.MatchRelative().AtName("name")),
						objectvalidator.ConflictsWith(path.MatchRelative().AtParent().AtName("network")),
					},
				},
				"network": schema.SingleNestedBlock{
					Description: "Connect to a libvirt network on the node (`default`, the NAT network libvirt " +
						"ships); the VM is placed only on nodes where it is active (data source `virtplane_nodes`, " +
						"`networks`). The guest gets its address from the network's DHCP server. The agent must allow " +
						"the network (`serve --allowed-networks`; none by default). Not with `bridge` or `port_forward`.",
					Attributes: map[string]schema.Attribute{
						"name": schema.StringAttribute{
							Optional:    true, // required in the block, as bridge's name
							Description: "The libvirt network's name on the node; required in a `network` block.",
							Validators: []validator.String{
								stringvalidator.LengthBetween(1, 63),
								stringvalidator.NoneOf(".", ".."),
								stringvalidator.RegexMatches(libvirtNetChars, "must be a libvirt network name: no '/'"),
							},
						},
					},
					Validators: []validator.Object{
						objectvalidator.AlsoRequires(path.MatchRelative().AtName("name")),
					},
				},
				"port_forward": schema.ListNestedBlock{
					Description: "Make a guest port reachable at a port of the node the VM runs on; only on a " +
						"user-mode interface (neither `bridge` nor `network`). No two forwards of the VM may share " +
						"protocol and host port on overlapping host addresses, and no two VMs on one node: a VM whose " +
						"forward another holds there is placed on another node, or waits (`ErrorUnschedulable`). At " +
						"most 64 forwards a VM.",
					NestedObject: schema.NestedBlockObject{
						Attributes: map[string]schema.Attribute{
							"host_port": schema.Int64Attribute{
								Required: true,
								Description: "Port on the node, 1-65535, one the agent allows (`serve --port-forward-ports`, " +
									"1024-65535 by default; never the agent's, etcd's or libvirtd's ports, nor QEMU's migration " +
									"ports 49152-49215).",
								Validators: []validator.Int64{int64validator.Between(1, 65535)},
							},
							"guest_port": schema.Int64Attribute{
								Required:    true,
								Description: "Port in the guest, 1-65535.",
								Validators:  []validator.Int64{int64validator.Between(1, 65535)},
							},
							"protocol": schema.StringAttribute{
								Optional:    true,
								Computed:    true,
								Default:     stringdefault.StaticString(apiv1.DefaultPortForwardProtocol),
								Description: "`tcp` (default) or `udp`.",
								Validators:  []validator.String{oneOf(portForwardProtocols...)},
							},
							"host_address": schema.StringAttribute{
								Optional: true,
								Computed: true,
								Default:  stringdefault.StaticString(apiv1.DefaultPortForwardAddress),
								Description: "Address on the node the forward listens on. Default `127.0.0.1`, so that " +
									"a guest service is not published to the network by accident; `0.0.0.0` listens " +
									"on every IPv4 address. The agent must allow the address (`serve --port-forward-addresses`; " +
									"only `127.0.0.1` by default).",
								Validators: []validator.String{ipAddressValidator()},
							},
						},
						// Each forward, not the list: a list block without
						// elements is an empty list, never null, and would
						// conflict with every bridge.
						Validators: []validator.Object{
							objectvalidator.ConflictsWith(iface.AtName("bridge"), iface.AtName("network")),
						},
					},
				},
			},
		},
	}
}

// macAddressAttribute is an interface's mac_address. A template refuses
// one, as the API does: every replica would have the same. Each VM or
// instance made from it gets its own instead, and the template keeps
// none, so the attribute is not computed there.
func macAddressAttribute(o specSchema) schema.StringAttribute {
	if o.template {
		return schema.StringAttribute{
			Optional: true,
			Description: "Must be left out in a template: every replica would get the same MAC address. Each " +
				"VM or instance made from the template gets one of its own (a pool's VM keeps it for its life).",
			Validators: []validator.String{stringCheck{
				describedAs: "must be left out in a template",
				check: func(p path.Path, s string, diags *diag.Diagnostics) {
					diags.AddAttributeError(p, "MAC address in a template",
						fmt.Sprintf("%s %s: every replica made from the template would have the same MAC address. "+
							"Leave it out and each gets one of its own.", p, strconv.Quote(s)))
				},
			}},
		}
	}
	return schema.StringAttribute{
		Optional: true,
		Computed: true,
		Description: "MAC address (`02:00:00:00:00:01`). Unset, the server assigns one when the interface " +
			"is added and keeps it for the VM's life: across restarts, migrations and updates.",
		Validators:    []validator.String{macValidator()},
		PlanModifiers: []planmodifier.String{macFromState{"the MAC the interface of this name has"}},
	}
}
