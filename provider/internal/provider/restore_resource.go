package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// The virtplane_virtual_machine_restore resource: KubeVirt's
// VirtualMachineRestore, an event rather than a setting. Creating it
// restores the VM; destroying it deletes only the record.

var (
	_ resource.Resource                = (*restoreResource)(nil)
	_ resource.ResourceWithConfigure   = (*restoreResource)(nil)
	_ resource.ResourceWithImportState = (*restoreResource)(nil)
)

var restoreKind = objectKind{noun: "virtual machine restore", title: "Virtual machine restore", one: "a restore",
	short: "restore", logKey: "restore", importID: "namespace/name", attribute: restoreAttributePath}

// NewRestoreResource returns the virtplane_virtual_machine_restore resource.
func NewRestoreResource() resource.Resource {
	return &restoreResource{configuredResource{kind: restoreKind}}
}

type restoreResource struct {
	configuredResource
}

type restoreModel struct {
	ID                    types.String   `tfsdk:"id"`
	Namespace             types.String   `tfsdk:"namespace"`
	Name                  types.String   `tfsdk:"name"`
	VirtualMachine        types.String   `tfsdk:"virtual_machine"`
	Snapshot              types.String   `tfsdk:"snapshot"`
	TargetReadinessPolicy types.String   `tfsdk:"target_readiness_policy"`
	UID                   types.String   `tfsdk:"uid"`
	Phase                 types.String   `tfsdk:"phase"`
	Complete              types.Bool     `tfsdk:"complete"`
	RestoreTime           types.String   `tfsdk:"restore_time"`
	RestoredVolumes       types.List     `tfsdk:"restored_volumes"`
	Timeouts              timeouts.Value `tfsdk:"timeouts"`
}

func (r *restoreResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_virtual_machine_restore"
}

func (r *restoreResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	replace := []planmodifier.String{stringplanmodifier.RequiresReplace()}
	keep := []planmodifier.String{stringplanmodifier.UseStateForUnknown()}
	resp.Schema = schema.Schema{
		Description: "Restores a virtual machine from a snapshot: KubeVirt's VirtualMachineRestore. The restore is an " +
			"event, as KubeVirt's object is: creating this resource restores the VM once (its spec and the data of its " +
			"persistent volumes become the snapshot's) and destroying it deletes only the record; the VM stays " +
			"restored. (An attribute of the VM would restore again, or drift, on every plan.) The VM must be stopped " +
			"(run_strategy Halted) unless target_readiness_policy is StopTarget.",
		MarkdownDescription: "Restores a virtual machine from a snapshot: KubeVirt's `VirtualMachineRestore`.\n\n" +
			"A restore is an **event**, as KubeVirt's object is: creating this resource restores the VM once (its spec " +
			"and the data of its persistent volumes become the snapshot's) and destroying it deletes only the record; " +
			"the VM stays restored. It is a resource of its own rather than an attribute of " +
			"`virtplane_virtual_machine`, which would restore again, or drift, on every plan. To restore again, " +
			"replace it (`terraform apply -replace=...`) or create another.\n\n" +
			"The VM must be **stopped** (`run_strategy = \"Halted\"`), or `target_readiness_policy = \"StopTarget\"` " +
			"stops it. Create waits until the restore is complete; the VM keeps its run strategy, so a VM that " +
			"was stopped for the restore stays stopped until its `run_strategy` says otherwise. A restore that " +
			"fails leaves the VM exactly as it was, is deleted again, and its error is reported. A " +
			"`virtplane_virtual_machine` managing the restored VM sees the snapshot's spec on its next plan and " +
			"plans it back to its configuration: restore into VMs whose configuration matches the snapshot's, " +
			"or start a new VM from a snapshot with `virtplane_virtual_machine`'s `source_snapshot`.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				Computed: true, Description: "`namespace/name`, also the import ID.", PlanModifiers: keep,
			},
			"name": schema.StringAttribute{
				Required:      true,
				Description:   "Name of the restore record, unique in its namespace: a DNS-1123 label. Changing it restores again.",
				Validators:    []validator.String{dnsLabelValidator()},
				PlanModifiers: replace,
			},
			"namespace": schema.StringAttribute{
				Optional:      true,
				Computed:      true,
				Default:       stringdefault.StaticString(apiv1.DefaultNamespace),
				Description:   "Namespace of the restore, its VM and its snapshot. Default `default`. Changing it restores again.",
				Validators:    []validator.String{dnsLabelValidator()},
				PlanModifiers: replace,
			},
			"virtual_machine": schema.StringAttribute{
				Required: true,
				Description: "Name of the VM to restore: the snapshot's own VM, whose volumes are on the snapshot's node. " +
					"Changing it restores again.",
				Validators:    []validator.String{dnsLabelValidator()},
				PlanModifiers: replace,
			},
			"snapshot": schema.StringAttribute{
				Required:      true,
				Description:   "Name of the snapshot to restore, in the same namespace; it must have succeeded. Changing it restores again.",
				Validators:    []validator.String{dnsLabelValidator()},
				PlanModifiers: replace,
			},
			"target_readiness_policy": schema.StringAttribute{
				Optional: true,
				Computed: true,
				Default:  stringdefault.StaticString(apiv1.ReadinessWaitGracePeriod),
				Description: "What happens when the VM runs: `WaitGracePeriod` (default: wait up to 5 minutes for it to be " +
					"stopped, then fail), `StopTarget` (stop it), `FailImmediate` (fail at once) or `WaitEventually` (wait " +
					"until create's timeout). Changing it restores again.",
				Validators:    []validator.String{oneOf(apiv1.ReadinessWaitGracePeriod, apiv1.ReadinessStopTarget, apiv1.ReadinessFailImmediate, apiv1.ReadinessWaitEventually)},
				PlanModifiers: replace,
			},
			"uid": schema.StringAttribute{
				Computed: true, Description: "Unique ID the agent gave the restore.", PlanModifiers: keep,
			},
			"phase": schema.StringAttribute{
				Computed: true, PlanModifiers: keep,
				Description: "`Pending`, `Staging`, `Committing`, `Succeeded` or `Failed`; `Succeeded` once create returns.",
			},
			"complete": schema.BoolAttribute{Computed: true, Description: "Whether the restore is done."},
			"restore_time": schema.StringAttribute{
				Computed: true, Description: "When the restore completed (RFC 3339).", PlanModifiers: keep,
			},
			"restored_volumes": schema.ListAttribute{
				Computed: true, ElementType: types.StringType,
				Description: "The persistent volumes whose data was replaced by the snapshot's.",
			},
		},
		Blocks: map[string]schema.Block{
			"timeouts": timeoutsBlock(ctx, "Time limits of create and delete.", timeouts.Opts{
				Create: true, Delete: true,
				CreateDescription: "How long create may wait for the restore to complete, as a Go duration (`30s`, " +
					"`15m`). Default `10m`.",
				DeleteDescription: "How long destroy may wait for the record to be gone. Default `10m`.",
			}),
		},
	}
}

func restoreFromModel(_ context.Context, m *restoreModel) (*apiv1.VirtualMachineRestore, diag.Diagnostics) {
	return &apiv1.VirtualMachineRestore{
		Metadata: &apiv1.ObjectMeta{Namespace: m.Namespace.ValueString(), Name: m.Name.ValueString()},
		Spec: &apiv1.VirtualMachineRestoreSpec{
			Target:                m.VirtualMachine.ValueString(),
			Snapshot:              m.Snapshot.ValueString(),
			TargetReadinessPolicy: m.TargetReadinessPolicy.ValueString(),
		},
	}, nil
}

// restoreToModel maps a restore to the model, keeping prior's timeouts.
func restoreToModel(o *apiv1.VirtualMachineRestore, prior *restoreModel) (restoreModel, diag.Diagnostics) {
	var diags diag.Diagnostics
	md, spec, st := o.GetMetadata(), o.GetSpec(), o.GetStatus()
	vols := make([]string, 0, len(st.GetRestores()))
	for _, v := range st.GetRestores() {
		vols = append(vols, v.GetVolumeName())
	}
	return restoreModel{
		ID:                    types.StringValue(namespacedID(md.GetNamespace(), md.GetName())),
		Namespace:             types.StringValue(md.GetNamespace()),
		Name:                  types.StringValue(md.GetName()),
		VirtualMachine:        types.StringValue(spec.GetTarget()),
		Snapshot:              types.StringValue(spec.GetSnapshot()),
		TargetReadinessPolicy: types.StringValue(orDefault(spec.GetTargetReadinessPolicy(), apiv1.ReadinessWaitGracePeriod)),
		UID:                   types.StringValue(md.GetUid()),
		Phase:                 optString(st.GetPhase()),
		Complete:              types.BoolValue(st.GetComplete()),
		RestoreTime:           optTime(st.GetRestoreTime()),
		RestoredVolumes:       stringList(vols, &diags),
		Timeouts:              prior.Timeouts,
	}, diags
}

// restoreAttributePath maps a field of a rejected restore to its attribute.
func restoreAttributePath(field string) (path.Path, bool) {
	switch field {
	case "metadata.name":
		return path.Root("name"), true
	case "metadata.namespace":
		return path.Root("namespace"), true
	case "spec.target":
		return path.Root("virtual_machine"), true
	case "spec.snapshot":
		return path.Root("snapshot"), true
	case "spec.target_readiness_policy":
		return path.Root("target_readiness_policy"), true
	}
	return path.Empty(), false
}

func (r *restoreResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	ns, name, err := parseNamespacedID(req.ID)
	if err != nil {
		resp.Diagnostics.AddError("Invalid import ID",
			"Import a virtual machine restore by namespace/name, or by name alone for the default namespace: "+err.Error())
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), namespacedID(ns, name))...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("namespace"), ns)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("name"), name)...)
}

func (r *restoreResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan restoreModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() || !r.ready(&resp.Diagnostics, "restore a virtual machine") {
		return
	}
	want, timeout, ok := planned(ctx, &plan, restoreFromModel, plan.Timeouts.Create, defaultTimeout, &resp.Diagnostics)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	key := &apiv1.ObjectKey{Namespace: want.Metadata.Namespace, Name: want.Metadata.Name}
	id := namespacedID(key.Namespace, key.Name)
	c := r.data.client
	created, err := c.Restores.Create(ctx, &apiv1.CreateRestoreRequest{Restore: want})
	if err != nil {
		r.addError(&resp.Diagnostics, err, "create virtual machine restore "+id)
		return
	}
	uid := created.GetMetadata().GetUid()
	tflog.Info(ctx, "virtual machine restore created", map[string]any{"restore": id, "uid": uid, "vm": want.Spec.Target})
	r.setState(ctx, &resp.State, &resp.Diagnostics, created, &plan)
	if resp.Diagnostics.HasError() {
		return
	}
	o, err := waitNamed(ctx, restoreOps(c), "virtual machine restore "+id, key, judgeRestore)
	if err == nil {
		r.setState(ctx, &resp.State, &resp.Diagnostics, o, &plan)
		return
	}
	r.addWaitFailure(&resp.Diagnostics, err, id, waitFailure{
		want: "to restore virtual machine " + want.Spec.Target + " from snapshot " + want.Spec.Snapshot,
		slow: "the copy of the volumes or the VM's shutdown needs", stuck: "failed",
	}, timeout, "create")
	// A failed restore left the VM as it was; its record goes too, so that
	// the next apply tries again. A restore past its commit point finishes
	// before its record goes: the VM is never left half restored.
	dctx, dcancel := context.WithTimeout(context.WithoutCancel(ctx), defaultTimeout)
	defer dcancel()
	replaced, derr := deleteNamed(dctx, restoreOps(c), "virtual machine restore", key, uid, describeRestore)
	if derr != nil {
		r.addDeleteFailure(&resp.Diagnostics, derr, false, id, defaultTimeout, "The node drops the copies it staged first")
		return
	}
	if !replaced {
		tflog.Info(ctx, "failed virtual machine restore deleted", map[string]any{"restore": id})
	}
	resp.State.RemoveResource(ctx)
}

func (r *restoreResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state restoreModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if !r.readyToRefresh(req, resp, "read virtual machine restore "+state.ID.ValueString()) {
		return
	}
	ns, name := state.Namespace.ValueString(), state.Name.ValueString()
	o, err := r.data.client.Restores.Get(ctx, &apiv1.GetRestoreRequest{Key: &apiv1.ObjectKey{Namespace: ns, Name: name}})
	if !r.stillManaged(ctx, resp, namespacedID(ns, name), state.UID.ValueString(), o.GetMetadata().GetUid(), err) {
		return
	}
	r.setState(ctx, &resp.State, &resp.Diagnostics, o, &state)
}

// Update only ever changes the timeouts: every argument replaces the
// restore.
func (r *restoreResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, state restoreModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	state.Timeouts = plan.Timeouts
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

func (r *restoreResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state restoreModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() || !r.ready(&resp.Diagnostics, "delete a virtual machine restore") {
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
	replaced, err := deleteNamed(ctx, restoreOps(r.data.client), "virtual machine restore",
		&apiv1.ObjectKey{Namespace: ns, Name: name}, state.UID.ValueString(), describeRestore)
	r.addDeleteFailure(&resp.Diagnostics, err, replaced, namespacedID(ns, name), timeout,
		"A restore past its commit point finishes first")
}

func (r *restoreResource) setState(ctx context.Context, st stateSetter, diags *diag.Diagnostics, o *apiv1.VirtualMachineRestore, prior *restoreModel) {
	m, d := restoreToModel(o, prior)
	diags.Append(d...)
	if d.HasError() {
		return
	}
	diags.Append(st.Set(ctx, &m)...)
}
