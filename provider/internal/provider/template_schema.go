package provider

import (
	"maps"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/objectvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// The attributes and blocks of what a VM or an instance is made from, one
// definition each: the virtplane_virtual_machine resource has them at its
// root, a pool in its virtual_machine_template block and a replica set in
// its template block. Their descriptions are the documentation
// (tfplugindocs renders them into docs/).

// specSchema says where the shared attributes and blocks are used.
type specSchema struct {
	// template is a template of many replicas (a pool's VMs, a replica
	// set's instances) rather than one VM: the descriptions leave out what
	// a change does to a running guest, which the template's own block
	// describes, and MAC addresses are refused (every replica would have
	// the same one).
	template bool
	// labels and annotations describe those maps where they are used.
	labels, annotations string
}

// vm is s for one VM and "" in a template: the sentences that say what a
// change does to the running guest.
func (o specSchema) vm(s string) string {
	if o.template {
		return ""
	}
	return s
}

// vmSpecAttributes are the attributes of a VM: its instances' and its run
// strategy and node failure policy.
func vmSpecAttributes(o specSchema) map[string]schema.Attribute {
	attrs := instanceSpecAttributes(o)
	maps.Copy(attrs, map[string]schema.Attribute{
		"run_strategy": schema.StringAttribute{
			Optional: true,
			Computed: true,
			Default:  stringdefault.StaticString(defaultRunStrategy),
			Description: "When the VM runs, with KubeVirt's semantics (case-sensitive): `Always` (default; " +
				"restarted whenever it stops), `RerunOnFailure` (restarted only after a failure), " +
				"`Manual` (started and stopped only on request), `Halted` (stopped), `Once` (runs once, " +
				"never restarted)." + o.vm(" Changing it starts or stops the VM in place. A stop requested "+
				"outside Terraform turns `Always` into `Halted`, which the next plan shows."),
			Validators: []validator.String{oneOf(apiv1.RunStrategies()...)},
		},
		"node_failure_policy": schema.StringAttribute{
			Optional: true,
			Computed: true,
			Default:  stringdefault.StaticString(apiv1.DefaultNodeFailurePolicy),
			Description: "What happens to the VM's instance when its node stops answering: `Wait` (default, " +
				"KubeVirt's behaviour: until an operator fences the node) or `RestartElsewhere` (the " +
				"node fences itself when its lease runs out and the VM starts on another node).",
			Validators: []validator.String{oneOf(apiv1.NodeFailurePolicies()...)},
		},
	})
	return attrs
}

// instanceSpecAttributes are the attributes of an instance: its labels,
// annotations and settings.
func instanceSpecAttributes(o specSchema) map[string]schema.Attribute {
	return map[string]schema.Attribute{
		"labels": schema.MapAttribute{
			Optional:    true,
			ElementType: types.StringType,
			Description: o.labels,
			Validators:  []validator.Map{labelMapValidator()},
		},
		"annotations": schema.MapAttribute{
			Optional:    true,
			ElementType: types.StringType,
			Description: o.annotations,
			Validators:  []validator.Map{annotationMapValidator()},
		},
		"memory": schema.StringAttribute{
			Required:   true,
			CustomType: quantityType{},
			Description: "Guest memory as a Kubernetes quantity, from `16Mi` to `1Ti`: `512Mi`, `1Gi`, `2048Mi`. " +
				"Equal amounts in other spellings (`1Gi` and `1024Mi`) are not a change." +
				o.vm(" Changing it needs a restart (see `update_policy`)."),
			Validators:    []validator.String{quantityRange("16Mi", "1Ti")},
			PlanModifiers: []planmodifier.String{quantityKeepState()},
		},
		"node_selector": schema.MapAttribute{
			Optional:    true,
			ElementType: types.StringType,
			Description: "Run only on nodes that have all these labels." + o.vm(" Changing it needs a restart."),
			Validators:  []validator.Map{labelMapValidator()},
		},
		"eviction_strategy": schema.StringAttribute{
			Optional: true,
			Description: "What draining the VM's node (`virtplane_node_maintenance` with `drain = true`) does " +
				"with its running instance, with KubeVirt's semantics: `LiveMigrate` migrates it live to " +
				"another node, and an instance that is not live-migratable blocks the drain; " +
				"`LiveMigrateIfPossible` migrates it if it can and otherwise shuts it down, as `None` does; " +
				"`External` leaves it to an outside actor and blocks the drain until that actor moves or " +
				"stops it; `None` shuts it down, and `run_strategy` decides whether it starts again on " +
				"another node. Unset: the cluster's default, `LiveMigrateIfPossible` unless the agents run " +
				"with `--default-eviction-strategy`." +
				o.vm(" Changing it never restarts the VM: the running instance takes the new strategy."),
			Validators: []validator.String{oneOf(apiv1.EvictionStrategies()...)},
		},
		"termination_grace_period": schema.Int64Attribute{
			Optional: true,
			Computed: true,
			Default:  int64default.StaticInt64(apiv1.DefaultTerminationGracePeriodSeconds),
			Description: "Seconds the guest gets to shut down after an ACPI power-button press before it is " +
				"killed, on stop, restart and destroy. Default `30`; `0` kills at once." +
				o.vm(" Changing it never restarts the VM."),
			Validators: []validator.Int64{int64validator.AtLeast(0)},
		},
	}
}

// instanceSpecBlocks are the blocks of an instance: cpu, disks, boot,
// bootloader and interfaces.
func instanceSpecBlocks(o specSchema) map[string]schema.Block {
	return map[string]schema.Block{
		"cpu": schema.SingleNestedBlock{
			Description: "Virtual CPU topology; the guest gets cores × sockets × threads vCPUs (at most 512). " +
				"Without the block: one vCPU." + o.vm(" Changing it needs a restart."),
			Attributes: map[string]schema.Attribute{
				"cores":   cpuCountAttribute("Cores per socket. Default `1`."),
				"sockets": cpuCountAttribute("Sockets. Default `1`."),
				"threads": cpuCountAttribute("Threads per core. Default `1`."),
			},
		},
		"disk":       diskBlock(o),
		"boot":       bootBlock(o),
		"bootloader": bootloaderBlock(o),
		"interface":  interfaceBlock(o),
	}
}

func diskBlock(o specSchema) schema.ListNestedBlock {
	persistent := "Source: a disk kept across restarts and deleted with the VM."
	if o.template {
		persistent = "Source: a disk of each VM's own, kept across restarts and rollouts and deleted with " +
			"the VM. Not in a replica set, whose instances have no VM to keep it for."
	}
	return schema.ListNestedBlock{
		Description: "Disks, in the order the guest sees them. Each has exactly one source: `image`, " +
			"`persistent` or `cloud_init`." + o.vm(" Changing disks needs a restart, except raising the size "+
			"of a `persistent` one."),
		NestedObject: schema.NestedBlockObject{
			Attributes: map[string]schema.Attribute{
				"name": schema.StringAttribute{
					Required:    true,
					Description: "Name of the disk, unique in the VM; a DNS-1123 label.",
					Validators:  []validator.String{dnsLabelValidator()},
				},
				"bus": schema.StringAttribute{
					Optional: true,
					Computed: true,
					Description: "Bus the disk is attached to: `virtio` (default), `sata` or `scsi`. " +
						"A `cloud_init` disk is a CD-ROM: `sata` (its default) or `scsi`.",
					Validators:    []validator.String{oneOf(apiv1.DiskBuses()...)},
					PlanModifiers: []planmodifier.String{diskBusDefault{}},
				},
				"boot_order": schema.Int64Attribute{
					Optional:    true,
					Description: "Boot priority, 1 first; disks without one are not booted from by order.",
					Validators:  []validator.Int64{int64validator.AtLeast(1)},
				},
				"image": schema.StringAttribute{
					Optional: true,
					Description: "Source: an ephemeral copy-on-write disk over this image, a path " +
						"relative to the node image directory (`debian-12.qcow2`). Writes are lost " +
						"when the instance stops.",
					Validators: []validator.String{imagePathValidator()},
				},
			},
			Blocks: map[string]schema.Block{
				"persistent": schema.SingleNestedBlock{
					Description: persistent,
					Attributes: map[string]schema.Attribute{
						"size": schema.StringAttribute{
							// Required in the block, but the framework would also
							// require it of disks without one: ValidateConfig checks.
							Optional:   true,
							CustomType: quantityType{},
							Description: "Size as a quantity (`10Gi`); required in a `persistent` block. " +
								"Equal sizes in other spellings are not a change." + o.vm(" Raising it grows the disk "+
								"without a restart: while the VM runs the disk grows under the running guest, which "+
								"sees the new size at once (growing its partitions and file systems is the guest's "+
								"business), else before the next start. Lowering it is refused at plan time: a disk "+
								"never shrinks; rename the disk to get a new, smaller one."),
							Validators:    []validator.String{quantityRange("", "1Ei")},
							PlanModifiers: []planmodifier.String{quantityKeepState()},
						},
						"image": schema.StringAttribute{
							Optional: true,
							Description: "Image copied in when the disk is created; unset for a blank disk." +
								o.vm(" It cannot change afterwards (refused at plan time): rename the disk to get a "+
									"new one from another image."),
							Validators: []validator.String{imagePathValidator()},
						},
						"storage_class": schema.StringAttribute{
							Optional: true,
							Description: "Storage class the volume lives on (`virtplane_storage_class`): unset or " +
								"`local`, a file on the node that made it, which pins the VM to that node; an `rbd` or " +
								"`shared_filesystem` class keeps it off any one node. The class must exist. It cannot " +
								"change once set (the volume exists there): a change is refused at plan time; rename " +
								"the disk to get a new volume on another class.",
							Validators: []validator.String{dnsLabelValidator()},
						},
						"hotpluggable": schema.BoolAttribute{
							Optional: true,
							Description: "The disk may be plugged into and unplugged from a running guest " +
								"(KubeVirt's hotpluggable volumes; the API's `persistent.hotpluggable`). Its bus is " +
								"`virtio` or `scsi`, it has no `boot_order` and is not the first disk of a VM that " +
								"boots from its disks. In the guest its serial is its name unless `serial` says " +
								"otherwise (`/dev/disk/by-id/virtio-<name>`)." + o.vm(" Adding or removing such a "+
								"disk changes the VM in place: the running guest gets it plugged in or unplugged "+
								"without a restart (the plan says so), and the instance's volume status shows it. "+
								"A removed disk's volume is kept until the VM is deleted, as KubeVirt keeps an "+
								"unplugged volume: adding a disk of the same name again brings its data back. "+
								"Turning the flag on or off for an existing disk needs a restart."),
						},
					},
				},
				"cloud_init": schema.SingleNestedBlock{
					Description: "Source: a cloud-init NoCloud seed (a CD-ROM labelled `cidata`). At most " +
						"one per VM." + o.vm(" An edit is a change that needs a restart; cloud-init applies it at "+
						"that boot when the root disk is an ephemeral `image` disk (a fresh copy every "+
						"boot), while on a `persistent` root it runs again only if the guest's cloud-init "+
						"treats the seed as new."),
					Attributes: map[string]schema.Attribute{
						"user_data": schema.StringAttribute{
							Optional:  true,
							Computed:  true,
							Sensitive: true,
							Description: "User data (`#cloud-config ...`), at most 64 KiB. Sensitive. " +
								"Unset keeps the current value, so that configurations generated " +
								"by `terraform plan -generate-config-out` (which write null for " +
								"sensitive values) plan no change; set `\"\"` to clear it.",
							Validators:    []validator.String{stringvalidator.LengthAtMost(64 * 1024)},
							PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
						},
						"network_data": schema.StringAttribute{
							Optional:    true,
							Description: "Network configuration (version 2), at most 64 KiB.",
							Validators:  []validator.String{stringvalidator.LengthAtMost(64 * 1024)},
						},
					},
				},
			},
		},
	}
}

func bootBlock(o specSchema) schema.SingleNestedBlock {
	return schema.SingleNestedBlock{
		Description: "Direct kernel boot instead of booting a disk." + o.vm(" Changing it needs a restart."),
		Attributes: map[string]schema.Attribute{
			"kernel": schema.StringAttribute{
				Optional:    true, // required in the block; see ValidateConfig
				Description: "Kernel image, relative to the node image directory; required in a `boot` block.",
				Validators:  []validator.String{imagePathValidator()},
			},
			"initrd": schema.StringAttribute{
				Optional:    true,
				Description: "Initial ramdisk, relative to the node image directory.",
				Validators:  []validator.String{imagePathValidator()},
			},
			"cmdline": schema.StringAttribute{
				Optional:    true,
				Description: "Kernel command line (`console=ttyS0 root=/dev/vda`), at most 4096 bytes.",
				Validators:  []validator.String{stringvalidator.LengthAtMost(4096)},
			},
		},
	}
}

func bootloaderBlock(o specSchema) schema.SingleNestedBlock {
	return schema.SingleNestedBlock{
		Description: "The firmware that boots the VM from its disks (in `boot_order`, else the first " +
			"disk) when there is no `boot` block: `bios {}` (SeaBIOS; also when this block is left out) " +
			"or `efi {}` (OVMF, whose EFI variables are kept on the node with the VM). At most one of " +
			"them." + o.vm(" Changing it needs a restart."),
		Blocks: map[string]schema.Block{
			"bios": schema.SingleNestedBlock{
				Description: "Boot through SeaBIOS (legacy BIOS), the default.",
				Validators: []validator.Object{
					objectvalidator.ConflictsWith(path.MatchRelative().AtParent().AtName("efi")),
				},
			},
			"efi": schema.SingleNestedBlock{
				Description: "Boot through UEFI firmware (OVMF). Not with a `boot` block.",
				Attributes: map[string]schema.Attribute{
					"secure_boot": schema.BoolAttribute{
						Optional: true,
						Description: "Secure Boot with Microsoft's and the distribution's keys enrolled; " +
							"the guest's boot loader must be signed. Off when unset.",
					},
				},
				Validators: []validator.Object{
					// The boot block beside bootloader, at the root or in a
					// template.
					objectvalidator.ConflictsWith(path.MatchRelative().AtParent().AtParent().AtName("boot")),
				},
			},
		},
	}
}

func cpuCountAttribute(desc string) schema.Int64Attribute {
	return schema.Int64Attribute{
		Optional:    true,
		Computed:    true,
		Default:     int64default.StaticInt64(1),
		Description: desc,
		Validators:  []validator.Int64{int64validator.Between(1, 512)},
	}
}
