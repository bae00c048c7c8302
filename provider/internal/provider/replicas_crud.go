package provider

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-log/tflog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// Create, read, update and delete of virtplane_virtual_machine_pool and
// virtplane_virtual_machine_replica_set, and the waits of create and
// update. The kinds' calls, models and judges are their replicaOps
// (pool_crud.go, replicaset_crud.go).

func (r *replicaResource[T, V, M]) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	k := r.kind
	var plan M
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() || !r.ready(&resp.Diagnostics, "create a "+k.noun) {
		return
	}
	want, timeout, ok := planned(ctx, &plan, r.ops.fromModel, r.ops.settings(&plan).timeouts.Create, defaultTimeout, &resp.Diagnostics)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	id := apiv1.Ref(want.GetMetadata().GetNamespace(), want.GetMetadata().GetName())
	created, err := r.ops.create(ctx, r.data.client, want)
	if err != nil {
		r.addError(&resp.Diagnostics, err, "create "+k.noun+" "+id)
		return
	}
	tflog.Info(ctx, k.noun+" created", map[string]any{k.logKey: id, "uid": created.GetMetadata().GetUid()})
	// Saved before the wait: one whose replicas cannot run is tainted and
	// replaced by the next apply rather than forgotten.
	r.setState(ctx, &resp.State, &resp.Diagnostics, r.ops.view(created), &plan)
	if resp.Diagnostics.HasError() {
		return
	}
	r.wait(ctx, &resp.State, &resp.Diagnostics, &plan, created, timeout, "create")
}

// wait waits, unless wait_for_ready is false, for o as written to reach
// its target (ops.judge), and records what it saw last.
func (r *replicaResource[T, V, M]) wait(ctx context.Context, st stateSetter, diags *diag.Diagnostics, plan *M,
	o T, timeout time.Duration, op string) {
	if !r.ops.settings(plan).waitForReady.ValueBool() {
		return
	}
	md := o.GetMetadata()
	t := replicaTarget{generation: md.GetGeneration(), ready: r.ops.ready(o)}
	// seen: the wait read the object at least once (it judges every
	// successful read), so v is what it read last rather than nothing.
	seen := false
	v, err := r.ops.wait(ctx, r.data.client, o, func(v V) verdict { seen = true; return r.ops.judge(t, v) })
	if seen {
		r.setState(ctx, st, diags, v, plan)
	}
	if err != nil {
		r.addWaitFailure(diags, err, apiv1.Ref(md.GetNamespace(), md.GetName()), waitFailure{
			want: r.ops.targetText(t, o), slow: "its " + r.ops.replicas + " need", stuck: "cannot get its " + r.ops.replicas + " running",
		}, timeout, op)
	}
}

func (r *replicaResource[T, V, M]) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	k := r.kind
	var state M
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	s := r.ops.settings(&state)
	if !r.readyToRefresh(req, resp, "read "+k.noun+" "+s.id.ValueString()) {
		return
	}
	ns, name := s.namespace.ValueString(), s.name.ValueString()
	id := apiv1.Ref(ns, name)
	// Two calls, the object and its replicas; refresh never waits.
	o, err := r.ops.get(ctx, r.data.client, &apiv1.ObjectKey{Namespace: ns, Name: name})
	if !r.stillManaged(ctx, resp, id, s.uid.ValueString(), o.GetMetadata().GetUid(), err) {
		return
	}
	v, err := r.ops.refresh(ctx, r.data.client, o)
	if err != nil {
		r.addError(&resp.Diagnostics, err, "list the "+r.ops.replicas+" of "+k.noun+" "+id)
		return
	}
	r.setState(ctx, &resp.State, &resp.Diagnostics, v, &state)
}

func (r *replicaResource[T, V, M]) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	k := r.kind
	var plan, state M
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() || !r.ready(&resp.Diagnostics, "update a "+k.noun) {
		return
	}
	want, timeout, ok := planned(ctx, &plan, r.ops.fromModel, r.ops.settings(&plan).timeouts.Update, defaultTimeout, &resp.Diagnostics)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ns, name := want.GetMetadata().GetNamespace(), want.GetMetadata().GetName()
	id := apiv1.Ref(ns, name)
	c := r.data.client
	key := &apiv1.ObjectKey{Namespace: ns, Name: name}
	// The kind's controller writes the status concurrently: updateCAS
	// retries the conflicts that causes.
	o, written, err := updateCAS(tflog.SetField(ctx, k.logKey, id), k.noun+" "+id, r.ops.settings(&state).uid.ValueString(),
		func(ctx context.Context) (T, error) { return r.ops.get(ctx, c, key) },
		func(cur T) T { return r.ops.merge(cur, want) },
		func(ctx context.Context, next T) (T, error) { return r.ops.update(ctx, c, next) })
	if addCASError(&resp.Diagnostics, err, r.kind, id, r.addError) {
		return
	}
	if written {
		tflog.Info(ctx, k.noun+" updated", map[string]any{k.logKey: id, "generation": o.GetMetadata().GetGeneration()})
	}
	// The spec is stored: record it before waiting, so a failed wait does
	// not make the next plan repeat the update.
	r.setState(ctx, &resp.State, &resp.Diagnostics, r.ops.view(o), &plan)
	if resp.Diagnostics.HasError() {
		return
	}
	r.wait(ctx, &resp.State, &resp.Diagnostics, &plan, o, timeout, "update")
}

// Delete deletes the object with the state's uid as precondition, so
// that destroy never deletes an object of the same name someone created
// after ours was deleted, and waits until it is gone: its controller
// deletes what it made first, then drops its finalizer.
func (r *replicaResource[T, V, M]) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	k := r.kind
	var state M
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() || !r.ready(&resp.Diagnostics, "delete a "+k.noun) {
		return
	}
	s := r.ops.settings(&state)
	timeout, d := s.timeouts.Delete(ctx, defaultTimeout)
	resp.Diagnostics.Append(d...)
	if resp.Diagnostics.HasError() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ns, name, uid := s.namespace.ValueString(), s.name.ValueString(), s.uid.ValueString()
	id := apiv1.Ref(ns, name)
	c := r.data.client
	key := &apiv1.ObjectKey{Namespace: ns, Name: name}
	diags := &resp.Diagnostics
	err := r.ops.del(ctx, c, key, &apiv1.DeleteOptions{Uid: uid})
	switch {
	case status.Code(err) == codes.NotFound:
		return
	case status.Code(err) == codes.FailedPrecondition && uid != "":
		diags.AddWarning(k.title+" "+id+" was replaced outside Terraform",
			"The "+k.short+" Terraform created is already gone; the "+k.short+" now named "+id+
				" was created by someone else and was left alone.")
		return
	case err != nil:
		r.addError(diags, err, "delete "+k.noun+" "+id)
		return
	}
	tflog.Info(ctx, k.noun+" deletion requested", map[string]any{k.logKey: id})
	err = r.waitGone(ctx, key)
	switch {
	case errors.Is(err, errWaitTimeout):
		diags.AddError("Timed out deleting "+k.noun+" "+id,
			fmt.Sprintf("The %s was still there after %s: %s. Its controller deletes its replicas first, each guest "+
				"getting termination_grace_period seconds to shut down, and a node that stopped answering holds its "+
				"instances until it is fenced (docs/failover.md). Raise timeouts.delete, or lower "+
				"termination_grace_period.", k.short, timeout, strings.TrimPrefix(err.Error(), errWaitTimeout.Error()+": ")))
	case err != nil:
		r.addError(diags, err, "wait for "+k.noun+" "+id+" to be deleted")
	}
}

// waitGone waits until object key no longer exists (nil then).
func (r *replicaResource[T, V, M]) waitGone(ctx context.Context, key *apiv1.ObjectKey) error {
	c := r.data.client
	o, err := r.ops.get(ctx, c, key)
	if err != nil {
		return goneWhenNotFound(err)
	}
	_, err = r.ops.wait(ctx, c, o, func(v V) verdict { return verdict{state: r.ops.describe(v)} })
	return goneWhenNotFound(err)
}

// setState writes what was read (v) as state, keeping the provider-only
// settings of prior (the plan or the previous state).
func (r *replicaResource[T, V, M]) setState(ctx context.Context, st stateSetter, diags *diag.Diagnostics, v V, prior *M) {
	m, d := r.ops.toState(v, prior)
	diags.Append(d...)
	if d.HasError() {
		return
	}
	diags.Append(st.Set(ctx, &m)...)
}
