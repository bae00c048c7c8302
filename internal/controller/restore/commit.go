package restore

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// committing rolls a restore past its commit point forward: the target's
// spec becomes the snapshot's, the node swaps the volumes in, and when
// both are done the target is unlocked and the restore Succeeded. Each
// step is recorded, so a fresh controller resumes with what is left.
func (c *Controller) committing(ctx context.Context, key string, r *apiv1.VirtualMachineRestore) (controller.Result, error) {
	ns, target := r.GetMetadata().GetNamespace(), r.GetSpec().GetTarget()
	st := r.GetStatus()
	vm, ok := c.vms.Get(ns, target)
	if !ok {
		// A target made by the last pass may not be cached yet.
		var err error
		if vm, err = c.vmSt.Get(ctx, ns, target); err != nil && !errors.Is(err, store.ErrNotFound) {
			return controller.Result{}, fmt.Errorf("reading restore target %s: %w", apiv1.Ref(ns, target), err)
		}
	}
	if vm == nil || vm.GetMetadata().GetUid() != st.GetTargetUid() {
		// Nothing to roll forward into; the restore cannot succeed.
		return controller.Result{}, c.end(ctx, key, r, apiv1.RestoreFailed,
			fmt.Sprintf("restore target %q was deleted after the restore's commit point", target))
	}
	if !st.GetSpecRestored() {
		if err := c.restoreSpec(ctx, r, vm); err != nil {
			return controller.Result{}, err
		}
		next := proto.Clone(r).(*apiv1.VirtualMachineRestore)
		next.Status.SpecRestored = true
		return controller.Result{}, c.write(ctx, key, next)
	}
	if !st.GetSwapped() || !storageDone(st, st.GetStorageSwapped()) {
		return controller.Result{}, nil // the node's or the storage controller's write brings the restore back
	}
	if err := c.unlock(ctx, r, true); err != nil {
		return controller.Result{}, err
	}
	return controller.Result{}, c.end(ctx, key, r, apiv1.RestoreSucceeded, "")
}

// restoreSpec writes the snapshot's spec into the target, keeping its run
// strategy (KubeVirt's), with the last-restore annotation. The content is
// read fresh if the cache lacks it: past the commit point the spec can
// come from nowhere else.
func (c *Controller) restoreSpec(ctx context.Context, r *apiv1.VirtualMachineRestore, vm *apiv1.VirtualMachine) error {
	ns := r.GetMetadata().GetNamespace()
	ct, err := c.content(ctx, r)
	if err != nil {
		return err
	}
	want := ct.GetSpec().GetSource().GetSpec()
	node := ""
	if localCopies(ct) {
		node = ct.GetSpec().GetNodeName()
	}
	lastRestore := apiv1.LastRestoreValue(r.GetMetadata().GetName(), r.GetMetadata().GetUid())
	uid := vm.GetMetadata().GetUid()
	_, err = c.vmSt.GuaranteedUpdate(ctx, ns, vm.GetMetadata().GetName(), func(cur *apiv1.VirtualMachine) (*apiv1.VirtualMachine, error) {
		if cur.GetMetadata().GetUid() != uid {
			return nil, errReplaced
		}
		spec, _ := proto.Clone(want).(*apiv1.VirtualMachineSpec)
		if spec == nil {
			spec = &apiv1.VirtualMachineSpec{}
		}
		//lint:ignore SA1019 the VM's run state is kept as the client wrote it, deprecated flag included
		spec.Running, spec.RunStrategy = cur.GetSpec().Running, cur.GetSpec().GetRunStrategy()
		if !proto.Equal(spec, cur.GetSpec()) {
			cur.Metadata.Generation++ // as a client's spec change counts (withUserChanges)
		}
		cur.Spec = spec
		if cur.Metadata.Annotations == nil {
			cur.Metadata.Annotations = map[string]string{}
		}
		cur.Metadata.Annotations[apiv1.AnnotationLastRestore] = lastRestore
		if cur.Status == nil {
			cur.Status = &apiv1.VirtualMachineStatus{}
		}
		if cur.Status.NodeName == "" && node != "" {
			// The restored local volumes are on the snapshot's node now.
			cur.Status.NodeName = node
		}
		return cur, nil
	})
	switch {
	case errors.Is(err, errReplaced), errors.Is(err, store.ErrNotFound):
		return fmt.Errorf("restore target %s was replaced while its spec was restored: %w", vm.GetMetadata().GetName(), err)
	case err != nil:
		return fmt.Errorf("restoring the spec of %s: %w", vm.GetMetadata().GetName(), err)
	}
	c.log.Info("restore target's spec restored", "vm", apiv1.Ref(ns, vm.GetMetadata().GetName()), "restore", r.GetMetadata().GetName())
	return nil
}

// content is the restore's snapshot content, from the cache or fresh.
// The content is found by name from the snapshot (still there: deleting
// it would have failed the restore before the commit point) or, if the
// snapshot went since, not at all.
func (c *Controller) content(ctx context.Context, r *apiv1.VirtualMachineRestore) (*apiv1.VirtualMachineSnapshotContent, error) {
	ns := r.GetMetadata().GetNamespace()
	snap, ok := c.snaps.Get(ns, r.GetSpec().GetSnapshot())
	if !ok {
		return nil, controller.TerminalError(fmt.Errorf("restore %s: snapshot %q is gone before the target's spec was restored",
			apiv1.Ref(ns, r.GetMetadata().GetName()), r.GetSpec().GetSnapshot()))
	}
	name := snap.GetStatus().GetContentName()
	if ct, ok := c.contents.Get(ns, name); ok {
		return ct, nil
	}
	ct, err := c.contSt.Get(ctx, ns, name)
	if err != nil {
		return nil, fmt.Errorf("reading snapshot content %s: %w", name, err)
	}
	return ct, nil
}

// end writes a final phase: Succeeded (complete, with the restore time)
// or Failed past the commit point.
func (c *Controller) end(ctx context.Context, key string, r *apiv1.VirtualMachineRestore, phase, msg string) error {
	next := proto.Clone(r).(*apiv1.VirtualMachineRestore)
	st := status(next)
	st.Phase = phase
	st.Message = ""
	if phase == apiv1.RestoreSucceeded {
		st.Complete = true
		st.RestoreTime = c.now()
		c.setConditions(st, apiv1.ConditionFalse, reasonComplete, "Operation complete", true)
	} else {
		st.Error = msg
		c.setConditions(st, apiv1.ConditionFalse, reasonFailed, "Operation failed", false)
		st.Conditions = apiv1.SetCondition(st.Conditions, &apiv1.Condition{
			Type: apiv1.ConditionFailure, Status: apiv1.ConditionTrue, Reason: reasonFailed, Message: msg,
		}, c.opts.Clock())
	}
	if err := c.write(ctx, key, next); err != nil {
		return err
	}
	c.log.Info("restore ended", "restore", key, "phase", phase, "error", msg)
	return nil
}
