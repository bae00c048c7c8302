package restore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller"
	"github.com/virtplane/terraform-provider-virtplane/internal/macaddr"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
	"github.com/virtplane/terraform-provider-virtplane/internal/vmlifecycle"
)

// errReplaced stops a target write on a VM that is not the one the
// restore works on (deleted and made again meanwhile).
var errReplaced = errors.New("restore target replaced")

// createTarget makes the missing target from the snapshot: halted, with
// the snapshot's spec, pinned to the node holding its local volumes' data, locked by
// this restore and marked with its annotation (which tells a resumed
// pass that this restore made it). nil, nil when the name was taken
// meanwhile: the VM's event brings the restore back to check it.
func (c *Controller) createTarget(ctx context.Context, r *apiv1.VirtualMachineRestore, ct *apiv1.VirtualMachineSnapshotContent) (*apiv1.VirtualMachine, error) {
	src := ct.GetSpec().GetSource()
	spec, _ := proto.Clone(src.GetSpec()).(*apiv1.VirtualMachineSpec)
	if spec == nil {
		spec = &apiv1.VirtualMachineSpec{}
	}
	//lint:ignore SA1019 a new target is Halted: the snapshot's deprecated flag must not override it
	spec.Running = nil
	spec.RunStrategy = apiv1.RunStrategyHalted
	if r.GetSpec().GetNewIdentity() {
		// As a clone: the interfaces get the MACs asked for, or new ones,
		// so the VM can run beside the snapshot's.
		tmpl := spec.GetTemplate().GetSpec()
		for _, i := range tmpl.GetDomain().GetDevices().GetInterfaces() {
			i.MacAddress = r.GetSpec().GetMacAddresses()[i.GetName()]
		}
		macaddr.Assign(tmpl, nil)
	}
	labels := maps.Clone(src.GetMetadata().GetLabels())
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, r.GetSpec().GetLabels())
	annotations := maps.Clone(src.GetMetadata().GetAnnotations())
	if annotations == nil {
		annotations = map[string]string{}
	}
	maps.Copy(annotations, r.GetSpec().GetAnnotations())
	name, uid := r.GetMetadata().GetName(), r.GetMetadata().GetUid()
	annotations[apiv1.AnnotationLastRestore] = apiv1.LastRestoreValue(name, uid)
	vm := &apiv1.VirtualMachine{
		Metadata: &apiv1.ObjectMeta{
			Namespace: r.GetMetadata().GetNamespace(), Name: r.GetSpec().GetTarget(),
			Labels: labels, Annotations: annotations,
		},
		Spec:   spec,
		Status: &apiv1.VirtualMachineStatus{RestoreInProgress: name},
	}
	if localCopies(ct) {
		// Pinned where the local volumes' copies are.
		vm.Status.NodeName = ct.GetSpec().GetNodeName()
	}
	out, err := c.vmSt.Create(ctx, vm)
	switch {
	case errors.Is(err, store.ErrAlreadyExists):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("creating restore target %s: %w", apiv1.Ref(vm.Metadata.Namespace, vm.Metadata.Name), err)
	}
	c.log.Info("restore target created", "restore", apiv1.Ref(r.Metadata.Namespace, name), "vm", vm.Metadata.Name, "uid", out.Metadata.Uid)
	return out, nil
}

// lock makes the restore the target's restore_in_progress. why says what
// it waits for when another snapshot or restore holds the VM; nil VM
// when it is gone.
func (c *Controller) lock(ctx context.Context, r *apiv1.VirtualMachineRestore, vm *apiv1.VirtualMachine) (locked *apiv1.VirtualMachine, why string, err error) {
	name := r.GetMetadata().GetName()
	blocked := func(vm *apiv1.VirtualMachine) string {
		switch st := vm.GetStatus(); {
		case st.GetRestoreInProgress() != "" && st.GetRestoreInProgress() != name:
			return fmt.Sprintf("target VM locked by restore %q", st.GetRestoreInProgress())
		case st.GetSnapshotInProgress() != "":
			return fmt.Sprintf("target VM locked by snapshot %q", st.GetSnapshotInProgress())
		}
		return ""
	}
	if why := blocked(vm); why != "" {
		return nil, why, nil
	}
	if vm.GetStatus().GetRestoreInProgress() == name {
		return vm, "", nil
	}
	uid := vm.GetMetadata().GetUid()
	var whyNot string
	out, err := c.vmSt.GuaranteedUpdate(ctx, vm.GetMetadata().GetNamespace(), vm.GetMetadata().GetName(), func(cur *apiv1.VirtualMachine) (*apiv1.VirtualMachine, error) {
		if cur.GetMetadata().GetUid() != uid {
			return nil, errReplaced
		}
		if whyNot = blocked(cur); whyNot != "" {
			return cur, nil // unchanged: nothing written
		}
		if cur.Status == nil {
			cur.Status = &apiv1.VirtualMachineStatus{}
		}
		cur.Status.RestoreInProgress = name
		return cur, nil
	})
	switch {
	case errors.Is(err, errReplaced), errors.Is(err, store.ErrNotFound):
		return nil, "", nil
	case err != nil:
		return nil, "", fmt.Errorf("locking restore target %s: %w", vm.GetMetadata().GetName(), err)
	case whyNot != "":
		return nil, whyNot, nil
	}
	c.log.Info("restore target locked", "vm", apiv1.Ref(out.Metadata.Namespace, out.Metadata.Name), "restore", name)
	return out, "", nil
}

// unlock clears the target's lock if this restore holds it: from the
// stored VM when fresh, else only when the cache shows the lock.
func (c *Controller) unlock(ctx context.Context, r *apiv1.VirtualMachineRestore, fresh bool) error {
	ns, name, target := r.GetMetadata().GetNamespace(), r.GetMetadata().GetName(), r.GetSpec().GetTarget()
	if vm, ok := c.vms.Get(ns, target); !fresh && (!ok || vm.GetStatus().GetRestoreInProgress() != name) {
		return nil
	}
	unlocked := false
	_, err := c.vmSt.GuaranteedUpdate(ctx, ns, target, func(cur *apiv1.VirtualMachine) (*apiv1.VirtualMachine, error) {
		if cur.GetStatus().GetRestoreInProgress() == name {
			cur.Status.RestoreInProgress = ""
			unlocked = true
		}
		return cur, nil
	})
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("unlocking restore target %s: %w", apiv1.Ref(ns, target), err)
	}
	if unlocked {
		c.log.Info("restore target unlocked", "vm", apiv1.Ref(ns, target), "restore", name)
	}
	return nil
}

// stopTarget stops the target the way the API's Stop does (KubeVirt's
// StopTarget policy); a VM the verb cannot stop is waited for.
func (c *Controller) stopTarget(ctx context.Context, vm *apiv1.VirtualMachine, vmi *apiv1.VirtualMachineInstance) error {
	uid := vm.GetMetadata().GetUid()
	_, err := c.vmSt.GuaranteedUpdate(ctx, vm.GetMetadata().GetNamespace(), vm.GetMetadata().GetName(), func(cur *apiv1.VirtualMachine) (*apiv1.VirtualMachine, error) {
		if cur.GetMetadata().GetUid() != uid {
			return nil, errReplaced
		}
		spec := proto.Clone(cur.GetSpec())
		if _, err := vmlifecycle.Stop(cur, vmi, nil); err != nil {
			return nil, err
		}
		if !proto.Equal(spec, cur.GetSpec()) {
			cur.Metadata.Generation++ // a run-strategy flip, as the verb counts it
		}
		return cur, nil
	})
	var refused *vmlifecycle.RefusedError
	switch {
	case errors.As(err, &refused), errors.Is(err, errReplaced), errors.Is(err, store.ErrNotFound):
		return nil // already stopping, or gone: the instance's events tell
	case err != nil:
		return fmt.Errorf("stopping restore target %s: %w", vm.GetMetadata().GetName(), err)
	}
	c.log.Info("stopping restore target", "vm", apiv1.Ref(vm.Metadata.Namespace, vm.Metadata.Name))
	return nil
}

// fail ends a restore before its commit point: the target unlocked, a
// target it made deleted, phase Failed. The node drops its staged copies
// and its finalizer on seeing Failed.
func (c *Controller) fail(ctx context.Context, key string, r *apiv1.VirtualMachineRestore, msg string) (controller.Result, error) {
	if err := c.undo(ctx, r, true); err != nil {
		return controller.Result{}, err
	}
	next := proto.Clone(r).(*apiv1.VirtualMachineRestore)
	st := status(next)
	st.Phase = apiv1.RestoreFailed
	st.Error = msg
	st.Message = ""
	c.setConditions(st, apiv1.ConditionFalse, reasonFailed, "Operation failed", false)
	st.Conditions = apiv1.SetCondition(st.Conditions, &apiv1.Condition{
		Type: apiv1.ConditionFailure, Status: apiv1.ConditionTrue, Reason: reasonFailed, Message: msg,
	}, c.opts.Clock())
	if err := c.write(ctx, key, next); err != nil {
		return controller.Result{}, err
	}
	c.log.Info("restore failed", "restore", key, "error", msg)
	return controller.Result{}, nil
}

// undo leaves the target as it was before the restore: unlocked, and
// deleted if the restore made it (its volumes go with it).
func (c *Controller) undo(ctx context.Context, r *apiv1.VirtualMachineRestore, fresh bool) error {
	if err := c.unlock(ctx, r, fresh); err != nil {
		return err
	}
	ns, target := r.GetMetadata().GetNamespace(), r.GetSpec().GetTarget()
	vm, ok := c.vms.Get(ns, target)
	if !ok || vm.GetMetadata().GetDeletionTimestamp() != nil || !c.madeByUs(r, vm) {
		return nil
	}
	_, _, err := c.vmSt.Delete(ctx, ns, target, store.DeleteOptions{UID: vm.GetMetadata().GetUid()})
	if err != nil && !errors.Is(err, store.ErrNotFound) && !errors.Is(err, store.ErrConflict) {
		return fmt.Errorf("deleting restore target %s made by the failed restore: %w", apiv1.Ref(ns, target), err)
	}
	c.log.Info("deleted the target the failed restore made", "vm", apiv1.Ref(ns, target))
	return nil
}

// nodeGoneRecheck is how often a deleting restore that waits for its
// node's finalizer looks whether that node was deleted.
const nodeGoneRecheck = 30 * time.Second

// finalize is a deleted restore's clean-up. One in Committing finishes
// first (it only goes forward); one before its commit point is undone.
func (c *Controller) finalize(ctx context.Context, key string, r *apiv1.VirtualMachineRestore) (controller.Result, error) {
	if !slices.Contains(r.GetMetadata().GetFinalizers(), apiv1.FinalizerRestore) {
		if slices.Contains(r.GetMetadata().GetFinalizers(), apiv1.FinalizerRestoreData) {
			// Its node drops the copies and then its finalizer; a look
			// now and then sees whether the node was deleted meanwhile.
			return controller.Result{RequeueAfter: nodeGoneRecheck}, nil
		}
		return controller.Result{}, nil
	}
	switch r.GetStatus().GetPhase() {
	case apiv1.RestoreCommitting:
		return c.committing(ctx, key, r)
	case apiv1.RestoreSucceeded:
		if err := c.unlock(ctx, r, true); err != nil {
			return controller.Result{}, err
		}
	default:
		if err := c.undo(ctx, r, true); err != nil {
			return controller.Result{}, err
		}
	}
	next := proto.Clone(r).(*apiv1.VirtualMachineRestore)
	next.Metadata.Finalizers = slices.DeleteFunc(next.Metadata.Finalizers, func(f string) bool { return f == apiv1.FinalizerRestore })
	if err := c.write(ctx, key, next); err != nil {
		return controller.Result{}, err
	}
	c.log.Info("restore released", "restore", key)
	return controller.Result{}, nil
}
