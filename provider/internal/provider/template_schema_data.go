package provider

import (
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// The data sources' computed counterparts of template_schema.go: what the
// virtplane_virtual_machine data source has at its root, the pool data
// source in virtual_machine_template and the replica set data source in
// template.

// dataVMSpecAttributes are a VM's settings (vmSpecModel); labels and
// annotations describe those maps.
func dataVMSpecAttributes(labels, annotations string) map[string]schema.Attribute {
	str := func(desc string) schema.StringAttribute {
		return schema.StringAttribute{Computed: true, Description: desc}
	}
	attrs := dataInstanceSpecAttributes(labels, annotations)
	attrs["run_strategy"] = str("`Always`, `RerunOnFailure`, `Manual`, `Halted` or `Once`.")
	attrs["node_failure_policy"] = str("`Wait` or `RestartElsewhere`.")
	return attrs
}

// dataInstanceSpecAttributes are an instance's labels, annotations and
// settings (instanceTemplateModel).
func dataInstanceSpecAttributes(labels, annotations string) map[string]schema.Attribute {
	str := func(desc string) schema.StringAttribute {
		return schema.StringAttribute{Computed: true, Description: desc}
	}
	num := func(desc string) schema.Int64Attribute {
		return schema.Int64Attribute{Computed: true, Description: desc}
	}
	strMap := func(desc string) schema.MapAttribute {
		return schema.MapAttribute{Computed: true, ElementType: types.StringType, Description: desc}
	}
	return map[string]schema.Attribute{
		"labels":      strMap(labels),
		"annotations": strMap(annotations),
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
						"storage_class": str("Storage class the volume lives on, as the VM names it; null when it names " +
							"none (`local`: a file on the VM's node)."),
						"hotpluggable": schema.BoolAttribute{Computed: true, Description: "Whether the disk may be plugged " +
							"into and unplugged from the running guest; null when not set."},
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
		"eviction_strategy":        str("`LiveMigrate`, `LiveMigrateIfPossible`, `External` or `None`; null when unset (the cluster's default applies)."),
		"termination_grace_period": num("Seconds the guest gets to shut down."),
	}
}
