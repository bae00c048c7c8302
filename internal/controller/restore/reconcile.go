package restore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// Reconcile implements controller.Reconciler.
func (c *Controller) Reconcile(ctx context.Context, key string) (controller.Result, error) {
	r, ok := c.restores.GetByKey(key)
	if !ok {
		c.writes.Forget(key)
		return controller.Result{}, nil
	}
	if c.writes.Stale(key, r.GetMetadata().GetResourceVersion()) {
		return controller.Result{RequeueAfter: staleRequeue}, nil
	}
	if r.GetMetadata().GetDeletionTimestamp() != nil {
		if c.heldByGoneNode(r) {
			// Its node was deleted: nobody else will drop the node's
			// finalizer, and the restore could never go.
			next := proto.Clone(r).(*apiv1.VirtualMachineRestore)
			next.Metadata.Finalizers = slices.DeleteFunc(next.Metadata.Finalizers, func(f string) bool { return f == apiv1.FinalizerRestoreData })
			return controller.Result{}, c.write(ctx, key, next)
		}
		return c.finalize(ctx, key, r)
	}
	if !slices.Contains(r.GetMetadata().GetFinalizers(), apiv1.FinalizerRestore) || r.GetStatus().GetPhase() == "" {
		// Before anything is locked or made: a delete always finds the
		// finalizer that undoes it.
		next := proto.Clone(r).(*apiv1.VirtualMachineRestore)
		if !slices.Contains(next.Metadata.Finalizers, apiv1.FinalizerRestore) {
			next.Metadata.Finalizers = append(next.Metadata.Finalizers, apiv1.FinalizerRestore)
		}
		st := status(next)
		if st.Phase == "" {
			st.Phase = apiv1.RestorePending
			c.setConditions(st, apiv1.ConditionTrue, reasonInProgress, "Restore started", false)
		}
		return controller.Result{}, c.write(ctx, key, next)
	}
	switch r.GetStatus().GetPhase() {
	case apiv1.RestorePending:
		return c.pending(ctx, key, r)
	case apiv1.RestoreStaging:
		return c.staging(ctx, key, r)
	case apiv1.RestoreCommitting:
		return c.committing(ctx, key, r)
	case apiv1.RestoreFailed:
		// Repeated after a crash between the Failed write and the
		// clean-up it follows.
		return controller.Result{}, c.undo(ctx, r, false)
	case apiv1.RestoreSucceeded:
		return controller.Result{}, c.unlock(ctx, r, false)
	}
	return controller.Result{}, controller.TerminalError(fmt.Errorf("restore %s: unknown phase %q", key, r.GetStatus().GetPhase()))
}

// pending checks the snapshot and the target, makes or locks the target,
// and hands the volumes to the node in one write.
func (c *Controller) pending(ctx context.Context, key string, r *apiv1.VirtualMachineRestore) (controller.Result, error) {
	ns, snapName, target := r.GetMetadata().GetNamespace(), r.GetSpec().GetSnapshot(), r.GetSpec().GetTarget()
	snap, ok := c.snaps.Get(ns, snapName)
	switch {
	case !ok:
		return c.wait(ctx, key, r, fmt.Sprintf("VMSnapshot %q does not exist", snapName), 0)
	case snap.GetMetadata().GetDeletionTimestamp() != nil:
		return c.fail(ctx, key, r, fmt.Sprintf("VMSnapshot %q is being deleted", snapName))
	case snap.GetStatus().GetPhase() == apiv1.SnapshotFailed:
		return c.fail(ctx, key, r, fmt.Sprintf("VMSnapshot %q failed: %s", snapName, snap.GetStatus().GetError()))
	case snap.GetStatus().GetPhase() != apiv1.SnapshotSucceeded || !snap.GetStatus().GetReadyToUse():
		return c.wait(ctx, key, r, fmt.Sprintf("VMSnapshot %q not ready", snapName), 0)
	}
	ct, ok := c.contents.Get(ns, snap.GetStatus().GetContentName())
	switch {
	case !ok || ct.GetSpec().GetSnapshotUid() != snap.GetMetadata().GetUid():
		return c.wait(ctx, key, r, fmt.Sprintf("VMSnapshotContent %q does not exist", snap.GetStatus().GetContentName()), 0)
	case ct.GetMetadata().GetDeletionTimestamp() != nil:
		return c.fail(ctx, key, r, fmt.Sprintf("VMSnapshotContent %q is being deleted", ct.GetMetadata().GetName()))
	case copiesOnNode(ct) && c.nodeGone(ct.GetSpec().GetNodeName()):
		return c.fail(ctx, key, r, fmt.Sprintf("the snapshot's copies were on node %q, which was deleted", ct.GetSpec().GetNodeName()))
	}

	vm, exists := c.vms.Get(ns, target)
	if !exists && r.GetStatus().GetTargetUid() != "" {
		// The restore made its target; the VM cache may not have it yet.
		var err error
		if vm, exists, err = c.storedTarget(ctx, ns, target); err != nil {
			return controller.Result{}, err
		}
	}
	made := exists && c.madeByUs(r, vm)
	switch {
	case !exists && r.GetStatus().GetTargetUid() != "":
		return c.fail(ctx, key, r, fmt.Sprintf("restore target %q was deleted", target))
	case !exists:
		created, err := c.createTarget(ctx, r, ct)
		if err != nil || created == nil {
			return controller.Result{}, err
		}
		vm, made = created, true
	case vm.GetMetadata().GetDeletionTimestamp() != nil:
		return c.fail(ctx, key, r, fmt.Sprintf("restore target %q is being deleted", target))
	case !made:
		if res, done, err := c.checkExisting(ctx, key, r, ct, vm); done {
			return res, err
		}
		locked, why, err := c.lock(ctx, r, vm)
		switch {
		case err != nil:
			return controller.Result{}, err
		case why != "":
			return c.wait(ctx, key, r, why, waitRequeue)
		case locked == nil:
			return c.fail(ctx, key, r, fmt.Sprintf("restore target %q was deleted", target))
		}
		vm = locked
	}
	return controller.Result{}, c.stage(ctx, key, r, ct, vm, made)
}

// madeByUs reports a target this restore made: recorded in its status, or
// (after a crash between the create and that write) carrying its
// annotation and lock, which only the create gives a VM before Staging.
func (c *Controller) madeByUs(r *apiv1.VirtualMachineRestore, vm *apiv1.VirtualMachine) bool {
	st := r.GetStatus()
	if st.GetTargetCreated() {
		return vm.GetMetadata().GetUid() == st.GetTargetUid()
	}
	return st.GetTargetUid() == "" &&
		vm.GetMetadata().GetAnnotations()[apiv1.AnnotationLastRestore] == apiv1.LastRestoreValue(r.GetMetadata().GetName(), r.GetMetadata().GetUid()) &&
		vm.GetStatus().GetRestoreInProgress() == r.GetMetadata().GetName()
}

// checkExisting applies KubeVirt's rules to a target that exists: it must
// be the snapshot's VM, on the snapshot's node, and stopped (the
// readiness policy says how long to wait, or whether to stop it). done
// means the pass ends here with res and err.
func (c *Controller) checkExisting(ctx context.Context, key string, r *apiv1.VirtualMachineRestore,
	ct *apiv1.VirtualMachineSnapshotContent, vm *apiv1.VirtualMachine) (res controller.Result, done bool, err error) {
	target := r.GetSpec().GetTarget()
	switch uid := r.GetStatus().GetTargetUid(); {
	case uid != "" && uid != vm.GetMetadata().GetUid():
		res, err = c.fail(ctx, key, r, fmt.Sprintf("restore target %q was replaced by another VM", target))
		return res, true, err
	case vm.GetMetadata().GetUid() != ct.GetSpec().GetSource().GetMetadata().GetUid():
		res, err = c.fail(ctx, key, r, "restore source and restore target are different but restore target already exists")
		return res, true, err
	}
	if n, want := vm.GetStatus().GetNodeName(), ct.GetSpec().GetNodeName(); n != "" && n != want && localCopies(ct) {
		res, err = c.fail(ctx, key, r, fmt.Sprintf("restore target %q has its volumes on node %q but the snapshot's data is on node %q", target, n, want))
		return res, true, err
	}
	vmi, running := c.vmis.Get(vm.GetMetadata().GetNamespace(), vm.GetMetadata().GetName())
	if !running {
		return controller.Result{}, false, nil
	}
	res, err = c.targetRunning(ctx, key, r, vm, vmi)
	return res, true, err
}

// targetRunning applies the readiness policy to a target that has an
// instance (KubeVirt's: ready only when no VMI exists).
func (c *Controller) targetRunning(ctx context.Context, key string, r *apiv1.VirtualMachineRestore,
	vm *apiv1.VirtualMachine, vmi *apiv1.VirtualMachineInstance) (controller.Result, error) {
	switch r.GetSpec().GetTargetReadinessPolicy() {
	case apiv1.ReadinessFailImmediate:
		return c.fail(ctx, key, r, "Restore target VMI must be powered off before restore operation")
	case apiv1.ReadinessStopTarget:
		if err := c.stopTarget(ctx, vm, vmi); err != nil {
			return controller.Result{}, err
		}
		return c.wait(ctx, key, r, "Automatically stopping restore target for restore operation", waitRequeue)
	case apiv1.ReadinessWaitEventually:
		return c.wait(ctx, key, r, "Waiting for target VM to be powered off", waitRequeue)
	default: // WaitGracePeriod
		grace := time.Duration(apiv1.RestoreGracePeriodSeconds) * time.Second
		left := r.GetMetadata().GetCreationTimestamp().AsTime().Add(grace).Sub(c.opts.Clock())
		if left <= 0 {
			return c.fail(ctx, key, r, fmt.Sprintf("Restore target failed to be ready within %s. Please power off the target VM before attempting restore", grace))
		}
		return c.wait(ctx, key, r, "Waiting for target VM to be powered off", left)
	}
}

// stage is the one write that ends Pending: the target, the node and the
// copies to stage, labelled for that node and held by its finalizer
// until it dropped them. RBD snapshots are the server's storage
// controller's to stage (storage_staged), with no node. A part with
// nothing to do is done from the start, and a restore with nothing to
// stage goes straight to Committing.
func (c *Controller) stage(ctx context.Context, key string, r *apiv1.VirtualMachineRestore,
	ct *apiv1.VirtualMachineSnapshotContent, vm *apiv1.VirtualMachine, made bool) error {
	next := proto.Clone(r).(*apiv1.VirtualMachineRestore)
	st := status(next)
	st.TargetUid = vm.GetMetadata().GetUid()
	if made {
		// The new VM already has the snapshot's spec.
		st.TargetCreated, st.SpecRestored = true, true
	}
	st.Restores = nil
	files, rbds := 0, 0
	for _, b := range ct.GetStatus().GetVolumeBackups() {
		st.Restores = append(st.Restores, &apiv1.VolumeRestore{VolumeName: b.GetVolumeName(), SourcePath: b.GetPath(),
			StorageClass: b.GetStorageClass(), RbdSnapshot: b.GetRbdSnapshot()})
		if b.OnRBD() {
			rbds++
		} else {
			files++
		}
	}
	st.Staged, st.Swapped = files == 0, files == 0
	st.StorageStaged, st.StorageSwapped = rbds == 0, rbds == 0
	if files > 0 {
		st.NodeName = ct.GetSpec().GetNodeName()
	}
	if len(st.Restores) == 0 {
		st.Phase = apiv1.RestoreCommitting
		st.Message = "Restoring the target's spec"
	} else {
		st.Phase = apiv1.RestoreStaging
		st.Message = "Copying the snapshot's volumes beside the target's"
		if rbds > 0 && files == 0 {
			st.Message = "Cloning the snapshot's RBD snapshots beside the target's volumes"
		}
	}
	if files > 0 {
		if next.Metadata.Labels == nil {
			next.Metadata.Labels = map[string]string{}
		}
		next.Metadata.Labels[apiv1.LabelNodeName] = st.NodeName
		if !slices.Contains(next.Metadata.Finalizers, apiv1.FinalizerRestoreData) {
			next.Metadata.Finalizers = append(next.Metadata.Finalizers, apiv1.FinalizerRestoreData)
		}
	}
	c.setConditions(st, apiv1.ConditionTrue, reasonInProgress, st.Message, false)
	if err := c.write(ctx, key, next); err != nil {
		return err
	}
	c.log.Info("restore staging", "restore", key, "target", r.GetSpec().GetTarget(), "node", st.NodeName, "files", files, "rbd", rbds)
	return nil
}

// copiesOnNode reports whether a content has copies a node restores
// (files: local volumes' on its disk, shared ones' on the class).
func copiesOnNode(ct *apiv1.VirtualMachineSnapshotContent) bool {
	return slices.ContainsFunc(ct.GetStatus().GetVolumeBackups(), func(b *apiv1.VolumeBackup) bool { return !b.OnRBD() })
}

// localCopies reports whether a content has copies of local volumes,
// which pin their VM to the content's node.
func localCopies(ct *apiv1.VirtualMachineSnapshotContent) bool {
	return slices.ContainsFunc(ct.GetStatus().GetVolumeBackups(), (*apiv1.VolumeBackup).OnNodeDisk)
}

// storageDone reports whether the storage controller's part of a restore
// is done (flag, its storage_staged or storage_swapped): set, or nothing
// to do (no RBD snapshot to restore, as in a restore older than that
// part).
func storageDone(st *apiv1.VirtualMachineRestoreStatus, flag bool) bool {
	return flag || !slices.ContainsFunc(st.GetRestores(), (*apiv1.VolumeRestore).OnRBD)
}

// nodeGone reports whether node is deleted (Options.NodeGone).
func (c *Controller) nodeGone(node string) bool {
	return node != "" && c.opts.NodeGone != nil && c.opts.NodeGone(node)
}

// staging waits for the node's copies; any failure before they are
// committed ends the restore with the target as it was.
func (c *Controller) staging(ctx context.Context, key string, r *apiv1.VirtualMachineRestore) (controller.Result, error) {
	ns := r.GetMetadata().GetNamespace()
	st := r.GetStatus()
	if st.GetError() != "" {
		return c.fail(ctx, key, r, st.GetError())
	}
	if snap, ok := c.snaps.Get(ns, r.GetSpec().GetSnapshot()); !ok || snap.GetMetadata().GetDeletionTimestamp() != nil {
		return c.fail(ctx, key, r, fmt.Sprintf("VMSnapshot %q was deleted", r.GetSpec().GetSnapshot()))
	}
	vm, ok := c.vms.Get(ns, r.GetSpec().GetTarget())
	if !ok || vm.GetMetadata().GetUid() != st.GetTargetUid() {
		// The cache may not have the target this restore made yet.
		var err error
		if vm, ok, err = c.storedTarget(ctx, ns, r.GetSpec().GetTarget()); err != nil {
			return controller.Result{}, err
		}
	}
	if !ok || vm.GetMetadata().GetUid() != st.GetTargetUid() || vm.GetMetadata().GetDeletionTimestamp() != nil {
		return c.fail(ctx, key, r, fmt.Sprintf("restore target %q was deleted", r.GetSpec().GetTarget()))
	}
	if !st.GetStaged() || !storageDone(st, st.GetStorageStaged()) {
		return controller.Result{}, nil // the node's or the storage controller's write brings the restore back
	}
	// The commit point.
	next := proto.Clone(r).(*apiv1.VirtualMachineRestore)
	next.Status.Phase = apiv1.RestoreCommitting
	next.Status.Message = "Replacing the target's volumes"
	c.setConditions(next.Status, apiv1.ConditionTrue, reasonInProgress, next.Status.Message, false)
	if err := c.write(ctx, key, next); err != nil {
		return controller.Result{}, err
	}
	c.log.Info("restore committing", "restore", key)
	return controller.Result{}, nil
}

// status is r's status, made when missing.
func status(r *apiv1.VirtualMachineRestore) *apiv1.VirtualMachineRestoreStatus {
	if r.Status == nil {
		r.Status = &apiv1.VirtualMachineRestoreStatus{}
	}
	return r.Status
}

// write stores next with compare-and-swap on the cached version it was
// cloned from; a conflict is returned (the newer version's event
// requeues).
func (c *Controller) write(ctx context.Context, key string, next *apiv1.VirtualMachineRestore) error {
	out, err := c.rSt.Update(ctx, next)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil
	case err != nil:
		return fmt.Errorf("writing restore %s: %w", key, err)
	}
	if out.GetMetadata().GetDeletionTimestamp() == nil || len(out.GetMetadata().GetFinalizers()) > 0 {
		c.writes.Wrote(key, out.GetMetadata().GetResourceVersion())
	}
	return nil
}

// wait records what the restore waits for, if that changed, and looks
// again after requeue (0: only on an event).
func (c *Controller) wait(ctx context.Context, key string, r *apiv1.VirtualMachineRestore, msg string, requeue time.Duration) (controller.Result, error) {
	next := proto.Clone(r).(*apiv1.VirtualMachineRestore)
	st := status(next)
	st.Message = msg
	c.setConditions(st, apiv1.ConditionFalse, reasonWaiting, msg, false)
	if !proto.Equal(r, next) {
		if err := c.write(ctx, key, next); err != nil {
			return controller.Result{}, err
		}
	}
	return controller.Result{RequeueAfter: requeue}, nil
}

// Condition type and reasons (KubeVirt's Progressing, Ready, Failure).
const (
	ConditionProgressing = "Progressing"

	reasonInProgress = "InProgress"
	reasonWaiting    = "Waiting"
	reasonComplete   = "Complete"
	reasonFailed     = "Failed"
)

func (c *Controller) setConditions(st *apiv1.VirtualMachineRestoreStatus, progressing, reason, msg string, ready bool) {
	now := c.opts.Clock()
	st.Conditions = apiv1.SetCondition(st.Conditions, &apiv1.Condition{
		Type: ConditionProgressing, Status: progressing, Reason: reason, Message: msg,
	}, now)
	rs, rr := apiv1.ConditionFalse, "NotReady"
	if ready {
		rs, rr = apiv1.ConditionTrue, "Ready"
	}
	st.Conditions = apiv1.SetCondition(st.Conditions, &apiv1.Condition{Type: apiv1.ConditionReady, Status: rs, Reason: rr}, now)
}

// now is the clock as a timestamp.
func (c *Controller) now() *timestamppb.Timestamp { return timestamppb.New(c.opts.Clock()) }

// heldByGoneNode reports whether r waits for the data finalizer of a node
// that was deleted (Options.NodeGone), once its own clean-up is done: a
// restore in Committing rolls forward first, which needs the node.
func (c *Controller) heldByGoneNode(r *apiv1.VirtualMachineRestore) bool {
	node := r.GetMetadata().GetLabels()[apiv1.LabelNodeName]
	return node != "" && c.opts.NodeGone != nil && !slices.Contains(r.GetMetadata().GetFinalizers(), apiv1.FinalizerRestore) &&
		slices.Contains(r.GetMetadata().GetFinalizers(), apiv1.FinalizerRestoreData) && c.opts.NodeGone(node)
}

// storedTarget reads the target VM from the store: before a restore fails
// for a target the VM cache lacks, the store decides whether it is gone
// (the cache follows the store a moment late, and a target the restore
// just made may not be in it yet).
func (c *Controller) storedTarget(ctx context.Context, ns, name string) (*apiv1.VirtualMachine, bool, error) {
	vm, err := c.vmSt.Get(ctx, ns, name)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, false, nil
	case err != nil:
		return nil, false, fmt.Errorf("reading restore target %s: %w", apiv1.Ref(ns, name), err)
	}
	return vm, true, nil
}
