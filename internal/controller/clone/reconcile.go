package clone

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// Reconcile implements controller.Reconciler.
func (c *Controller) Reconcile(ctx context.Context, key string) (controller.Result, error) {
	cl, ok := c.clones.GetByKey(key)
	if !ok {
		c.writes.Forget(key)
		return controller.Result{}, nil
	}
	if c.writes.Stale(key, cl.GetMetadata().GetResourceVersion()) {
		return controller.Result{RequeueAfter: staleRequeue}, nil
	}
	if cl.GetMetadata().GetDeletionTimestamp() != nil {
		if !slices.Contains(cl.GetMetadata().GetFinalizers(), apiv1.FinalizerClone) {
			return controller.Result{}, nil
		}
		if err := c.cleanUp(ctx, cl); err != nil {
			return controller.Result{}, err
		}
		return controller.Result{}, c.write(ctx, key, withoutFinalizer(cl))
	}
	if !slices.Contains(cl.GetMetadata().GetFinalizers(), apiv1.FinalizerClone) {
		// Before anything is made: a delete always finds the finalizer
		// that deletes it again.
		next := proto.Clone(cl).(*apiv1.VirtualMachineClone)
		next.Metadata.Finalizers = append(next.Metadata.Finalizers, apiv1.FinalizerClone)
		return controller.Result{}, c.write(ctx, key, next)
	}
	switch cl.GetStatus().GetPhase() {
	case "":
		return controller.Result{}, c.start(ctx, key, cl)
	case apiv1.CloneSnapshotInProgress:
		return controller.Result{}, c.snapshotting(ctx, key, cl)
	case apiv1.CloneRestoreInProgress:
		return controller.Result{}, c.restoring(ctx, key, cl)
	}
	// Succeeded or Failed: what it made is gone (deleted before the
	// final write).
	return controller.Result{}, nil
}

// start checks the target is free and makes the snapshot (a VM source)
// or the restore (a snapshot source).
func (c *Controller) start(ctx context.Context, key string, cl *apiv1.VirtualMachineClone) error {
	ns, spec := cl.GetMetadata().GetNamespace(), cl.GetSpec()
	if _, ok := c.vms.Get(ns, spec.GetTarget()); ok {
		return c.fail(ctx, key, cl, fmt.Sprintf("target VM %q already exists", spec.GetTarget()))
	}
	if sourceKind(cl) == apiv1.CloneSourceSnapshot {
		return c.createRestore(ctx, key, cl, spec.GetSourceName())
	}
	if _, ok := c.vms.Get(ns, spec.GetSourceName()); !ok {
		return c.fail(ctx, key, cl, fmt.Sprintf("source VM %q does not exist", spec.GetSourceName()))
	}
	name := madeSnapshot(cl)
	_, err := c.snapSt.Create(ctx, &apiv1.VirtualMachineSnapshot{
		Metadata: &apiv1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{apiv1.LabelCloneSource: cl.GetMetadata().GetName()}},
		Spec:     &apiv1.VirtualMachineSnapshotSpec{Source: spec.GetSourceName(), DeletionPolicy: apiv1.DeletionPolicyDelete},
	})
	if err != nil && !errors.Is(err, store.ErrAlreadyExists) {
		return fmt.Errorf("creating snapshot %s for clone %s: %w", name, key, err)
	}
	next := proto.Clone(cl).(*apiv1.VirtualMachineClone)
	st := status(next)
	st.Phase = apiv1.CloneSnapshotInProgress
	st.SnapshotName = name
	c.log.Info("clone snapshotting its source", "clone", key, "snapshot", name)
	return c.write(ctx, key, next)
}

// snapshotting waits for the clone's snapshot, then restores it.
func (c *Controller) snapshotting(ctx context.Context, key string, cl *apiv1.VirtualMachineClone) error {
	name := cl.GetStatus().GetSnapshotName()
	s, err := c.snapshot(ctx, cl.GetMetadata().GetNamespace(), name)
	switch {
	case err != nil:
		return err
	case s == nil || s.GetMetadata().GetDeletionTimestamp() != nil:
		return c.fail(ctx, key, cl, fmt.Sprintf("snapshot %q was deleted", name))
	case s.GetStatus().GetPhase() == apiv1.SnapshotFailed:
		return c.fail(ctx, key, cl, fmt.Sprintf("snapshot %q failed: %s", name, s.GetStatus().GetError()))
	case s.GetStatus().GetPhase() != apiv1.SnapshotSucceeded || !s.GetStatus().GetReadyToUse():
		return nil // its events bring the clone back
	}
	return c.createRestore(ctx, key, cl, name)
}

// createRestore makes the restore of snapshot into the target, with a
// new identity and the clone's MACs, labels and annotations.
func (c *Controller) createRestore(ctx context.Context, key string, cl *apiv1.VirtualMachineClone, snapshot string) error {
	ns, spec := cl.GetMetadata().GetNamespace(), cl.GetSpec()
	name := apiv1.CloneRestoreName(cl.GetMetadata().GetUid())
	_, err := c.rSt.Create(ctx, &apiv1.VirtualMachineRestore{
		Metadata: &apiv1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{apiv1.LabelCloneSource: cl.GetMetadata().GetName()}},
		Spec: &apiv1.VirtualMachineRestoreSpec{
			Target: spec.GetTarget(), Snapshot: snapshot, NewIdentity: true,
			TargetReadinessPolicy: apiv1.ReadinessFailImmediate, // a new target never runs
			MacAddresses:          maps.Clone(spec.GetNewMacAddresses()),
			Labels:                maps.Clone(spec.GetLabels()), Annotations: maps.Clone(spec.GetAnnotations()),
		},
	})
	if err != nil && !errors.Is(err, store.ErrAlreadyExists) {
		return fmt.Errorf("creating restore %s for clone %s: %w", name, key, err)
	}
	next := proto.Clone(cl).(*apiv1.VirtualMachineClone)
	st := status(next)
	st.Phase = apiv1.CloneRestoreInProgress
	st.SnapshotName = snapshot
	st.RestoreName = name
	c.log.Info("clone restoring", "clone", key, "restore", name, "snapshot", snapshot)
	return c.write(ctx, key, next)
}

// restoring waits for the restore; its end is the clone's.
func (c *Controller) restoring(ctx context.Context, key string, cl *apiv1.VirtualMachineClone) error {
	ns, name := cl.GetMetadata().GetNamespace(), cl.GetStatus().GetRestoreName()
	r, ok := c.restores.Get(ns, name)
	if !ok {
		var err error
		if r, err = c.rSt.Get(ctx, ns, name); err != nil && !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("reading restore %s: %w", name, err)
		}
	}
	switch {
	case r == nil:
		return c.fail(ctx, key, cl, fmt.Sprintf("restore %q was deleted", name))
	case r.GetStatus().GetPhase() == apiv1.RestoreFailed:
		return c.fail(ctx, key, cl, fmt.Sprintf("restore %q failed: %s", name, r.GetStatus().GetError()))
	case r.GetStatus().GetPhase() != apiv1.RestoreSucceeded:
		return nil
	}
	if err := c.cleanUp(ctx, cl); err != nil {
		return err
	}
	next := proto.Clone(cl).(*apiv1.VirtualMachineClone)
	st := status(next)
	st.Phase = apiv1.CloneSucceeded
	st.TargetUid = r.GetStatus().GetTargetUid()
	st.Conditions = apiv1.SetCondition(st.Conditions, &apiv1.Condition{
		Type: apiv1.ConditionReady, Status: apiv1.ConditionTrue, Reason: "Succeeded", Message: "Clone complete",
	}, c.opts.Clock())
	c.log.Info("clone succeeded", "clone", key, "target", cl.GetSpec().GetTarget(), "uid", st.TargetUid)
	return c.write(ctx, key, next)
}

// snapshot reads the clone's snapshot from the cache, else the store (it
// may have just been made); nil when there is none.
func (c *Controller) snapshot(ctx context.Context, ns, name string) (*apiv1.VirtualMachineSnapshot, error) {
	if s, ok := c.snaps.Get(ns, name); ok {
		return s, nil
	}
	s, err := c.snapSt.Get(ctx, ns, name)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("reading snapshot %s: %w", name, err)
	}
	return s, nil
}

// fail deletes what the clone made and sets phase Failed.
func (c *Controller) fail(ctx context.Context, key string, cl *apiv1.VirtualMachineClone, msg string) error {
	if err := c.cleanUp(ctx, cl); err != nil {
		return err
	}
	next := proto.Clone(cl).(*apiv1.VirtualMachineClone)
	st := status(next)
	st.Phase = apiv1.CloneFailed
	st.Error = msg
	st.Conditions = apiv1.SetCondition(st.Conditions, &apiv1.Condition{
		Type: apiv1.ConditionFailure, Status: apiv1.ConditionTrue, Reason: "Failed", Message: msg,
	}, c.opts.Clock())
	c.log.Info("clone failed", "clone", key, "error", msg)
	return c.write(ctx, key, next)
}

// cleanUp deletes the restore and the snapshot the clone made. By name
// and from the store, not the cache: one made by the last pass may not
// be cached yet, and the names (from the clone's uid) are this clone's
// alone. A restore that failed has undone its target; one that
// succeeded leaves it, as the clone's result.
func (c *Controller) cleanUp(ctx context.Context, cl *apiv1.VirtualMachineClone) error {
	ns, uid := cl.GetMetadata().GetNamespace(), cl.GetMetadata().GetUid()
	if _, _, err := c.rSt.Delete(ctx, ns, apiv1.CloneRestoreName(uid), store.DeleteOptions{}); err != nil && !errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("deleting restore %s of clone %s: %w", apiv1.CloneRestoreName(uid), cl.GetMetadata().GetName(), err)
	}
	if name := madeSnapshot(cl); name != "" {
		if _, _, err := c.snapSt.Delete(ctx, ns, name, store.DeleteOptions{}); err != nil && !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("deleting snapshot %s of clone %s: %w", name, cl.GetMetadata().GetName(), err)
		}
	}
	return nil
}

func status(cl *apiv1.VirtualMachineClone) *apiv1.VirtualMachineCloneStatus {
	if cl.Status == nil {
		cl.Status = &apiv1.VirtualMachineCloneStatus{}
	}
	return cl.Status
}
