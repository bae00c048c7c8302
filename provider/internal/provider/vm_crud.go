package provider

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// Create, read, update and delete of the virtplane_virtual_machine
// resource: the agent calls, and the waits for the state the run strategy
// implies (vm_wait.go).

func (r *vmResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan vmResourceModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() || !r.ready(&resp.Diagnostics, "create a virtual machine") {
		return
	}
	want, timeout, ok := planned(ctx, &plan.vmModel, vmFromModel, plan.Timeouts.Create, defaultTimeout, &resp.Diagnostics)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ns, name := want.Metadata.Namespace, want.Metadata.Name
	id := apiv1.Ref(ns, name)
	var created *apiv1.VirtualMachine
	if src := plan.SourceSnapshot.ValueString(); src != "" {
		if created, ok = r.createFromSnapshot(ctx, &resp.Diagnostics, want, src, timeout); !ok {
			return
		}
	} else {
		var err error
		if created, err = r.data.client.VMs.Create(ctx, &apiv1.CreateVirtualMachineRequest{Vm: want}); err != nil {
			r.addError(&resp.Diagnostics, err, "create virtual machine "+id)
			return
		}
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
		return
	}
	r.waitForIP(ctx, &resp.State, &resp.Diagnostics, &plan, vmi, shouldWaitForIP(vmi, true, false, false), "create")
}

// waitForIP runs the wait_for_ip wait of plan when wait says so, and
// records the addresses found (or the VM as last seen) in the state.
func (r *vmResource) waitForIP(ctx context.Context, st stateSetter, diags *diag.Diagnostics, plan *vmResourceModel,
	vmi *apiv1.VirtualMachineInstance, wait bool, op string) {
	w, ok, err := ipWaitOf(plan)
	switch {
	case err != nil:
		diags.AddAttributeError(path.Root("wait_for_ip"), "Cannot wait for an IP address", err.Error())
		return
	case !ok:
		return
	case !wait:
		tflog.Debug(ctx, "not waiting for an IP address", map[string]any{
			"vm": apiv1.Ref(plan.Namespace.ValueString(), plan.Name.ValueString()), "instance_running": vmi != nil && !apiv1.IsFinal(vmi.GetStatus().GetPhase())})
		return
	}
	ns, name := plan.Namespace.ValueString(), plan.Name.ValueString()
	id := apiv1.Ref(ns, name)
	tflog.Info(ctx, "waiting for an IP address", map[string]any{"vm": id, "interface": w.iface, "timeout": w.timeoutText})
	vm, vmi, err := waitForIP(ctx, r.data.client, ns, name, w, op)
	if vm != nil {
		r.setState(ctx, st, diags, vm, vmi, plan)
	}
	if err != nil {
		r.addIPWaitError(diags, err, id, op)
		return
	}
	tflog.Info(ctx, "virtual machine has an IP address", map[string]any{
		"vm": id, "interface": w.iface, "address": usableAddress(interfaceStatus(vmi, w.iface))})
}

func (r *vmResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state vmResourceModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if !r.readyToRefresh(req, resp, "read virtual machine "+state.ID.ValueString()) {
		return
	}
	ns, name := state.Namespace.ValueString(), state.Name.ValueString()
	// One read of the VM and one of its instance: refresh never waits, so
	// plans stay fast however many VMs there are.
	vm, vmi, err := getVM(ctx, r.data.client, ns, name)
	if !r.stillManaged(ctx, resp, apiv1.Ref(ns, name), state.UID.ValueString(), vm.GetMetadata().GetUid(), err) {
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
	want, timeout, ok := planned(ctx, &plan.vmModel, vmFromModel, plan.Timeouts.Update, defaultTimeout, &resp.Diagnostics)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ns, name := want.Metadata.Namespace, want.Metadata.Name
	id := apiv1.Ref(ns, name)
	c := r.data.client
	key := &apiv1.ObjectKey{Namespace: ns, Name: name}

	// The VM controller writes the status concurrently: updateCAS retries
	// the conflicts that causes.
	vm, written, err := updateCAS(tflog.SetField(ctx, "vm", id), "virtual machine "+id, state.UID.ValueString(),
		func(ctx context.Context) (*apiv1.VirtualMachine, error) {
			return c.VMs.Get(ctx, &apiv1.GetVirtualMachineRequest{Key: key})
		},
		func(cur *apiv1.VirtualMachine) *apiv1.VirtualMachine { return mergeVM(cur, want) },
		func(ctx context.Context, next *apiv1.VirtualMachine) (*apiv1.VirtualMachine, error) {
			return c.VMs.Update(ctx, &apiv1.UpdateVirtualMachineRequest{Vm: next})
		})
	if addCASError(&resp.Diagnostics, err, r.kind, id, r.addError) {
		return
	}
	if written {
		tflog.Info(ctx, "virtual machine updated", map[string]any{"vm": id, "generation": vm.GetMetadata().GetGeneration()})
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

	restartRequired := apiv1.IsConditionTrue(vm.GetStatus().GetConditions(), apiv1.ConditionRestartRequired)
	decision := decideRestart(strategy, plan.UpdatePolicy.ValueString(), vmi != nil, restartRequired)
	switch decision.action {
	case restartNow:
		if err := r.restart(ctx, key, id); err != nil {
			r.addError(&resp.Diagnostics, err, "restart virtual machine "+id+" to apply the change")
			return
		}
	case restartDeferred:
		tflog.Info(ctx, "virtual machine needs a restart to apply the change; not restarting it",
			map[string]any{"vm": id, "update_policy": plan.UpdatePolicy.ValueString(), "run_strategy": strategy, "why": decision.why})
	}
	target := decision.target(gen, vmi.GetMetadata().GetUid())

	vm, vmi, err = waitVM(ctx, c, ns, name, func(vm *apiv1.VirtualMachine, vmi *apiv1.VirtualMachineInstance) verdict {
		return judgeVM(target, vm, vmi)
	})
	if vm != nil {
		r.setState(ctx, &resp.State, &resp.Diagnostics, vm, vmi, &plan)
	}
	if err != nil {
		r.addWaitError(&resp.Diagnostics, err, id, target, timeout, "update")
		return
	}
	// The guest was started by this apply when it restarted it, or when
	// nothing ran before (a Halted VM set to Always).
	started := decision.action == restartNow || !instanceActive(state.Status)
	r.waitForIP(ctx, &resp.State, &resp.Diagnostics, &plan, vmi,
		shouldWaitForIP(vmi, false, started, !sameIPWait(plan.WaitForIP, state.WaitForIP)), "update")
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
	id := apiv1.Ref(ns, name)
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

// setState writes the VM as state, keeping the provider-only settings of
// prior (the plan or the previous state).
func (r *vmResource) setState(ctx context.Context, st stateSetter, diags *diag.Diagnostics, vm *apiv1.VirtualMachine, vmi *apiv1.VirtualMachineInstance, prior *vmResourceModel) {
	m, d := vmToModel(ctx, vm, vmi, readOptions{prior: &prior.vmModel})
	diags.Append(d...)
	if d.HasError() {
		return
	}
	out := vmResourceModel{vmModel: m, SourceSnapshot: prior.SourceSnapshot, UpdatePolicy: prior.UpdatePolicy,
		WaitForIP: prior.WaitForIP, Timeouts: prior.Timeouts}
	if out.UpdatePolicy.IsNull() || out.UpdatePolicy.IsUnknown() {
		out.UpdatePolicy = types.StringValue(defaultUpdatePolicy)
	}
	diags.Append(st.Set(ctx, &out)...)
}
