package provider

import (
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/objectvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// The networking part of the virtplane_virtual_machine schema: interface
// blocks with their network kind, the wait_for_ip block, and the
// interfaces of the computed status.

// portForwardProtocols are the protocols a port forward takes, in the
// order the documentation lists them.
var portForwardProtocols = []string{"tcp", "udp"}

// defaultWaitForIPTimeout applies when wait_for_ip sets no timeout: a
// cloud image's DHCP client usually has an address within a minute.
const defaultWaitForIPTimeout = 5 * time.Minute

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
						"`networks`). The guest gets its address from the network's DHCP server. Not with `bridge` " +
						"or `port_forward`.",
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
						"protocol, host address and host port.",
					NestedObject: schema.NestedBlockObject{
						Attributes: map[string]schema.Attribute{
							"host_port": schema.Int64Attribute{
								Required:    true,
								Description: "Port on the node, 1-65535.",
								Validators:  []validator.Int64{int64validator.Between(1, 65535)},
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
									"on every IPv4 address.",
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

func waitForIPBlock() schema.SingleNestedBlock {
	return schema.SingleNestedBlock{
		Description: "Wait, after create and after an update that (re)starts the guest or changes this block, " +
			"until an interface has an IP address in `status.interfaces`, so that outputs and other resources " +
			"can use it. The wait starts once the VM is in the state `run_strategy` implies and has a running " +
			"instance, and counts against `timeouts.create` or `timeouts.update`; on timeout apply fails with " +
			"why the node has no address yet (e.g. no DHCP lease). Refresh, plan and import never wait. " +
			"Only the provider uses this block.",
		Attributes: map[string]schema.Attribute{
			"timeout": schema.StringAttribute{
				Optional:    true,
				Description: "How long to wait for the address, as a Go duration (`90s`, `5m`). Default `5m`.",
				Validators:  []validator.String{durationValidator()},
			},
			"interface": schema.StringAttribute{
				Optional:    true,
				Description: "Name of the interface that must get an address. Default: the first `interface`.",
				Validators:  []validator.String{dnsLabelValidator()},
			},
		},
	}
}

// interfaceStatusAttribute is status.interfaces.
func interfaceStatusAttribute() schema.ListNestedAttribute {
	str := func(d string) schema.StringAttribute { return schema.StringAttribute{Computed: true, Description: d} }
	return schema.ListNestedAttribute{
		Computed: true,
		Description: "The running instance's interfaces as its node reports them, with the addresses the guest " +
			"uses; empty without a running instance.",
		NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
			"name":        str("Name of the interface."),
			"mac_address": str("Its MAC address."),
			"ip_address":  str("Its first IP address (IPv4 when it has one); null until the node finds one."),
			"ip_addresses": schema.ListAttribute{
				Computed: true, ElementType: types.StringType,
				Description: "Every IP address of the interface, IPv4 first, without link-local IPv6 ones.",
			},
			"source": str("Where the addresses came from: `lease` (the libvirt network's DHCP server), `arp` " +
				"(the node's neighbour table) or `agent` (the QEMU guest agent); null while there are none."),
			"info":           str("Why there is no address yet (`no DHCP lease for 02:...`); null once there is one."),
			"interface_name": str("The interface's name inside the guest (`eth0`), when the guest agent says; else null."),
		}},
	}
}

// ipAddressValidator accepts what a port forward's host address may be,
// as the agent does: an IPv4 address (QEMU's user-mode networking
// forwards from IPv4 host addresses only).
func ipAddressValidator() validator.String {
	return stringCheck{
		describedAs: "must be an IPv4 address such as 127.0.0.1",
		check: func(p path.Path, s string, diags *diag.Diagnostics) {
			ip, err := netip.ParseAddr(s)
			bad := ""
			switch {
			case err != nil || ip.Zone() != "":
				bad = "must be an IP address such as 127.0.0.1"
			case ip.Is4In6():
				bad = "must be an IPv4 address, not an IPv4-mapped one (write " + ip.Unmap().String() + ")"
			case !ip.Is4():
				bad = "must be an IPv4 address: user-mode networking forwards IPv4 only"
			}
			if bad != "" {
				diags.AddAttributeError(p, "Invalid "+lastStep(p), fmt.Sprintf("%s %s %s.", p, strconv.Quote(s), bad))
			}
		},
	}
}

// durationValidator accepts positive Go durations, as the timeouts block
// does.
func durationValidator() validator.String {
	return stringCheck{
		describedAs: "must be a positive Go duration such as `90s` or `5m`",
		check: func(p path.Path, s string, diags *diag.Diagnostics) {
			d, err := time.ParseDuration(s)
			switch {
			case err != nil:
				diags.AddAttributeError(p, "Invalid "+lastStep(p),
					fmt.Sprintf("%s %s is not a duration: write a number and a unit such as 90s, 5m or 1h.", p, strconv.Quote(s)))
			case d <= 0:
				diags.AddAttributeError(p, "Invalid "+lastStep(p), fmt.Sprintf("%s %s must be positive.", p, strconv.Quote(s)))
			}
		},
	}
}
