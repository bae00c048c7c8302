package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/objectvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// The schema of the virtplane_virtual_machine resource. Its descriptions are
// the documentation (tfplugindocs renders them into docs/).

func (r *vmResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	tb := timeoutsBlock(ctx, "Time limits of create, update and delete.", timeouts.Opts{
		Create: true, Update: true, Delete: true,
		CreateDescription: "How long create may wait for the state `run_strategy` implies, as a Go duration " +
			"(`30s`, `15m`, `1h`). Default `10m`.",
		UpdateDescription: "How long update may take, including a restart and the wait for the state " +
			"`run_strategy` implies. Default `10m`.",
		DeleteDescription: "How long destroy may wait for the VM to be gone; the guest gets " +
			"`termination_grace_period` seconds of that to shut down. Default `10m`.",
	})
	resp.Schema = schema.Schema{
		Description: "A virtual machine: KubeVirt's VirtualMachine run by virtplane agents. run_strategy " +
			"decides whether it runs; create and update wait for the state the strategy implies and fail " +
			"early, with the reason, when the VM cannot get there (no fitting node, crash loop). A change " +
			"that only takes effect at a restart restarts the VM when update_policy is \"restart\" (the default).",
		MarkdownDescription: "A virtual machine: KubeVirt's `VirtualMachine` run by virtplane agents. `run_strategy` " +
			"decides whether it runs; create and update wait for the state the strategy implies and fail " +
			"early, with the reason, when the VM cannot get there (no fitting node, crash loop). A change " +
			"that only takes effect at a restart restarts the VM when `update_policy = \"restart\"` (the default).",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				Computed:      true,
				Description:   "`namespace/name`, also the import ID.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"name": schema.StringAttribute{
				Required: true,
				Description: "Name of the VM, unique in its namespace: a DNS-1123 label (lower-case letters, " +
					"digits and `-`, at most 63). It becomes the guest's host name and the libvirt domain " +
					"name. Changing it replaces the VM.",
				Validators:    []validator.String{dnsLabelValidator()},
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
			},
			"namespace": schema.StringAttribute{
				Optional:      true,
				Computed:      true,
				Default:       stringdefault.StaticString(apiv1.DefaultNamespace),
				Description:   "Namespace of the VM, a DNS-1123 label. Default `default`. Changing it replaces the VM.",
				Validators:    []validator.String{dnsLabelValidator()},
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
			},
			"uid": schema.StringAttribute{
				Computed:      true,
				Description:   "Unique ID the agent gave the VM; a VM re-created under the same name gets a new one.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"labels": schema.MapAttribute{
				Optional:    true,
				ElementType: types.StringType,
				Description: "Labels of the VM, for selecting it (data source `virtplane_virtual_machines`). " +
					"Keys are qualified names (`app`, `example.com/tier`), values at most 63 characters. " +
					"Changing them never restarts the VM.",
				Validators: []validator.Map{labelMapValidator()},
			},
			"annotations": schema.MapAttribute{
				Optional:    true,
				ElementType: types.StringType,
				Description: "Annotations put on the VM's instance template, so every instance (VMI) of the VM " +
					"carries them; node agents and tools read them. Changes apply to the next instance and " +
					"do not restart the VM.",
				Validators: []validator.Map{annotationMapValidator()},
			},
			"run_strategy": schema.StringAttribute{
				Optional: true,
				Computed: true,
				Default:  stringdefault.StaticString(defaultRunStrategy),
				Description: "When the VM runs, with KubeVirt's semantics (case-sensitive): `Always` (default; " +
					"restarted whenever it stops), `RerunOnFailure` (restarted only after a failure), " +
					"`Manual` (started and stopped only on request), `Halted` (stopped), `Once` (runs once, " +
					"never restarted). Changing it starts or stops the VM in place. A stop requested " +
					"outside Terraform turns `Always` into `Halted`, which the next plan shows.",
				Validators: []validator.String{oneOf(apiv1.RunStrategies()...)},
			},
			"memory": schema.StringAttribute{
				Required:   true,
				CustomType: quantityType{},
				Description: "Guest memory as a Kubernetes quantity, from `16Mi` to `1Ti`: `512Mi`, `1Gi`, `2048Mi`. " +
					"Equal amounts in other spellings (`1Gi` and `1024Mi`) are not a change. Changing it " +
					"needs a restart (see `update_policy`).",
				Validators:    []validator.String{quantityRange("16Mi", "1Ti")},
				PlanModifiers: []planmodifier.String{quantityKeepState()},
			},
			"node_selector": schema.MapAttribute{
				Optional:    true,
				ElementType: types.StringType,
				Description: "Run only on nodes that have all these labels. Changing it needs a restart.",
				Validators:  []validator.Map{labelMapValidator()},
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
			"eviction_strategy": schema.StringAttribute{
				Optional: true,
				Description: "What draining the VM's node (`virtplane_node_maintenance` with `drain = true`) does " +
					"with its running instance, with KubeVirt's semantics: `LiveMigrate` migrates it live to " +
					"another node, and an instance that is not live-migratable blocks the drain; " +
					"`LiveMigrateIfPossible` migrates it if it can and otherwise shuts it down, as `None` does; " +
					"`External` leaves it to an outside actor and blocks the drain until that actor moves or " +
					"stops it; `None` shuts it down, and `run_strategy` decides whether it starts again on " +
					"another node. Unset: the cluster's default, `LiveMigrateIfPossible` unless the agents run " +
					"with `--default-eviction-strategy`. " +
					"Changing it never restarts the VM: the running instance takes the new strategy.",
				Validators: []validator.String{oneOf(apiv1.EvictionStrategies()...)},
			},
			"termination_grace_period": schema.Int64Attribute{
				Optional: true,
				Computed: true,
				Default:  int64default.StaticInt64(apiv1.DefaultTerminationGracePeriodSeconds),
				Description: "Seconds the guest gets to shut down after an ACPI power-button press before it is " +
					"killed, on stop, restart and destroy. Default `30`; `0` kills at once. Changing it " +
					"never restarts the VM.",
				Validators: []validator.Int64{int64validator.AtLeast(0)},
			},
			"update_policy": schema.StringAttribute{
				Optional: true,
				Computed: true,
				Default:  stringdefault.StaticString(defaultUpdatePolicy),
				Description: "What apply does when a change only takes effect at a restart (cpu, memory, disks, " +
					"boot, interfaces, node_selector): `restart` (default) restarts a running VM and waits " +
					"for the new instance, and restarts one whose `restart_required` is true; `none` leaves " +
					"it running and sets `restart_required`. A VM with `run_strategy = \"Once\"` is never " +
					"restarted. Only the provider uses this setting.",
				Validators: []validator.String{oneOf(updatePolicies...)},
			},
			"restart_required": schema.BoolAttribute{
				Computed: true,
				Description: "Whether the running instance predates a change that needs a restart " +
					"(KubeVirt's `RestartRequired` condition).",
			},
			"status": schema.SingleNestedAttribute{
				Computed:    true,
				Description: "What the agent last reported, read on every refresh (never waited for).",
				Attributes:  statusSchemaAttributes(),
			},
		},
		Blocks: map[string]schema.Block{
			"cpu": schema.SingleNestedBlock{
				Description: "Virtual CPU topology; the guest gets cores × sockets × threads vCPUs (at most 512). " +
					"Without the block: one vCPU. Changing it needs a restart.",
				Attributes: map[string]schema.Attribute{
					"cores":   cpuCountAttribute("Cores per socket. Default `1`."),
					"sockets": cpuCountAttribute("Sockets. Default `1`."),
					"threads": cpuCountAttribute("Threads per core. Default `1`."),
				},
			},
			"disk": schema.ListNestedBlock{
				Description: "Disks, in the order the guest sees them. Each has exactly one source: `image`, " +
					"`persistent` or `cloud_init`. Changing disks needs a restart.",
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
							Description: "Source: a disk kept across restarts and deleted with the VM.",
							Attributes: map[string]schema.Attribute{
								"size": schema.StringAttribute{
									// Required in the block, but the framework would also
									// require it of disks without one: ValidateConfig checks.
									Optional:   true,
									CustomType: quantityType{},
									Description: "Size as a quantity (`10Gi`); required in a `persistent` block. " +
										"Equal sizes in other spellings are not a change.",
									Validators:    []validator.String{quantityRange("", "1Ei")},
									PlanModifiers: []planmodifier.String{quantityKeepState()},
								},
								"image": schema.StringAttribute{
									Optional:    true,
									Description: "Image copied in when the disk is created; unset for a blank disk.",
									Validators:  []validator.String{imagePathValidator()},
								},
							},
						},
						"cloud_init": schema.SingleNestedBlock{
							Description: "Source: a cloud-init NoCloud seed (a CD-ROM labelled `cidata`). At most " +
								"one per VM. An edit is a change that needs a restart; cloud-init applies it at " +
								"that boot when the root disk is an ephemeral `image` disk (a fresh copy every " +
								"boot), while on a `persistent` root it runs again only if the guest's cloud-init " +
								"treats the seed as new.",
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
			},
			"boot": schema.SingleNestedBlock{
				Description: "Direct kernel boot instead of booting a disk. Changing it needs a restart.",
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
			},
			"bootloader": schema.SingleNestedBlock{
				Description: "The firmware that boots the VM from its disks (in `boot_order`, else the first " +
					"disk) when there is no `boot` block: `bios {}` (SeaBIOS; also when this block is left out) " +
					"or `efi {}` (OVMF, whose EFI variables are kept on the node with the VM). At most one of " +
					"them. Changing it needs a restart.",
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
							objectvalidator.ConflictsWith(path.MatchRoot("boot")),
						},
					},
				},
			},
			"interface":   interfaceBlock(),
			"wait_for_ip": waitForIPBlock(),
			"timeouts":    tb,
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

func statusSchemaAttributes() map[string]schema.Attribute {
	str := func(d string) schema.StringAttribute { return schema.StringAttribute{Computed: true, Description: d} }
	return map[string]schema.Attribute{
		"printable_status": str("KubeVirt's printable status: `Running`, `Stopped`, `Starting`, `Stopping`, " +
			"`Paused`, `Terminating`, `CrashLoopBackOff`, `ErrorUnschedulable`, ..."),
		"phase": str("Phase of the current instance (`Pending`, `Scheduling`, `Scheduled`, `Running`, " +
			"`Succeeded`, `Failed`); null when the VM has no instance."),
		"ready": schema.BoolAttribute{Computed: true, Description: "Whether the instance is running and ready."},
		"node":  str("Node the current instance is placed on; null when there is none."),
		"conditions": schema.ListNestedAttribute{
			Computed:    true,
			Description: "Conditions of the VM: `Ready`, `Failure`, `RestartRequired`, `Paused`, `PodScheduled` (placement), ...",
			NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
				"type":    str("Condition type."),
				"status":  str("`True`, `False` or `Unknown`."),
				"reason":  str("Machine-readable reason, CamelCase."),
				"message": str("Human-readable explanation."),
			}},
		},
		"interfaces": interfaceStatusAttribute(),
	}
}
