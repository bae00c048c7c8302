package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// Create, read, update and delete of the virtplane_virtual_machine_snapshot
// resource.

func (r *snapshotResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan snapshotResourceModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() || !r.ready(&resp.Diagnostics, "create a virtual machine snapshot") {
		return
	}
	want, timeout, ok := planned(ctx, &plan.snapshotModel, snapshotFromModel, plan.Timeouts.Create, defaultTimeout, &resp.Diagnostics)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// KubeVirt keeps a failed snapshot; a failed Terraform create leaves
	// nothing behind.
	createNamed(ctx, &r.configuredResource, resp, snapshotOps(r.data.client), want,
		func(s *apiv1.VirtualMachineSnapshot) { r.setState(ctx, &resp.State, &resp.Diagnostics, s, &plan) },
		waitFailure{want: "to succeed", slow: "the copy of its volumes needs", stuck: "failed"},
		timeout, "The node removes what it copied first", nil)
}

func (r *snapshotResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state snapshotResourceModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	readNamed(ctx, &r.configuredResource, req, resp, snapshotOps, state.ID.ValueString(),
		state.Namespace.ValueString(), state.Name.ValueString(), state.UID.ValueString(),
		func(s *apiv1.VirtualMachineSnapshot) { r.setState(ctx, &resp.State, &resp.Diagnostics, s, &state) })
}

// Update only ever changes the timeouts: every argument replaces the
// snapshot. It records them with the snapshot as it is now.
func (r *snapshotResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, state snapshotResourceModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() || !r.ready(&resp.Diagnostics, "update a virtual machine snapshot") {
		return
	}
	ns, name := state.Namespace.ValueString(), state.Name.ValueString()
	id := apiv1.Ref(ns, name)
	s, err := snapshotOps(r.data.client).get(ctx, &apiv1.ObjectKey{Namespace: ns, Name: name})
	if err != nil {
		r.addError(&resp.Diagnostics, err, "read virtual machine snapshot "+id)
		return
	}
	if s.GetMetadata().GetUid() != state.UID.ValueString() {
		resp.Diagnostics.AddError("Virtual machine snapshot "+id+" was replaced outside Terraform",
			"The snapshot Terraform created is gone and another of the same name exists. Refresh to drop the old one from the state.")
		return
	}
	r.setState(ctx, &resp.State, &resp.Diagnostics, s, &plan)
}

func (r *snapshotResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state snapshotResourceModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	// The snapshot's controller deletes its content (policy Delete) and
	// waits for the node to remove the data before the snapshot goes: once
	// it is gone, so is the data.
	deleteNamedObject(ctx, &r.configuredResource, resp, snapshotOps, state.Timeouts.Delete,
		state.Namespace.ValueString(), state.Name.ValueString(), state.UID.ValueString(),
		"With deletion_policy Delete the node removes the snapshot's data first")
}

// setState writes the snapshot as state, keeping the timeouts of prior
// (the plan or the previous state).
func (r *snapshotResource) setState(ctx context.Context, st stateSetter, diags *diag.Diagnostics, s *apiv1.VirtualMachineSnapshot, prior *snapshotResourceModel) {
	m, d := snapshotToModel(s, &prior.snapshotModel)
	diags.Append(d...)
	if d.HasError() {
		return
	}
	diags.Append(st.Set(ctx, &snapshotResourceModel{snapshotModel: m, Timeouts: prior.Timeouts})...)
}
