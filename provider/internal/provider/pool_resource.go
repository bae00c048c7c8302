package provider

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework-validators/objectvalidator"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
)

// The virtplane_virtual_machine_pool resource: KubeVirt's
// VirtualMachinePool. This file has the type, its schema, checks and plan;
// pool_crud.go create, read, update and delete; pool_wait.go the waits;
// pool_convert.go the model.

var (
	_ resource.Resource                   = (*poolResource)(nil)
	_ resource.ResourceWithConfigure      = (*poolResource)(nil)
	_ resource.ResourceWithImportState    = (*poolResource)(nil)
	_ resource.ResourceWithModifyPlan     = (*poolResource)(nil)
	_ resource.ResourceWithValidateConfig = (*poolResource)(nil)
)

var poolKind = objectKind{noun: "virtual machine pool", title: "Virtual machine pool", one: "a pool", short: "pool",
	logKey: "pool", importID: "namespace/name", attribute: poolAttributePath}

// NewPoolResource returns the virtplane_virtual_machine_pool resource.
func NewPoolResource() resource.Resource { return &poolResource{configuredResource{kind: poolKind}} }

type poolResource struct {
	configuredResource
}

func (r *poolResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_virtual_machine_pool"
}

// poolKindSchema words the attributes a pool shares with a replica set.
var poolKindSchema = replicaKindSchema{
	noun: "pool", replicas: "VMs", maxName: apiv1.MaxPoolNameLen,
	nameNote: "its VMs are named `<name>-<ordinal>`",
	labels:   path.Root("virtual_machine_template").AtName("labels"),
}

// poolTemplateSchema is the shared attributes and blocks as a pool's
// virtual_machine_template has them.
var poolTemplateSchema = specSchema{
	template: true,
	labels: "Labels of each VM, at least one; `selector` defaults to them. Keys are qualified names " +
		"(`app`, `example.com/tier`), values at most 63 characters.",
	annotations: "Annotations put on each VM's instance template, so every instance (VMI) carries them; " +
		"node agents and tools read them.",
}

func (r *poolResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	attrs := replicaAttributes(poolKindSchema)
	attrs["max_unavailable"] = schema.StringAttribute{
		Optional: true,
		Computed: true,
		Default:  stringdefault.StaticString(apiv1.DefaultMaxUnavailable),
		Description: "How many VMs a rollout of a template change may restart at once: a whole number from 1 " +
			"(`\"1\"`) or a percentage of `replicas` from `1%` to `100%` (`\"25%\"`, rounded up). Default " +
			"`\"100%\"` (KubeVirt's): every VM at once.",
		Validators: []validator.String{maxUnavailableValidator()},
	}
	attrs["scale_in_order"] = schema.StringAttribute{
		Optional: true,
		Computed: true,
		Default:  stringdefault.StaticString(apiv1.DefaultScaleInOrder),
		Description: "Which VMs go first when `replicas` goes down: `DescendingOrder` (default: the highest " +
			"ordinals, so a pool scaled from 5 to 3 keeps `-0` to `-2`), `AscendingOrder`, `Newest` or `Oldest` " +
			"(by creation time). A removed VM's persistent volumes go with it.",
		Validators: []validator.String{oneOf(apiv1.ScaleInOrders()...)},
	}
	statusAttrs := replicaStatusAttributes(poolKindSchema, "vm_names",
		"Names of the pool's VMs that are not being deleted, by ordinal: `<name>-0`, `<name>-1`, ...")
	statusAttrs["updated_replicas"] = schema.Int64Attribute{
		Computed:    true,
		Description: "VMs on the current template, their instance (if they run) started from it.",
	}
	attrs["status"] = schema.SingleNestedAttribute{
		Computed:    true,
		Description: "What the pool's controller last reported, read on every refresh (never waited for).",
		Attributes:  statusAttrs,
	}
	resp.Schema = schema.Schema{
		Description: "A pool of virtual machines made from one template: KubeVirt's VirtualMachinePool. Its VMs " +
			"are named <name>-0, <name>-1, ... and keep their names and persistent volumes across restarts and " +
			"template changes. Create and update wait until the pool has replicas VMs, ready and on the current " +
			"template, and fail early with the reason when a VM cannot run.",
		MarkdownDescription: "A pool of virtual machines made from one template: KubeVirt's `VirtualMachinePool`. Its " +
			"VMs are named `<name>-0`, `<name>-1`, ... and keep their names and persistent volumes across restarts " +
			"and template changes. Create and update wait until the pool has `replicas` VMs, ready and on the " +
			"current template, and fail early with the reason when a VM cannot run.",
		Attributes: attrs,
		Blocks: map[string]schema.Block{
			"virtual_machine_template": schema.SingleNestedBlock{
				Description: "What each VM is made from: the settings of `virtplane_virtual_machine`, without a " +
					"name. Required. Any change is rolled out to every VM: each running VM restarts on the new " +
					"template, at most `max_unavailable` at a time, and apply waits until all have.",
				Attributes: vmSpecAttributes(poolTemplateSchema),
				Blocks:     instanceSpecBlocks(poolTemplateSchema),
				Validators: []validator.Object{objectvalidator.IsRequired()},
			},
			"timeouts": timeoutsBlock(ctx, "Time limits of create, update and delete.", timeouts.Opts{
				Create: true, Update: true, Delete: true,
				CreateDescription: "How long create may wait for the VMs, as a Go duration (`30s`, `15m`, `1h`). " +
					"Default `10m`.",
				UpdateDescription: "How long update may take, including the rollout of a template change. Default `10m`.",
				DeleteDescription: "How long destroy may wait for the pool and its VMs to be gone. Default `10m`.",
			}),
		},
	}
}

// maxUnavailableValidator accepts what the API does (apiv1.ParseMaxUnavailable).
func maxUnavailableValidator() validator.String {
	return stringCheck{
		describedAs: describedAs(apiv1.ErrMaxUnavailable.Error()),
		check: func(p path.Path, s string, diags *diag.Diagnostics) {
			if _, _, err := apiv1.ParseMaxUnavailable(s); err != nil {
				diags.AddAttributeError(p, "Invalid max_unavailable", fmt.Sprintf("%s %s.", p, err))
			}
		},
	}
}

func (r *poolResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	importReplicas(ctx, req, resp, "a virtual machine pool")
}

// ValidateConfig checks what single attributes cannot: the template as
// the VM resource checks its settings, and the selector against the
// template's labels.
func (r *poolResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	base := path.Root("virtual_machine_template")
	var present types.Object
	if d := req.Config.GetAttribute(ctx, base, &present); d.HasError() || present.IsNull() || present.IsUnknown() {
		return // IsRequired reports a missing block
	}
	validateInstanceSpec(ctx, req.Config, base, &resp.Diagnostics)
	validateSelector(ctx, req.Config, poolKindSchema.labels, &resp.Diagnostics)
}

// ModifyPlan keeps the status of a plan that changes nothing, and warns
// at plan time that a template change restarts the VMs.
func (r *poolResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() || req.State.Raw.IsNull() {
		return // destroy or create
	}
	if keepComputedWhenUnchanged(ctx, req, resp, path.Root("status")) {
		return
	}
	if !knownAt(req.Plan.Raw, "virtual_machine_template") {
		return // apply decides
	}
	var plan, state poolResourceModel
	if d := req.Plan.Get(ctx, &plan); d.HasError() {
		return
	}
	if d := req.State.Get(ctx, &state); d.HasError() {
		return
	}
	from, d1 := poolFromModel(ctx, &state.poolModel)
	to, d2 := poolFromModel(ctx, &plan.poolModel)
	if d1.HasError() || d2.HasError() {
		return
	}
	validation.DefaultPool(from)
	validation.DefaultPool(to)
	if proto.Equal(from.Spec.VirtualMachineTemplate, to.Spec.VirtualMachineTemplate) {
		return
	}
	id := namespacedID(state.Namespace.ValueString(), state.Name.ValueString())
	resp.Diagnostics.AddWarning("Apply rolls a new template out to pool "+id,
		fmt.Sprintf("virtual_machine_template changes, so every VM of %s gets the new template and each running "+
			"VM restarts on it, at most max_unavailable (%s) at a time; apply waits until all have. Persistent "+
			"volumes are kept.", id, plan.MaxUnavailable.ValueString()))
}

// knownAt reports whether the value of the root attribute name is known
// throughout.
func knownAt(v tftypes.Value, name string) bool {
	at, _, err := tftypes.WalkAttributePath(v, tftypes.NewAttributePath().WithAttributeName(name))
	if err != nil {
		return false
	}
	tv, ok := at.(tftypes.Value)
	return ok && tv.IsFullyKnown()
}
