package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// Create, read, update and delete of virtplane_virtual_machine_restore.

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
	// A failed restore left the VM as it was; its record goes too, so that
	// the next apply tries again. A restore past its commit point finishes
	// before its record goes: the VM is never left half restored.
	createNamed(ctx, &r.configuredResource, resp, restoreOps(r.data.client), want,
		func(o *apiv1.VirtualMachineRestore) { r.setState(ctx, &resp.State, &resp.Diagnostics, o, &plan) },
		waitFailure{
			want: "to restore virtual machine " + want.Spec.Target + " from snapshot " + want.Spec.Snapshot,
			slow: "the copy of the volumes or the VM's shutdown needs", stuck: "failed",
		}, timeout, "The node drops the copies it staged first", map[string]any{"vm": want.Spec.Target})
}

func (r *restoreResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state restoreModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	readNamed(ctx, &r.configuredResource, req, resp, restoreOps, state.ID.ValueString(),
		state.Namespace.ValueString(), state.Name.ValueString(), state.UID.ValueString(),
		func(o *apiv1.VirtualMachineRestore) { r.setState(ctx, &resp.State, &resp.Diagnostics, o, &state) })
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
	if resp.Diagnostics.HasError() {
		return
	}
	deleteNamedObject(ctx, &r.configuredResource, resp, restoreOps, state.Timeouts.Delete,
		state.Namespace.ValueString(), state.Name.ValueString(), state.UID.ValueString(),
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
