package provider

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework-validators/objectvalidator"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
)

// The virtplane_virtual_machine_replica_set resource: KubeVirt's
// VirtualMachineInstanceReplicaSet. This file has the type, its schema,
// checks and plan; replicaset_crud.go create, read, update and delete;
// replicaset_wait.go the waits; replicaset_convert.go the model.

var (
	_ resource.Resource                   = (*replicaSetResource)(nil)
	_ resource.ResourceWithConfigure      = (*replicaSetResource)(nil)
	_ resource.ResourceWithImportState    = (*replicaSetResource)(nil)
	_ resource.ResourceWithModifyPlan     = (*replicaSetResource)(nil)
	_ resource.ResourceWithValidateConfig = (*replicaSetResource)(nil)
)

var replicaSetKind = objectKind{noun: "replica set", title: "Replica set", one: "a replica set", short: "replica set",
	logKey: "replica_set", importID: "namespace/name", attribute: replicaSetAttributePath}

// NewReplicaSetResource returns the virtplane_virtual_machine_replica_set
// resource.
func NewReplicaSetResource() resource.Resource {
	return &replicaSetResource{configuredResource{kind: replicaSetKind}}
}

type replicaSetResource struct {
	configuredResource
}

func (r *replicaSetResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_virtual_machine_replica_set"
}

// replicaSetKindSchema words the attributes a replica set shares with a
// pool.
var replicaSetKindSchema = replicaKindSchema{
	noun: "replica set", replicas: "instances", maxName: apiv1.MaxReplicaSetNameLen,
	nameNote: fmt.Sprintf("its instances are named `<name>-<%d random characters>`", apiv1.ReplicaSetSuffixLen),
	labels:   path.Root("template").AtName("labels"),
}

// replicaSetTemplateSchema is the shared attributes and blocks as a
// replica set's template has them.
var replicaSetTemplateSchema = specSchema{
	template: true,
	labels: "Labels of each instance, at least one; `selector` defaults to them. Keys are qualified names " +
		"(`app`, `example.com/tier`), values at most 63 characters.",
	annotations: "Annotations of each instance; node agents and tools read them.",
}

func (r *replicaSetResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	attrs := replicaAttributes(replicaSetKindSchema)
	attrs["status"] = schema.SingleNestedAttribute{
		Computed:    true,
		Description: "What the replica set's controller last reported, read on every refresh (never waited for).",
		Attributes: replicaStatusAttributes(replicaSetKindSchema, "instance_names",
			"Names of the replica set's instances that are not ending, by name. A failed instance is replaced by "+
				"one of another name."),
	}
	resp.Schema = schema.Schema{
		Description: "Interchangeable virtual machine instances made from one template: KubeVirt's " +
			"VirtualMachineInstanceReplicaSet. Its instances have no VM: they are named <name>-<5 random " +
			"characters>, and a failed one is replaced by a new one. Create and update wait until the replica " +
			"set has replicas ready instances, and fail early with the reason when they cannot run.",
		MarkdownDescription: "Interchangeable virtual machine instances made from one template: KubeVirt's " +
			"`VirtualMachineInstanceReplicaSet`. Its instances have no VM: they are named `<name>-<5 random " +
			"characters>`, and a failed one is replaced by a new one. Create and update wait until the replica " +
			"set has `replicas` ready instances, and fail early with the reason when they cannot run.",
		Attributes: attrs,
		Blocks: map[string]schema.Block{
			"template": schema.SingleNestedBlock{
				Description: "What each instance is made from: the instance settings of `virtplane_virtual_machine`. " +
					"Required. No `persistent` disks (an instance has no VM to keep one for: use " +
					"`virtplane_virtual_machine_pool`) and no `mac_address` (each instance gets its own). A change " +
					"applies to instances made from then on; running ones keep the template they were made from " +
					"(KubeVirt's behaviour: scale to 0 and back to replace them).",
				Attributes: instanceSpecAttributes(replicaSetTemplateSchema),
				Blocks:     instanceSpecBlocks(replicaSetTemplateSchema),
				Validators: []validator.Object{objectvalidator.IsRequired()},
			},
			"timeouts": timeoutsBlock(ctx, "Time limits of create, update and delete.", timeouts.Opts{
				Create: true, Update: true, Delete: true,
				CreateDescription: "How long create may wait for the instances, as a Go duration (`30s`, `15m`, `1h`). " +
					"Default `10m`.",
				UpdateDescription: "How long update may wait for the instances. Default `10m`.",
				DeleteDescription: "How long destroy may wait for the replica set and its instances to be gone. Default `10m`.",
			}),
		},
	}
}

func (r *replicaSetResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	importReplicas(ctx, req, resp, "a replica set")
}

// ValidateConfig checks what single attributes cannot: the template as
// the VM resource checks its settings, no persistent disks, and the
// selector against the template's labels.
func (r *replicaSetResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	base := path.Root("template")
	var present types.Object
	if d := req.Config.GetAttribute(ctx, base, &present); d.HasError() || present.IsNull() || present.IsUnknown() {
		return // IsRequired reports a missing block
	}
	validateInstanceSpec(ctx, req.Config, base, &resp.Diagnostics)
	validateSelector(ctx, req.Config, replicaSetKindSchema.labels, &resp.Diagnostics)
	var disks []diskModel
	if d := req.Config.GetAttribute(ctx, base.AtName("disk"), &disks); d.HasError() {
		return // unknown blocks: the API checks at apply
	}
	for i, d := range disks {
		if d.Persistent != nil {
			resp.Diagnostics.AddAttributeError(base.AtName("disk").AtListIndex(i).AtName("persistent"), "Persistent disk in a replica set",
				"A persistent disk belongs to a VM (the node keeps it under the VM's uid and deletes it with the VM), "+
					"and the instances of a replica set have none. Use virtplane_virtual_machine_pool for replicas "+
					"with disks of their own, or an image disk here.")
		}
	}
}

// ModifyPlan keeps the status of a plan that changes nothing, and warns
// at plan time that a template change leaves the running instances alone.
func (r *replicaSetResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() || req.State.Raw.IsNull() {
		return // destroy or create
	}
	if keepComputedWhenUnchanged(ctx, req, resp, path.Root("status")) {
		return
	}
	if !knownAt(req.Plan.Raw, "template") {
		return
	}
	var plan, state replicaSetResourceModel
	if d := req.Plan.Get(ctx, &plan); d.HasError() {
		return
	}
	if d := req.State.Get(ctx, &state); d.HasError() {
		return
	}
	from, d1 := replicaSetFromModel(ctx, &state.replicaSetModel)
	to, d2 := replicaSetFromModel(ctx, &plan.replicaSetModel)
	if d1.HasError() || d2.HasError() {
		return
	}
	validation.DefaultReplicaSet(from)
	validation.DefaultReplicaSet(to)
	if proto.Equal(from.Spec.Template, to.Spec.Template) {
		return
	}
	id := namespacedID(state.Namespace.ValueString(), state.Name.ValueString())
	resp.Diagnostics.AddWarning("Running instances of "+id+" keep their template",
		"template changes, which applies to the instances replica set "+id+" makes from now on; the instances "+
			"that run keep the template they were made from (KubeVirt's behaviour). To replace them, scale to 0 "+
			"and back, or delete them (virtplane-agent delete vmi).")
}
