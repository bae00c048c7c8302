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

// Create, read, update and delete of the virtplane_virtual_machine_pool
// resource, and the waits of create and update (pool_wait.go).

func (r *poolResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan poolResourceModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() || !r.ready(&resp.Diagnostics, "create a virtual machine pool") {
		return
	}
	want, timeout, ok := planned(ctx, &plan.poolModel, poolFromModel, plan.Timeouts.Create, defaultTimeout, &resp.Diagnostics)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	id := namespacedID(want.Metadata.Namespace, want.Metadata.Name)
	created, err := r.data.client.Pools.Create(ctx, &apiv1.CreatePoolRequest{Pool: want})
	if err != nil {
		r.addError(&resp.Diagnostics, err, "create virtual machine pool "+id)
		return
	}
	tflog.Info(ctx, "virtual machine pool created", map[string]any{"pool": id, "uid": created.GetMetadata().GetUid()})
	// Saved before the wait: a pool whose VMs cannot run is tainted and
	// replaced by the next apply rather than forgotten.
	r.setState(ctx, &resp.State, &resp.Diagnostics, poolView{pool: created}, &plan)
	if resp.Diagnostics.HasError() {
		return
	}
	r.wait(ctx, &resp.State, &resp.Diagnostics, &plan, created, timeout, "create")
}

// wait waits, unless wait_for_ready is false, for pool p as written to
// reach its target (judgePool), and records what it saw last.
func (r *poolResource) wait(ctx context.Context, st stateSetter, diags *diag.Diagnostics, plan *poolResourceModel,
	p *apiv1.VirtualMachinePool, timeout time.Duration, op string) {
	if !plan.WaitForReady.ValueBool() {
		return
	}
	t := replicaTarget{generation: p.GetMetadata().GetGeneration(), ready: runsReplicas(p.GetSpec().GetVirtualMachineTemplate().GetSpec())}
	v, err := waitPool(ctx, r.data.client, p, func(v poolView) verdict { return judgePool(t, v) })
	if v.pool != nil {
		r.setState(ctx, st, diags, v, plan)
	}
	if err != nil {
		r.addWaitFailure(diags, err, namespacedID(p.GetMetadata().GetNamespace(), p.GetMetadata().GetName()), waitFailure{
			want: poolTargetDescription(t, p), slow: "its VMs need", stuck: "cannot get its VMs running",
		}, timeout, op)
	}
}

func (r *poolResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state poolResourceModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if !r.readyToRefresh(req, resp, "read virtual machine pool "+state.ID.ValueString()) {
		return
	}
	ns, name := state.Namespace.ValueString(), state.Name.ValueString()
	id := namespacedID(ns, name)
	// Two calls, the pool and its VMs; refresh never waits.
	p, err := r.data.client.Pools.Get(ctx, &apiv1.GetPoolRequest{Key: &apiv1.ObjectKey{Namespace: ns, Name: name}})
	if !r.stillManaged(ctx, resp, id, state.UID.ValueString(), p.GetMetadata().GetUid(), err) {
		return
	}
	vms, err := poolVMs(ctx, r.data.client, p)
	if err != nil {
		r.addError(&resp.Diagnostics, err, "list the VMs of virtual machine pool "+id)
		return
	}
	v := poolView{pool: p}
	for _, vm := range vms {
		v.vms = append(v.vms, vmView{vm: vm})
	}
	r.setState(ctx, &resp.State, &resp.Diagnostics, v, &state)
}

func (r *poolResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, state poolResourceModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() || !r.ready(&resp.Diagnostics, "update a virtual machine pool") {
		return
	}
	want, timeout, ok := planned(ctx, &plan.poolModel, poolFromModel, plan.Timeouts.Update, defaultTimeout, &resp.Diagnostics)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ns, name := want.Metadata.Namespace, want.Metadata.Name
	id := namespacedID(ns, name)
	c := r.data.client
	key := &apiv1.ObjectKey{Namespace: ns, Name: name}
	// The pool controller writes the status concurrently: updateCAS
	// retries the conflicts that causes.
	p, written, err := updateCAS(tflog.SetField(ctx, "pool", id), "virtual machine pool "+id, state.UID.ValueString(),
		func(ctx context.Context) (*apiv1.VirtualMachinePool, error) {
			return c.Pools.Get(ctx, &apiv1.GetPoolRequest{Key: key})
		},
		func(cur *apiv1.VirtualMachinePool) *apiv1.VirtualMachinePool { return mergePool(cur, want) },
		func(ctx context.Context, next *apiv1.VirtualMachinePool) (*apiv1.VirtualMachinePool, error) {
			return c.Pools.Update(ctx, &apiv1.UpdatePoolRequest{Pool: next})
		})
	if addCASError(&resp.Diagnostics, err, r.kind, id, r.addError) {
		return
	}
	if written {
		tflog.Info(ctx, "virtual machine pool updated", map[string]any{"pool": id, "generation": p.GetMetadata().GetGeneration()})
	}
	// The spec is stored: record it before waiting, so a failed wait does
	// not make the next plan repeat the update.
	r.setState(ctx, &resp.State, &resp.Diagnostics, poolView{pool: p}, &plan)
	if resp.Diagnostics.HasError() {
		return
	}
	r.wait(ctx, &resp.State, &resp.Diagnostics, &plan, p, timeout, "update")
}

func (r *poolResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state poolResourceModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() || !r.ready(&resp.Diagnostics, "delete a virtual machine pool") {
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
			_, err := c.Pools.Delete(ctx, &apiv1.DeletePoolRequest{Key: key, Options: o})
			return err
		},
		func(ctx context.Context) error {
			p, err := c.Pools.Get(ctx, &apiv1.GetPoolRequest{Key: key})
			if err != nil {
				return goneWhenNotFound(err)
			}
			_, err = waitPool(ctx, c, p, func(v poolView) verdict { return verdict{state: describePool(v)} })
			return goneWhenNotFound(err)
		})
}

// setState writes the pool read (v) as state, keeping the provider-only
// settings of prior (the plan or the previous state).
func (r *poolResource) setState(ctx context.Context, st stateSetter, diags *diag.Diagnostics, v poolView, prior *poolResourceModel) {
	var names []string
	for _, m := range v.vms {
		if m.vm.GetMetadata().GetDeletionTimestamp() == nil {
			names = append(names, m.vm.GetMetadata().GetName())
		}
	}
	m, d := poolToModel(v.pool, names, &prior.poolModel, false)
	diags.Append(d...)
	if d.HasError() {
		return
	}
	out := poolResourceModel{poolModel: m, WaitForReady: prior.WaitForReady, Timeouts: prior.Timeouts}
	if out.WaitForReady.IsNull() || out.WaitForReady.IsUnknown() {
		out.WaitForReady = types.BoolValue(true)
	}
	diags.Append(st.Set(ctx, &out)...)
}
