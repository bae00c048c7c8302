package provider

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
)

var (
	_ resource.Resource                   = (*vmResource)(nil)
	_ resource.ResourceWithConfigure      = (*vmResource)(nil)
	_ resource.ResourceWithImportState    = (*vmResource)(nil)
	_ resource.ResourceWithModifyPlan     = (*vmResource)(nil)
	_ resource.ResourceWithValidateConfig = (*vmResource)(nil)
)

// defaultTimeout applies to create, update and delete when the timeouts
// block does not say otherwise. Long enough for a real guest to boot from
// a cold image cache; waits end early when the VM cannot get there.
const defaultTimeout = 10 * time.Minute

// maxConflictRetries bounds compare-and-swap retries of one update: the VM
// controller writes status concurrently, which conflicts with our writes.
const maxConflictRetries = 20

// NewVMResource returns the virtplane_virtual_machine resource.
func NewVMResource() resource.Resource { return &vmResource{} }

type vmResource struct {
	data *providerData
}

func (r *vmResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_virtual_machine"
}

func (r *vmResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	tb := timeouts.Block(ctx, timeouts.Opts{
		Create: true, Update: true, Delete: true,
		CreateDescription: "How long create may wait for the state `run_strategy` implies, as a Go duration " +
			"(`30s`, `15m`, `1h`). Default `10m`.",
		UpdateDescription: "How long update may take, including a restart and the wait for the state " +
			"`run_strategy` implies. Default `10m`.",
		DeleteDescription: "How long destroy may wait for the VM to be gone; the guest gets " +
			"`termination_grace_period` seconds of that to shut down. Default `10m`.",
	})
	if b, ok := tb.(schema.SingleNestedBlock); ok {
		b.Description = "Time limits of create, update and delete."
		tb = b
	}
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
				Validators:    []validator.String{dnsLabelValidator{}},
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
			},
			"namespace": schema.StringAttribute{
				Optional:      true,
				Computed:      true,
				Default:       stringdefault.StaticString(apiv1.DefaultNamespace),
				Description:   "Namespace of the VM, a DNS-1123 label. Default `default`. Changing it replaces the VM.",
				Validators:    []validator.String{dnsLabelValidator{}},
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
				Validators: []validator.Map{labelMapValidator{}},
			},
			"annotations": schema.MapAttribute{
				Optional:    true,
				ElementType: types.StringType,
				Description: "Annotations put on the VM's instance template, so every instance (VMI) of the VM " +
					"carries them; node agents and tools read them. Changes apply to the next instance and " +
					"do not restart the VM.",
				Validators: []validator.Map{annotationMapValidator{}},
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
				Validators:    []validator.String{quantityRange{min: "16Mi", max: "1Ti"}},
				PlanModifiers: []planmodifier.String{quantityKeepState{}},
			},
			"node_selector": schema.MapAttribute{
				Optional:    true,
				ElementType: types.StringType,
				Description: "Run only on nodes that have all these labels. Changing it needs a restart.",
				Validators:  []validator.Map{labelMapValidator{}},
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
							Validators:  []validator.String{dnsLabelValidator{}},
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
							Validators: []validator.String{imagePathValidator{}},
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
									Validators:    []validator.String{quantityRange{max: "1Ei"}},
									PlanModifiers: []planmodifier.String{quantityKeepState{}},
								},
								"image": schema.StringAttribute{
									Optional:    true,
									Description: "Image copied in when the disk is created; unset for a blank disk.",
									Validators:  []validator.String{imagePathValidator{}},
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
						Validators:  []validator.String{imagePathValidator{}},
					},
					"initrd": schema.StringAttribute{
						Optional:    true,
						Description: "Initial ramdisk, relative to the node image directory.",
						Validators:  []validator.String{imagePathValidator{}},
					},
					"cmdline": schema.StringAttribute{
						Optional:    true,
						Description: "Kernel command line (`console=ttyS0 root=/dev/vda`), at most 4096 bytes.",
						Validators:  []validator.String{stringvalidator.LengthAtMost(4096)},
					},
				},
			},
			"interface": schema.ListNestedBlock{
				Description: "Network interfaces, in order. Each is connected to a user-mode (NAT) network of " +
					"the same name. Changing them needs a restart.",
				NestedObject: schema.NestedBlockObject{
					Attributes: map[string]schema.Attribute{
						"name": schema.StringAttribute{
							Required:    true,
							Description: "Name of the interface and its network, unique in the VM; a DNS-1123 label.",
							Validators:  []validator.String{dnsLabelValidator{}},
						},
						"model": schema.StringAttribute{
							Optional:    true,
							Computed:    true,
							Default:     stringdefault.StaticString(apiv1.DefaultInterfaceModel),
							Description: "Device model: `virtio` (default), `e1000` or `rtl8139`.",
							Validators:  []validator.String{oneOf(apiv1.InterfaceModels()...)},
						},
						"mac_address": schema.StringAttribute{
							Optional:    true,
							Description: "MAC address (`02:00:00:00:00:01`); unset lets the node choose one.",
							Validators:  []validator.String{macValidator{}},
						},
					},
				},
			},
			"timeouts": tb,
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
	}
}

// diskBusDefault plans the bus the agent would choose for an unset one:
// virtio for disks, sata for the cloud-init CD-ROM. A static default
// cannot depend on the disk's source.
type diskBusDefault struct{}

func (diskBusDefault) Description(context.Context) string {
	return "defaults to virtio, or sata for a cloud_init disk"
}

func (m diskBusDefault) MarkdownDescription(ctx context.Context) string { return m.Description(ctx) }

func (diskBusDefault) PlanModifyString(ctx context.Context, req planmodifier.StringRequest, resp *planmodifier.StringResponse) {
	if !req.ConfigValue.IsNull() {
		return
	}
	var ci types.Object
	if d := req.Plan.GetAttribute(ctx, req.Path.ParentPath().AtName("cloud_init"), &ci); d.HasError() || ci.IsUnknown() {
		return
	}
	if ci.IsNull() {
		resp.PlanValue = types.StringValue(apiv1.DefaultDiskBus)
	} else {
		resp.PlanValue = types.StringValue(apiv1.DefaultCDRomBus)
	}
}

func (r *vmResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.data = providerDataFrom(req.ProviderData, &resp.Diagnostics)
}

// ready reports whether the client can be used, adding a diagnostic if not.
func (r *vmResource) ready(diags *diag.Diagnostics, what string) bool {
	if r.data == nil {
		diags.AddError("virtplane provider not configured",
			"The resource was used before the provider was configured. This is a bug in the virtplane provider.")
		return false
	}
	if len(r.data.unknown) > 0 {
		diags.AddError(notReadyError(r.data, what))
		return false
	}
	return true
}

// ValidateConfig checks what single attributes cannot: exactly one source
// per disk, unique names, boot orders and MACs, and the vCPU total.
func (r *vmResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var disks types.List
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("disk"), &disks)...)
	if !disks.IsNull() && !disks.IsUnknown() {
		var ds []diskModel
		if d := disks.ElementsAs(ctx, &ds, true); !d.HasError() {
			validateDisks(ds, &resp.Diagnostics)
		}
	}
	var ifaces types.List
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("interface"), &ifaces)...)
	if !ifaces.IsNull() && !ifaces.IsUnknown() {
		var is []interfaceModel
		if d := ifaces.ElementsAs(ctx, &is, true); !d.HasError() {
			validateInterfaces(is, &resp.Diagnostics)
		}
	}
	var cpu *cpuModel
	if d := req.Config.GetAttribute(ctx, path.Root("cpu"), &cpu); !d.HasError() && cpu != nil {
		total, known := int64(1), true
		for _, n := range []types.Int64{cpu.Cores, cpu.Sockets, cpu.Threads} {
			known = known && !n.IsUnknown()
			if !n.IsNull() && !n.IsUnknown() && n.ValueInt64() > 0 {
				total *= n.ValueInt64()
			}
		}
		if known && total > 512 {
			resp.Diagnostics.AddAttributeError(path.Root("cpu"), "Too many vCPUs",
				fmt.Sprintf("cores × sockets × threads is %d; at most 512 vCPUs are supported.", total))
		}
	}
	var boot *bootModel
	if d := req.Config.GetAttribute(ctx, path.Root("boot"), &boot); !d.HasError() && boot != nil && boot.Kernel.IsNull() {
		resp.Diagnostics.AddAttributeError(path.Root("boot").AtName("kernel"), "Missing kernel",
			"A boot block needs kernel: the kernel image, relative to the node image directory.")
	}
}

func validateDisks(ds []diskModel, diags *diag.Diagnostics) {
	names := map[string]int{}
	bootOrders := map[int64]int{}
	cloudInit := -1
	for i, d := range ds {
		p := path.Root("disk").AtListIndex(i)
		var sources []string
		if !d.Image.IsNull() {
			sources = append(sources, "image")
		}
		if d.Persistent != nil {
			sources = append(sources, "persistent")
			if d.Persistent.Size.IsNull() {
				diags.AddAttributeError(p.AtName("persistent").AtName("size"), "Missing disk size",
					"A persistent disk needs size, a quantity such as 10Gi.")
			}
		}
		if d.CloudInit != nil {
			sources = append(sources, "cloud_init")
			if cloudInit >= 0 {
				diags.AddAttributeError(p.AtName("cloud_init"), "Only one cloud_init disk allowed",
					fmt.Sprintf("disk[%d] is a cloud_init disk already; a VM takes at most one (both would claim the cidata label).", cloudInit))
			}
			cloudInit = i
			if bus := d.Bus.ValueString(); !d.Bus.IsUnknown() && !d.Bus.IsNull() && !slices.Contains(apiv1.CDRomBuses(), bus) {
				diags.AddAttributeError(p.AtName("bus"), "Invalid bus",
					fmt.Sprintf("disk[%d] is a cloud_init disk, attached as a CD-ROM, whose bus must be one of %q, got %q.", i, apiv1.CDRomBuses(), bus))
			}
		}
		if len(sources) != 1 && !d.Image.IsUnknown() {
			got := "none"
			if len(sources) > 1 {
				got = strings.Join(sources, " and ")
			}
			diags.AddAttributeError(p, "Disk needs exactly one source",
				fmt.Sprintf("disk[%d] must set exactly one of image, persistent or cloud_init; it sets %s.", i, got))
		}
		if !d.Name.IsNull() && !d.Name.IsUnknown() {
			if j, dup := names[d.Name.ValueString()]; dup {
				diags.AddAttributeError(p.AtName("name"), "Duplicate disk name",
					fmt.Sprintf("disk[%d] is also named %q; disk names must be unique.", j, d.Name.ValueString()))
			}
			names[d.Name.ValueString()] = i
		}
		if !d.BootOrder.IsNull() && !d.BootOrder.IsUnknown() {
			if j, dup := bootOrders[d.BootOrder.ValueInt64()]; dup {
				diags.AddAttributeError(p.AtName("boot_order"), "Duplicate boot_order",
					fmt.Sprintf("disk[%d] has boot_order %d too; boot orders must be unique.", j, d.BootOrder.ValueInt64()))
			}
			bootOrders[d.BootOrder.ValueInt64()] = i
		}
	}
}

func validateInterfaces(is []interfaceModel, diags *diag.Diagnostics) {
	names := map[string]int{}
	macs := map[string]int{}
	for i, n := range is {
		p := path.Root("interface").AtListIndex(i)
		if !n.Name.IsNull() && !n.Name.IsUnknown() {
			if j, dup := names[n.Name.ValueString()]; dup {
				diags.AddAttributeError(p.AtName("name"), "Duplicate interface name",
					fmt.Sprintf("interface[%d] is also named %q; interface names must be unique.", j, n.Name.ValueString()))
			}
			names[n.Name.ValueString()] = i
		}
		if !n.MACAddress.IsNull() && !n.MACAddress.IsUnknown() {
			mac := strings.ToLower(n.MACAddress.ValueString())
			if j, dup := macs[mac]; dup {
				diags.AddAttributeError(p.AtName("mac_address"), "Duplicate mac_address",
					fmt.Sprintf("interface[%d] has MAC address %s too.", j, n.MACAddress.ValueString()))
			}
			macs[mac] = i
		}
	}
}

// ModifyPlan says at plan time what apply will do to a running guest, and
// plans the restart that update_policy = "restart" owes a VM whose
// restart_required is still true.
func (r *vmResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() || req.State.Raw.IsNull() {
		return // destroy or create
	}
	// The framework marks computed attributes unknown as soon as the
	// configuration differs from the state, before attribute plan
	// modifiers run. When those turn the difference into none (a memory
	// spelled "0.5Gi" instead of "512Mi"), the unknowns alone would make an
	// update: keep the state's values instead.
	keep, ok := resp.Plan, true
	for _, p := range []path.Path{path.Root("status"), path.Root("restart_required")} {
		var v attr.Value
		if d := req.State.GetAttribute(ctx, p, &v); d.HasError() {
			ok = false
			break
		}
		if d := keep.SetAttribute(ctx, p, v); d.HasError() {
			ok = false
			break
		}
	}
	if ok && keep.Raw.Equal(req.State.Raw) {
		resp.Plan = keep
		return
	}
	var plan, state vmResourceModel
	// Plans with unknown blocks (dynamic blocks over unknown values) cannot
	// be judged yet; apply still does the right thing.
	if d := req.Plan.Get(ctx, &plan); d.HasError() {
		return
	}
	if d := req.State.Get(ctx, &state); d.HasError() {
		return
	}
	strategy := plan.RunStrategy.ValueString()
	restartable := strategy == apiv1.RunStrategyAlways || strategy == apiv1.RunStrategyRerunOnFailure || strategy == apiv1.RunStrategyManual
	running := instanceActive(state.Status)
	policy := plan.UpdatePolicy.ValueString()
	id := vmID(state.Namespace.ValueString(), state.Name.ValueString())

	changed := restartChanges(ctx, &state.vmModel, &plan.vmModel)
	if len(changed) > 0 && running && strategy != apiv1.RunStrategyHalted {
		what := strings.Join(changed, ", ")
		if policy == updatePolicyRestart && restartable {
			resp.Diagnostics.AddWarning("Apply restarts virtual machine "+id,
				fmt.Sprintf("Changing %s takes effect only when the guest restarts, so apply restarts %s (update_policy = \"restart\") "+
					"and waits for the new instance. The guest gets termination_grace_period seconds to shut down. "+
					"Set update_policy = \"none\" to apply the change at the next restart instead.", what, id))
		} else {
			why := "update_policy = \"none\""
			if policy == updatePolicyRestart {
				why = "run_strategy = \"" + strategy + "\" is never restarted by the provider"
			}
			resp.Diagnostics.AddWarning("Change to "+id+" waits for a restart",
				fmt.Sprintf("Changing %s takes effect only when the guest restarts; %s keeps running with the old settings "+
					"(%s) and restart_required becomes true.", what, id, why))
		}
	}

	if policy == updatePolicyRestart && restartable && running && state.RestartRequired.ValueBool() {
		resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("restart_required"), false)...)
		if len(changed) == 0 {
			resp.Diagnostics.AddWarning("Apply restarts virtual machine "+id,
				id+" runs with settings older than its configuration (restart_required is true) and update_policy is \"restart\", so apply restarts it.")
		}
	}
}

// instanceActive reports whether a status says the VM has an instance that
// has not ended.
func instanceActive(st types.Object) bool {
	if st.IsNull() || st.IsUnknown() {
		return false
	}
	phase, ok := st.Attributes()["phase"].(types.String)
	if !ok || phase.IsNull() || phase.IsUnknown() {
		return false
	}
	return !apiv1.IsFinal(phase.ValueString())
}

// restartChanges names the attributes whose change between state and plan
// the running guest only sees after a restart. The comparison is on the
// API objects after the agent's defaulting, as the VM controller's
// RestartRequired check is, so spellings and defaults do not count.
func restartChanges(ctx context.Context, state, plan *vmModel) []string {
	from, d1 := vmFromModel(ctx, state)
	to, d2 := vmFromModel(ctx, plan)
	if d1.HasError() || d2.HasError() {
		return nil
	}
	validation.DefaultVirtualMachine(from)
	validation.DefaultVirtualMachine(to)
	a, b := from.Spec.Template.Spec, to.Spec.Template.Spec
	var out []string
	if !proto.Equal(a.Domain.Cpu, b.Domain.Cpu) {
		out = append(out, "cpu")
	}
	if !proto.Equal(a.Domain.Memory, b.Domain.Memory) {
		out = append(out, "memory")
	}
	if !equalDisks(a, b) {
		out = append(out, "disk")
	}
	if !proto.Equal(a.Domain.Firmware, b.Domain.Firmware) {
		out = append(out, "boot")
	}
	if !equalInterfaces(a, b) {
		out = append(out, "interface")
	}
	if !equalStringMaps(a.NodeSelector, b.NodeSelector) {
		out = append(out, "node_selector")
	}
	return out
}

func equalDisks(a, b *apiv1.VirtualMachineInstanceSpec) bool {
	if len(a.Volumes) != len(b.Volumes) || len(a.Domain.Devices.Disks) != len(b.Domain.Devices.Disks) {
		return false
	}
	for i := range a.Volumes {
		if !proto.Equal(a.Volumes[i], b.Volumes[i]) {
			return false
		}
	}
	for i := range a.Domain.Devices.Disks {
		if !proto.Equal(a.Domain.Devices.Disks[i], b.Domain.Devices.Disks[i]) {
			return false
		}
	}
	return true
}

func equalInterfaces(a, b *apiv1.VirtualMachineInstanceSpec) bool {
	if len(a.Domain.Devices.Interfaces) != len(b.Domain.Devices.Interfaces) {
		return false
	}
	for i := range a.Domain.Devices.Interfaces {
		if !proto.Equal(a.Domain.Devices.Interfaces[i], b.Domain.Devices.Interfaces[i]) {
			return false
		}
	}
	return true
}

func equalStringMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func (r *vmResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan vmResourceModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() || !r.ready(&resp.Diagnostics, "create a virtual machine") {
		return
	}
	timeout, d := plan.Timeouts.Create(ctx, defaultTimeout)
	resp.Diagnostics.Append(d...)
	if resp.Diagnostics.HasError() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	want, d := vmFromModel(ctx, &plan.vmModel)
	resp.Diagnostics.Append(d...)
	if resp.Diagnostics.HasError() {
		return
	}
	ns, name := want.Metadata.Namespace, want.Metadata.Name
	id := vmID(ns, name)
	created, err := r.data.client.VMs.Create(ctx, &apiv1.CreateVirtualMachineRequest{Vm: want})
	if err != nil {
		r.addError(&resp.Diagnostics, err, "create virtual machine "+id)
		return
	}
	tflog.Info(ctx, "virtual machine created", map[string]any{"vm": id, "uid": created.GetMetadata().GetUid()})

	// Save the VM before waiting: if the wait fails or Terraform is
	// interrupted, the resource is tainted and replaced by the next apply
	// rather than forgotten (and then refused as "already exists").
	r.setState(ctx, &resp.State, &resp.Diagnostics, created, nil, &plan)
	if resp.Diagnostics.HasError() {
		return
	}

	target := waitTarget{strategy: runStrategyOf(created.GetSpec()), generation: created.GetMetadata().GetGeneration()}
	vm, vmi, err := waitVM(ctx, r.data.client, ns, name, func(vm *apiv1.VirtualMachine, vmi *apiv1.VirtualMachineInstance) verdict {
		return judgeVM(target, vm, vmi)
	})
	if vm != nil {
		r.setState(ctx, &resp.State, &resp.Diagnostics, vm, vmi, &plan)
	}
	if err != nil {
		r.addWaitError(&resp.Diagnostics, err, id, target, timeout, "create")
	}
}

func (r *vmResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state vmResourceModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if r.data != nil && len(r.data.unknown) > 0 && req.ClientCapabilities.DeferralAllowed {
		resp.Deferred = &resource.Deferred{Reason: resource.DeferredReasonProviderConfigUnknown}
		return
	}
	if !r.ready(&resp.Diagnostics, "read virtual machine "+state.ID.ValueString()) {
		return
	}
	ns, name := state.Namespace.ValueString(), state.Name.ValueString()
	id := vmID(ns, name)
	// One read of the VM and one of its instance: refresh never waits, so
	// plans stay fast however many VMs there are.
	vm, vmi, err := getVM(ctx, r.data.client, ns, name)
	switch {
	case status.Code(err) == codes.NotFound:
		// Only a definite NotFound drops the VM; an unreachable agent is
		// an error, never a reason to plan a second VM.
		tflog.Warn(ctx, "virtual machine deleted outside Terraform; removing it from the state", map[string]any{"vm": id})
		resp.State.RemoveResource(ctx)
		return
	case err != nil:
		r.addError(&resp.Diagnostics, err, "read virtual machine "+id)
		return
	}
	if uid := state.UID.ValueString(); uid != "" && uid != vm.GetMetadata().GetUid() {
		// Same name, different VM: ours was deleted. Adopting the new one
		// would let this configuration change or destroy a VM it never
		// created.
		resp.Diagnostics.AddWarning("Virtual machine "+id+" was replaced outside Terraform",
			fmt.Sprintf("The VM Terraform created (uid %s) is gone and another VM of the same name (uid %s) exists. "+
				"Terraform stops tracking it; to manage the new VM, import it: terraform import <address> %s",
				uid, vm.GetMetadata().GetUid(), id))
		resp.State.RemoveResource(ctx)
		return
	}
	if state.UpdatePolicy.IsNull() {
		state.UpdatePolicy = types.StringValue(defaultUpdatePolicy) // after import
	}
	r.setState(ctx, &resp.State, &resp.Diagnostics, vm, vmi, &state)
}

func (r *vmResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, state vmResourceModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() || !r.ready(&resp.Diagnostics, "update a virtual machine") {
		return
	}
	timeout, d := plan.Timeouts.Update(ctx, defaultTimeout)
	resp.Diagnostics.Append(d...)
	if resp.Diagnostics.HasError() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	want, d := vmFromModel(ctx, &plan.vmModel)
	resp.Diagnostics.Append(d...)
	if resp.Diagnostics.HasError() {
		return
	}
	ns, name := want.Metadata.Namespace, want.Metadata.Name
	id := vmID(ns, name)
	c := r.data.client
	key := &apiv1.ObjectKey{Namespace: ns, Name: name}

	// Compare-and-swap: the VM controller writes the status concurrently,
	// so a conflict is normal. Each attempt re-reads and re-applies the
	// plan onto what is stored.
	var vm *apiv1.VirtualMachine
	for attempt := 1; ; attempt++ {
		cur, err := c.VMs.Get(ctx, &apiv1.GetVirtualMachineRequest{Key: key})
		if err != nil {
			r.addError(&resp.Diagnostics, err, "read virtual machine "+id+" before updating it")
			return
		}
		if uid := state.UID.ValueString(); uid != "" && cur.GetMetadata().GetUid() != uid {
			resp.Diagnostics.AddError("Virtual machine "+id+" was replaced outside Terraform",
				fmt.Sprintf("The VM Terraform manages (uid %s) was deleted and another VM of the same name (uid %s) exists; "+
					"Terraform does not update a VM it did not create. Refresh to drop the old one from the state.",
					uid, cur.GetMetadata().GetUid()))
			return
		}
		next := mergeVM(cur, want)
		if proto.Equal(next, cur) {
			vm = cur
			break
		}
		vm, err = c.VMs.Update(ctx, &apiv1.UpdateVirtualMachineRequest{Vm: next})
		if status.Code(err) == codes.Aborted && attempt < maxConflictRetries {
			tflog.Debug(ctx, "update conflicted with another writer; retrying", map[string]any{"vm": id, "attempt": attempt})
			continue
		}
		if err != nil {
			r.addError(&resp.Diagnostics, err, "update virtual machine "+id)
			return
		}
		tflog.Info(ctx, "virtual machine updated", map[string]any{"vm": id, "generation": vm.GetMetadata().GetGeneration()})
		break
	}
	// The spec is stored: record it before waiting, so a failed wait does
	// not make the next plan repeat the update.
	r.setState(ctx, &resp.State, &resp.Diagnostics, vm, nil, &plan)
	if resp.Diagnostics.HasError() {
		return
	}

	// Let the controller act on the change; only then do its conditions
	// (RestartRequired) describe the new spec.
	strategy := runStrategyOf(vm.GetSpec())
	gen := vm.GetMetadata().GetGeneration()
	vm, vmi, err := waitVM(ctx, c, ns, name, func(vm *apiv1.VirtualMachine, vmi *apiv1.VirtualMachineInstance) verdict {
		st := vm.GetStatus()
		return verdict{done: st.GetDesiredGeneration() >= gen && st.GetPrintableStatus() != "", state: describe(vm, vmi)}
	})
	if err != nil {
		r.addWaitError(&resp.Diagnostics, err, id, waitTarget{strategy: strategy, generation: gen}, timeout, "update")
		return
	}

	target := waitTarget{strategy: strategy, generation: gen}
	restartRequired := apiv1.FindCondition(vm.GetStatus().GetConditions(), apiv1.ConditionRestartRequired).GetStatus() == apiv1.ConditionTrue
	if restartRequired && vmi != nil {
		switch {
		case plan.UpdatePolicy.ValueString() == updatePolicyRestart &&
			(strategy == apiv1.RunStrategyAlways || strategy == apiv1.RunStrategyRerunOnFailure || strategy == apiv1.RunStrategyManual):
			if err := r.restart(ctx, key, id); err != nil {
				r.addError(&resp.Diagnostics, err, "restart virtual machine "+id+" to apply the change")
				return
			}
			target.notUID = vmi.GetMetadata().GetUid()
			if strategy == apiv1.RunStrategyManual {
				// A Manual VM that was running runs again after the restart.
				target.strategy = apiv1.RunStrategyAlways
			}
		default:
			tflog.Info(ctx, "virtual machine needs a restart to apply the change; not restarting it",
				map[string]any{"vm": id, "update_policy": plan.UpdatePolicy.ValueString(), "run_strategy": strategy})
		}
	}

	vm, vmi, err = waitVM(ctx, c, ns, name, func(vm *apiv1.VirtualMachine, vmi *apiv1.VirtualMachineInstance) verdict {
		return judgeVM(target, vm, vmi)
	})
	if vm != nil {
		r.setState(ctx, &resp.State, &resp.Diagnostics, vm, vmi, &plan)
	}
	if err != nil {
		r.addWaitError(&resp.Diagnostics, err, id, target, timeout, "update")
	}
}

// restart asks for a restart, retrying conflicts with the controller's
// status writes.
func (r *vmResource) restart(ctx context.Context, key *apiv1.ObjectKey, id string) error {
	for attempt := 1; ; attempt++ {
		_, err := r.data.client.VMs.Restart(ctx, &apiv1.RestartVirtualMachineRequest{Key: key})
		if status.Code(err) == codes.Aborted && attempt < maxConflictRetries {
			continue
		}
		if err == nil {
			tflog.Info(ctx, "virtual machine restart requested to apply a change", map[string]any{"vm": id})
		}
		return err
	}
}

func (r *vmResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state vmResourceModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() || !r.ready(&resp.Diagnostics, "delete a virtual machine") {
		return
	}
	timeout, d := state.Timeouts.Delete(ctx, defaultTimeout)
	resp.Diagnostics.Append(d...)
	if resp.Diagnostics.HasError() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ns, name := state.Namespace.ValueString(), state.Name.ValueString()
	id := vmID(ns, name)
	// The uid precondition keeps destroy from deleting a VM of the same
	// name that someone created after ours was deleted.
	_, err := r.data.client.VMs.Delete(ctx, &apiv1.DeleteVirtualMachineRequest{
		Key:     &apiv1.ObjectKey{Namespace: ns, Name: name},
		Options: &apiv1.DeleteOptions{Uid: state.UID.ValueString()},
	})
	switch {
	case status.Code(err) == codes.NotFound:
		return
	case status.Code(err) == codes.FailedPrecondition && state.UID.ValueString() != "":
		resp.Diagnostics.AddWarning("Virtual machine "+id+" was replaced outside Terraform",
			"The VM Terraform created is already gone; the VM now named "+id+" was created by someone else and was left alone.")
		return
	case err != nil:
		r.addError(&resp.Diagnostics, err, "delete virtual machine "+id)
		return
	}
	tflog.Info(ctx, "virtual machine deletion requested", map[string]any{"vm": id})
	if err := waitGone(ctx, r.data.client, ns, name); err != nil {
		if errors.Is(err, errWaitTimeout) {
			resp.Diagnostics.AddError("Timed out deleting virtual machine "+id,
				fmt.Sprintf("The VM was still there after %s: %s. Its guest gets termination_grace_period seconds "+
					"to shut down before it is killed; a node that stopped answering holds its instances until it "+
					"is fenced (docs/failover.md). Raise timeouts.delete, or lower termination_grace_period.",
					timeout, strings.TrimPrefix(err.Error(), errWaitTimeout.Error()+": ")))
			return
		}
		r.addError(&resp.Diagnostics, err, "wait for virtual machine "+id+" to be deleted")
	}
}

func (r *vmResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	ns, name, err := parseVMID(req.ID)
	if err != nil {
		resp.Diagnostics.AddError("Invalid import ID",
			"Import a virtual machine by namespace/name (default/web), or by name alone for the default namespace: "+err.Error())
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), vmID(ns, name))...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("namespace"), ns)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("name"), name)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("update_policy"), defaultUpdatePolicy)...)
}

// setState writes the VM as state, keeping the provider-only settings of
// prior (the plan or the previous state).
func (r *vmResource) setState(ctx context.Context, st stateSetter, diags *diag.Diagnostics, vm *apiv1.VirtualMachine, vmi *apiv1.VirtualMachineInstance, prior *vmResourceModel) {
	m, d := vmToModel(ctx, vm, vmi, readOptions{prior: &prior.vmModel})
	diags.Append(d...)
	if d.HasError() {
		return
	}
	out := vmResourceModel{vmModel: m, UpdatePolicy: prior.UpdatePolicy, Timeouts: prior.Timeouts}
	if out.UpdatePolicy.IsNull() || out.UpdatePolicy.IsUnknown() {
		out.UpdatePolicy = types.StringValue(defaultUpdatePolicy)
	}
	diags.Append(st.Set(ctx, &out)...)
}

// stateSetter is what resp.State offers to setState.
type stateSetter interface {
	Set(ctx context.Context, val any) diag.Diagnostics
}

// addError reports a failed agent call. Validation errors are attached to
// the attributes that caused them, refusals carry the agent's message.
func (r *vmResource) addError(diags *diag.Diagnostics, err error, what string) {
	addVMError(diags, err, r.data.endpoint, what)
}

func addVMError(diags *diag.Diagnostics, err error, endpoint, what string) {
	st := status.Convert(err)
	switch st.Code() {
	case codes.InvalidArgument:
		violations := validation.FieldViolations(err)
		if len(violations) == 0 {
			diags.AddError("virtplane rejected the virtual machine", fmt.Sprintf("Cannot %s: %s", what, st.Message()))
			return
		}
		sort.SliceStable(violations, func(i, j int) bool { return violations[i].GetField() < violations[j].GetField() })
		for _, v := range violations {
			detail := fmt.Sprintf("Cannot %s: the agent rejected %s: %s", what, v.GetField(), v.GetDescription())
			if p, ok := attributePath(v.GetField()); ok {
				diags.AddAttributeError(p, "Invalid "+lastStep(p), detail)
			} else {
				diags.AddError("virtplane rejected the virtual machine", detail)
			}
		}
	case codes.AlreadyExists:
		diags.AddAttributeError(path.Root("name"), "Virtual machine already exists",
			fmt.Sprintf("Cannot %s: a VM of that name exists already (%s). To manage it with Terraform, import it "+
				"(terraform import <address> namespace/name, or an import block); otherwise choose another name.", what, st.Message()))
	case codes.FailedPrecondition:
		diags.AddError("virtplane refused the request", fmt.Sprintf("Cannot %s: %s", what, st.Message()))
	case codes.NotFound:
		diags.AddError("Virtual machine not found",
			fmt.Sprintf("Cannot %s: it no longer exists (%s); it was deleted outside Terraform. Refresh, then apply to re-create it.", what, st.Message()))
	default:
		diags.AddError(apiError(err, endpoint, what))
	}
}

// addWaitError explains why a wait ended without the target state.
func (r *vmResource) addWaitError(diags *diag.Diagnostics, err error, id string, t waitTarget, timeout time.Duration, op string) {
	want := targetDescription(t)
	switch {
	case errors.Is(err, errWaitTimeout):
		diags.AddError("Timed out waiting for virtual machine "+id,
			fmt.Sprintf("Waited %s for %s %s; %s. Raise timeouts.%s if the guest needs longer.",
				timeout, id, want, strings.TrimPrefix(err.Error(), errWaitTimeout.Error()+": "), op))
	case status.Code(err) == codes.NotFound:
		diags.AddError("Virtual machine "+id+" disappeared",
			"The VM was deleted by someone else while Terraform waited for it "+want+".")
	case status.Code(err) != codes.Unknown:
		r.addError(diags, err, "wait for virtual machine "+id+" "+want)
	default:
		diags.AddError("Virtual machine "+id+" cannot reach its run strategy's state",
			fmt.Sprintf("Waiting for %s %s stopped early: %s.", id, want, err))
	}
}
