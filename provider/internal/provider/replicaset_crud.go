package provider

import (
	"context"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// Create, read, update and delete of the
// virtplane_virtual_machine_replica_set resource, and the waits of create
// and update (replicaset_wait.go). They go as the pool's do
// (pool_crud.go).

func (r *replicaSetResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan replicaSetResourceModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() || !r.ready(&resp.Diagnostics, "create a replica set") {
		return
	}
	want, timeout, ok := planned(ctx, &plan.replicaSetModel, replicaSetFromModel, plan.Timeouts.Create, defaultTimeout, &resp.Diagnostics)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	id := namespacedID(want.Metadata.Namespace, want.Metadata.Name)
	created, err := r.data.client.ReplicaSets.Create(ctx, &apiv1.CreateReplicaSetRequest{ReplicaSet: want})
	if err != nil {
		r.addError(&resp.Diagnostics, err, "create replica set "+id)
		return
	}
	tflog.Info(ctx, "replica set created", map[string]any{"replica_set": id, "uid": created.GetMetadata().GetUid()})
	// Saved before the wait: a replica set whose instances cannot run is
	// tainted and replaced by the next apply rather than forgotten.
	r.setState(ctx, &resp.State, &resp.Diagnostics, replicaSetView{rs: created}, &plan)
	if resp.Diagnostics.HasError() {
		return
	}
	r.wait(ctx, &resp.State, &resp.Diagnostics, &plan, created, timeout, "create")
}

// wait waits, unless wait_for_ready is false, for replica set rs as
// written to reach its target (judgeReplicaSet), and records what it saw
// last.
func (r *replicaSetResource) wait(ctx context.Context, st stateSetter, diags *diag.Diagnostics, plan *replicaSetResourceModel,
	rs *apiv1.VirtualMachineInstanceReplicaSet, timeout time.Duration, op string) {
	if !plan.WaitForReady.ValueBool() {
		return
	}
	// Instances run until they end; a replica set replaces them.
	t := replicaTarget{generation: rs.GetMetadata().GetGeneration(), ready: true}
	v, err := waitReplicaSet(ctx, r.data.client, rs, func(v replicaSetView) verdict { return judgeReplicaSet(t, v) })
	if v.rs != nil {
		r.setState(ctx, st, diags, v, plan)
	}
	if err != nil {
		r.addWaitFailure(diags, err, namespacedID(rs.GetMetadata().GetNamespace(), rs.GetMetadata().GetName()), waitFailure{
			want: replicaSetTargetDescription(rs), slow: "its instances need", stuck: "cannot get its instances running",
		}, timeout, op)
	}
}

func (r *replicaSetResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state replicaSetResourceModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if !r.readyToRefresh(req, resp, "read replica set "+state.ID.ValueString()) {
		return
	}
	ns, name := state.Namespace.ValueString(), state.Name.ValueString()
	id := namespacedID(ns, name)
	// Two calls, the replica set and its instances; refresh never waits.
	rs, err := r.data.client.ReplicaSets.Get(ctx, &apiv1.GetReplicaSetRequest{Key: &apiv1.ObjectKey{Namespace: ns, Name: name}})
	if !r.stillManaged(ctx, resp, id, state.UID.ValueString(), rs.GetMetadata().GetUid(), err) {
		return
	}
	vmis, err := replicaSetInstances(ctx, r.data.client, rs)
	if err != nil {
		r.addError(&resp.Diagnostics, err, "list the instances of replica set "+id)
		return
	}
	r.setState(ctx, &resp.State, &resp.Diagnostics, replicaSetView{rs: rs, vmis: vmis}, &state)
}

func (r *replicaSetResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, state replicaSetResourceModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() || !r.ready(&resp.Diagnostics, "update a replica set") {
		return
	}
	want, timeout, ok := planned(ctx, &plan.replicaSetModel, replicaSetFromModel, plan.Timeouts.Update, defaultTimeout, &resp.Diagnostics)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ns, name := want.Metadata.Namespace, want.Metadata.Name
	id := namespacedID(ns, name)
	c := r.data.client
	key := &apiv1.ObjectKey{Namespace: ns, Name: name}
	// The replica set controller writes the status concurrently:
	// updateCAS retries the conflicts that causes.
	rs, written, err := updateCAS(tflog.SetField(ctx, "replica_set", id), "replica set "+id, state.UID.ValueString(),
		func(ctx context.Context) (*apiv1.VirtualMachineInstanceReplicaSet, error) {
			return c.ReplicaSets.Get(ctx, &apiv1.GetReplicaSetRequest{Key: key})
		},
		func(cur *apiv1.VirtualMachineInstanceReplicaSet) *apiv1.VirtualMachineInstanceReplicaSet {
			return mergeReplicaSet(cur, want)
		},
		func(ctx context.Context, next *apiv1.VirtualMachineInstanceReplicaSet) (*apiv1.VirtualMachineInstanceReplicaSet, error) {
			return c.ReplicaSets.Update(ctx, &apiv1.UpdateReplicaSetRequest{ReplicaSet: next})
		})
	if addCASError(&resp.Diagnostics, err, r.kind, id, r.addError) {
		return
	}
	if written {
		tflog.Info(ctx, "replica set updated", map[string]any{"replica_set": id, "generation": rs.GetMetadata().GetGeneration()})
	}
	// Recorded before waiting, so a failed wait does not make the next
	// plan repeat the update.
	r.setState(ctx, &resp.State, &resp.Diagnostics, replicaSetView{rs: rs}, &plan)
	if resp.Diagnostics.HasError() {
		return
	}
	r.wait(ctx, &resp.State, &resp.Diagnostics, &plan, rs, timeout, "update")
}

func (r *replicaSetResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state replicaSetResourceModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() || !r.ready(&resp.Diagnostics, "delete a replica set") {
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
	c := r.data.client
	key := &apiv1.ObjectKey{Namespace: ns, Name: name}
	r.deleteReplicas(ctx, &resp.Diagnostics, namespacedID(ns, name), state.UID.ValueString(), timeout,
		func(ctx context.Context, o *apiv1.DeleteOptions) error {
			_, err := c.ReplicaSets.Delete(ctx, &apiv1.DeleteReplicaSetRequest{Key: key, Options: o})
			return err
		},
		func(ctx context.Context) error {
			rs, err := c.ReplicaSets.Get(ctx, &apiv1.GetReplicaSetRequest{Key: key})
			if err != nil {
				return goneWhenNotFound(err)
			}
			_, err = waitReplicaSet(ctx, c, rs, func(v replicaSetView) verdict { return verdict{state: describeReplicaSet(v)} })
			return goneWhenNotFound(err)
		})
}

// setState writes the replica set read (v) as state, keeping the
// provider-only settings of prior (the plan or the previous state).
func (r *replicaSetResource) setState(ctx context.Context, st stateSetter, diags *diag.Diagnostics, v replicaSetView, prior *replicaSetResourceModel) {
	m, d := replicaSetToModel(v.rs, liveInstanceNames(v.vmis), &prior.replicaSetModel, false)
	diags.Append(d...)
	if d.HasError() {
		return
	}
	out := replicaSetResourceModel{replicaSetModel: m, WaitForReady: prior.WaitForReady, Timeouts: prior.Timeouts}
	if out.WaitForReady.IsNull() || out.WaitForReady.IsUnknown() {
		out.WaitForReady = types.BoolValue(true)
	}
	diags.Append(st.Set(ctx, &out)...)
}

// liveInstanceNames are the names of the instances that are not ending
// (neither final nor being deleted), as status.replicas counts them.
func liveInstanceNames(vmis []*apiv1.VirtualMachineInstance) []string {
	out := []string{}
	for _, v := range vmis {
		if v.GetMetadata().GetDeletionTimestamp() == nil && !apiv1.IsFinal(v.GetStatus().GetPhase()) {
			out = append(out, v.GetMetadata().GetName())
		}
	}
	return out
}
