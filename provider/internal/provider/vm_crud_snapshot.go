package provider

import (
	"context"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// Create of a virtplane_virtual_machine with source_snapshot: a
// VirtualMachineClone from the snapshot makes the VM (halted, on the
// snapshot's node, its persistent volumes copies of the snapshot's), then
// the configuration is applied to it and create goes on as for any VM.

// createFromSnapshot makes VM want from snapshot src and returns it as
// stored, with want's spec and labels. On failure it deletes what it
// made and reports why (ok false).
func (r *vmResource) createFromSnapshot(ctx context.Context, diags *diag.Diagnostics, want *apiv1.VirtualMachine, src string,
	timeout time.Duration) (*apiv1.VirtualMachine, bool) {
	c := r.data.client
	ns, name := want.GetMetadata().GetNamespace(), want.GetMetadata().GetName()
	id := apiv1.Ref(ns, name)
	// The clone is named after the VM: one VM, one clone, and a leftover
	// of an interrupted apply is refused by name rather than duplicated.
	key := &apiv1.ObjectKey{Namespace: ns, Name: name}
	ops := cloneOps(c)
	clone, err := ops.create(ctx, &apiv1.VirtualMachineClone{
		Metadata: &apiv1.ObjectMeta{Namespace: ns, Name: name},
		Spec: &apiv1.VirtualMachineCloneSpec{
			SourceKind:      apiv1.CloneSourceSnapshot,
			SourceName:      src,
			Target:          name,
			NewMacAddresses: configuredMACs(want),
			Labels:          want.GetMetadata().GetLabels(),
		},
	})
	if err != nil {
		r.addError(diags, err, "clone snapshot "+src+" into virtual machine "+id)
		return nil, false
	}
	cloneUID := clone.GetMetadata().GetUid()
	tflog.Info(ctx, "virtual machine clone created", map[string]any{"vm": id, "snapshot": src, "clone_uid": cloneUID})
	done, werr := waitNamed(ctx, ops, "virtual machine clone "+id, key, ops.judge)

	// The clone is only the means: it goes whatever the outcome (deleting
	// it deletes the restore it made; a failed one has deleted the VM it
	// began). Cleanup gets time of its own when the wait used all of
	// create's.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), defaultTimeout)
	defer cancel()
	if _, err := deleteNamed(cctx, ops, "virtual machine clone", key, cloneUID); err != nil {
		diags.AddWarning("Virtual machine clone "+id+" was not deleted",
			"The clone that made the VM from snapshot "+src+" is left behind: "+err.Error()+
				". Delete it with virtplane-agent delete vmclone "+name+" -n "+ns+".")
	}
	if werr != nil {
		r.addWaitFailure(diags, werr, id, waitFailure{
			want: "to be cloned from snapshot " + src, slow: "the copy of the snapshot's volumes needs",
			stuck: "could not be made from snapshot " + src,
		}, timeout, "create")
		r.deletePartial(cctx, diags, key, func(vm *apiv1.VirtualMachine) bool {
			return strings.HasPrefix(vm.GetMetadata().GetAnnotations()[apiv1.AnnotationLastRestore], apiv1.CloneRestoreName(cloneUID)+"-")
		})
		return nil, false
	}
	targetUID := done.GetStatus().GetTargetUid()
	tflog.Info(ctx, "virtual machine cloned from snapshot", map[string]any{"vm": id, "snapshot": src, "uid": targetUID})

	// The clone made the VM with the snapshot's spec; the configuration
	// decides it from here. MACs the configuration leaves out stay those
	// the clone gave.
	vm, _, err := updateCAS(tflog.SetField(ctx, "vm", id), "virtual machine "+id, targetUID,
		func(ctx context.Context) (*apiv1.VirtualMachine, error) {
			return c.VMs.Get(ctx, &apiv1.GetVirtualMachineRequest{Key: key})
		},
		func(cur *apiv1.VirtualMachine) *apiv1.VirtualMachine { return mergeCloned(cur, want) },
		func(ctx context.Context, next *apiv1.VirtualMachine) (*apiv1.VirtualMachine, error) {
			return c.VMs.Update(ctx, &apiv1.UpdateVirtualMachineRequest{Vm: next})
		})
	if addCASError(diags, err, r.kind, id, r.addError) {
		r.deletePartial(cctx, diags, key, func(vm *apiv1.VirtualMachine) bool { return vm.GetMetadata().GetUid() == targetUID })
		return nil, false
	}
	return vm, true
}

// configuredMACs is interface name → MAC address of the interfaces whose
// MAC the configuration sets; the clone gives the others new ones.
func configuredMACs(vm *apiv1.VirtualMachine) map[string]string {
	out := map[string]string{}
	for _, i := range vm.GetSpec().GetTemplate().GetSpec().GetDomain().GetDevices().GetInterfaces() {
		if i.GetMacAddress() != "" {
			out[i.GetName()] = i.GetMacAddress()
		}
	}
	return out
}

// mergeCloned is mergeVM for a VM a clone just made: every interface the
// configuration leaves without a MAC keeps the one the clone gave the
// interface of that name.
func mergeCloned(cur, want *apiv1.VirtualMachine) *apiv1.VirtualMachine {
	next := mergeVM(cur, want)
	assigned := map[string]string{}
	for _, i := range cur.GetSpec().GetTemplate().GetSpec().GetDomain().GetDevices().GetInterfaces() {
		assigned[i.GetName()] = i.GetMacAddress()
	}
	for _, i := range next.GetSpec().GetTemplate().GetSpec().GetDomain().GetDevices().GetInterfaces() {
		if i.GetMacAddress() == "" {
			i.MacAddress = assigned[i.GetName()]
		}
	}
	return next
}

// deletePartial deletes VM key when ours says it is the one this create
// made, and waits until it is gone: a failed create leaves nothing.
func (r *vmResource) deletePartial(ctx context.Context, diags *diag.Diagnostics, key *apiv1.ObjectKey, ours func(*apiv1.VirtualMachine) bool) {
	c := r.data.client
	id := apiv1.Ref(key.GetNamespace(), key.GetName())
	vm, err := c.VMs.Get(ctx, &apiv1.GetVirtualMachineRequest{Key: key})
	if err != nil || !ours(vm) {
		return // none, or not ours to delete
	}
	uid := vm.GetMetadata().GetUid()
	_, err = c.VMs.Delete(ctx, &apiv1.DeleteVirtualMachineRequest{Key: key, Options: &apiv1.DeleteOptions{Uid: uid}})
	if err == nil {
		err = waitGone(ctx, c, key.GetNamespace(), key.GetName())
	}
	if err != nil {
		diags.AddWarning("Virtual machine "+id+" was left behind",
			"Create failed after the clone had made the VM (uid "+uid+"), and deleting it failed: "+err.Error()+
				". Delete it with virtplane-agent delete vm "+key.GetName()+" -n "+key.GetNamespace()+".")
		return
	}
	tflog.Info(ctx, "partly created virtual machine deleted", map[string]any{"vm": id, "uid": uid})
}
