package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

var (
	_ datasource.DataSource              = (*vmDataSource)(nil)
	_ datasource.DataSourceWithConfigure = (*vmDataSource)(nil)
)

// NewVMDataSource returns the virtplane_virtual_machine data source.
func NewVMDataSource() datasource.DataSource { return &vmDataSource{} }

type vmDataSource struct {
	configuredDataSource
}

func (d *vmDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_virtual_machine"
}

// Schema mirrors the resource's attributes, all computed except the key,
// so that outputs and expressions work the same on either.
func (d *vmDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	str := func(desc string) schema.StringAttribute {
		return schema.StringAttribute{Computed: true, Description: desc}
	}
	num := func(desc string) schema.Int64Attribute {
		return schema.Int64Attribute{Computed: true, Description: desc}
	}
	strMap := func(desc string) schema.MapAttribute {
		return schema.MapAttribute{Computed: true, ElementType: types.StringType, Description: desc}
	}
	resp.Schema = schema.Schema{
		Description: "Reads one virtual machine by namespace and name: its settings, as the " +
			"`virtplane_virtual_machine` resource has them, and its current status. Fails if the VM does not exist.",
		Attributes: map[string]schema.Attribute{
			"id": str("`namespace/name`."),
			"name": schema.StringAttribute{
				Required:    true,
				Description: "Name of the VM.",
				Validators:  []validator.String{dnsLabelValidator()},
			},
			"namespace": schema.StringAttribute{
				Optional:    true,
				Computed:    true,
				Description: "Namespace of the VM. Default `default`.",
				Validators:  []validator.String{dnsLabelValidator()},
			},
			"uid":          str("Unique ID the agent gave the VM."),
			"labels":       strMap("Labels of the VM; empty when it has none."),
			"annotations":  strMap("Annotations of the VM's instance template; empty when it has none."),
			"run_strategy": str("`Always`, `RerunOnFailure`, `Manual`, `Halted` or `Once`."),
			"cpu": schema.SingleNestedAttribute{
				Computed:    true,
				Description: "Virtual CPU topology.",
				Attributes: map[string]schema.Attribute{
					"cores":   num("Cores per socket."),
					"sockets": num("Sockets."),
					"threads": num("Threads per core."),
				},
			},
			"memory": schema.StringAttribute{
				Computed:    true,
				CustomType:  quantityType{},
				Description: "Guest memory, as the agent stores it (canonical quantity, `1Gi`).",
			},
			"disk": schema.ListNestedAttribute{
				Computed:    true,
				Description: "Disks, in order.",
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"name":       str("Name of the disk."),
					"bus":        str("`virtio`, `sata` or `scsi`."),
					"boot_order": num("Boot priority, 1 first; null when not booted from by order."),
					"image":      str("Image of an ephemeral disk; null for other sources."),
					"persistent": schema.SingleNestedAttribute{
						Computed:    true,
						Description: "A persistent disk; null for other sources.",
						Attributes: map[string]schema.Attribute{
							"size":  schema.StringAttribute{Computed: true, CustomType: quantityType{}, Description: "Size."},
							"image": str("Image copied in at creation; null for a blank disk."),
						},
					},
					"cloud_init": schema.SingleNestedAttribute{
						Computed:    true,
						Description: "A cloud-init seed; null for other sources.",
						Attributes: map[string]schema.Attribute{
							"user_data":    schema.StringAttribute{Computed: true, Sensitive: true, Description: "User data. Sensitive."},
							"network_data": str("Network configuration; null when not set."),
						},
					},
				}},
			},
			"boot": schema.SingleNestedAttribute{
				Computed:    true,
				Description: "Direct kernel boot; null when the VM boots from a disk.",
				Attributes: map[string]schema.Attribute{
					"kernel":  str("Kernel image."),
					"initrd":  str("Initial ramdisk; null when not set."),
					"cmdline": str("Kernel command line; null when not set."),
				},
			},
			"bootloader": schema.SingleNestedAttribute{
				Computed:    true,
				Description: "The firmware that boots the VM from its disks; null when not set (BIOS).",
				Attributes: map[string]schema.Attribute{
					"bios": schema.SingleNestedAttribute{
						Computed:    true,
						Description: "Set (`{}`) when the VM boots through SeaBIOS; null otherwise.",
						Attributes:  map[string]schema.Attribute{},
					},
					"efi": schema.SingleNestedAttribute{
						Computed:    true,
						Description: "Set when the VM boots through UEFI firmware (OVMF); null otherwise.",
						Attributes: map[string]schema.Attribute{
							"secure_boot": schema.BoolAttribute{Computed: true, Description: "Whether Secure Boot is on; null when not set."},
						},
					},
				},
			},
			"interface": schema.ListNestedAttribute{
				Computed:    true,
				Description: "Network interfaces, in order.",
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"name":        str("Name of the interface and its network."),
					"model":       str("`virtio`, `e1000` or `rtl8139`."),
					"mac_address": str("MAC address, assigned by the server when the configuration sets none."),
					"bridge": schema.SingleNestedAttribute{
						Computed:    true,
						Description: "The Linux bridge on the node the interface connects to; null for other kinds.",
						Attributes: map[string]schema.Attribute{
							"name": str("The bridge's interface name on the node."),
							"vlan": num("802.1Q VLAN tag; null when untagged."),
						},
					},
					"network": schema.SingleNestedAttribute{
						Computed:    true,
						Description: "The libvirt network on the node the interface connects to; null for other kinds.",
						Attributes:  map[string]schema.Attribute{"name": str("The libvirt network's name.")},
					},
					"port_forward": schema.ListNestedAttribute{
						Computed: true,
						Description: "Port forwards of a user-mode interface (neither bridge nor network); empty for " +
							"other kinds.",
						NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
							"host_port":    num("Port on the node."),
							"guest_port":   num("Port in the guest."),
							"protocol":     str("`tcp` or `udp`."),
							"host_address": str("Address on the node the forward listens on."),
						}},
					},
				}},
			},
			"node_selector":            strMap("Node labels the VM requires; empty when none."),
			"node_failure_policy":      str("`Wait` or `RestartElsewhere`."),
			"eviction_strategy":        str("`LiveMigrate`, `LiveMigrateIfPossible`, `External` or `None`; null when unset (the cluster's default applies)."),
			"termination_grace_period": num("Seconds the guest gets to shut down."),
			"restart_required":         schema.BoolAttribute{Computed: true, Description: "Whether the running instance predates a change that needs a restart."},
			"status": schema.SingleNestedAttribute{
				Computed:    true,
				Description: "What the agent last reported.",
				Attributes:  dataStatusAttributes(),
			},
		},
	}
}

// dataStatusAttributes is the status schema of the resource, for data
// sources.
func dataStatusAttributes() map[string]schema.Attribute {
	str := func(d string) schema.StringAttribute { return schema.StringAttribute{Computed: true, Description: d} }
	return map[string]schema.Attribute{
		"printable_status": str("KubeVirt's printable status: `Running`, `Stopped`, `Starting`, `Stopping`, ..."),
		"phase":            str("Phase of the current instance; null when the VM has no instance."),
		"ready":            schema.BoolAttribute{Computed: true, Description: "Whether the instance is running and ready."},
		"node":             str("Node the current instance is placed on; null when there is none."),
		"conditions": schema.ListNestedAttribute{
			Computed:    true,
			Description: "Conditions of the VM.",
			NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
				"type":    str("Condition type."),
				"status":  str("`True`, `False` or `Unknown`."),
				"reason":  str("Machine-readable reason."),
				"message": str("Human-readable explanation."),
			}},
		},
		"interfaces": dataInterfaceStatusAttribute(),
	}
}

// dataInterfaceStatusAttribute is status.interfaces of the resource, for
// data sources.
func dataInterfaceStatusAttribute() schema.ListNestedAttribute {
	str := func(d string) schema.StringAttribute { return schema.StringAttribute{Computed: true, Description: d} }
	return schema.ListNestedAttribute{
		Computed:    true,
		Description: "The running instance's interfaces, with their addresses; empty without a running instance.",
		NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
			"name":        str("Name of the interface."),
			"mac_address": str("Its MAC address."),
			"ip_address":  str("Its first IP address (IPv4 when it has one); null until the node finds one."),
			"ip_addresses": schema.ListAttribute{Computed: true, ElementType: types.StringType,
				Description: "Every IP address of the interface, IPv4 first."},
			"source":         str("`lease`, `arp` or `agent`: where the addresses came from; null while there are none."),
			"info":           str("Why there is no address yet; null once there is one."),
			"interface_name": str("The interface's name inside the guest, when the guest agent says."),
		}},
	}
}

func (d *vmDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var cfg vmModel
	if !d.readConfig(ctx, req, resp, &cfg, "read virtplane_virtual_machine") {
		return
	}
	ns := orDefault(cfg.Namespace.ValueString(), apiv1.DefaultNamespace)
	name := cfg.Name.ValueString()
	vm, vmi, err := getVM(ctx, d.data.client, ns, name)
	if err != nil {
		addLookupError(&resp.Diagnostics, err, d.data.endpoint, vmKind, vmID(ns, name),
			"(data source virtplane_virtual_machines lists the existing ones).")
		return
	}
	m, diags := vmToModel(ctx, vm, vmi, readOptions{full: true})
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}
