package backup

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/backup/repo"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller"
	"github.com/virtplane/terraform-provider-virtplane/internal/informer"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// The life of a backup (docs/backups.md, "Flow"):
//
//	""         → Pending      finalizer, started, labels of its group
//	Pending    → Pending      base chosen, snapshot made and waited for
//	Pending    → InProgress   node chosen: label, upload finalizer, one write
//	InProgress → Succeeded    the node's upload succeeded (manifest written)
//	*          → Failed       with the cause; the node cleans up
//
// Whatever the outcome, only the newest succeeded backup of a VM to a
// target keeps its snapshot, and only when the snapshot has RBD
// snapshots: the next backup's rbd volumes are diffed from them.

// Reconcile implements controller.Reconciler.
func (c *Backups) Reconcile(ctx context.Context, key string) (controller.Result, error) {
	b, ok := c.backups.GetByKey(key)
	if !ok {
		c.writes.Forget(key)
		return controller.Result{}, nil
	}
	if c.writes.Stale(key, b.GetMetadata().GetResourceVersion()) {
		return controller.Result{RequeueAfter: staleRequeue}, nil
	}
	if b.GetMetadata().GetDeletionTimestamp() != nil {
		return c.finalize(ctx, key, b)
	}
	if !slices.Contains(b.GetMetadata().GetFinalizers(), apiv1.FinalizerBackup) || b.GetStatus().GetPhase() == "" {
		return controller.Result{}, c.start(ctx, key, b)
	}
	switch b.GetStatus().GetPhase() {
	case apiv1.BackupPending:
		return c.pending(ctx, key, b)
	case apiv1.BackupInProgress:
		return c.inProgress(ctx, key, b)
	}
	// Final: settle which snapshot of the group stays.
	return controller.Result{}, c.pruneSnapshots(ctx, b)
}

// start adds the finalizer and sets phase Pending, in one write, before
// anything else exists: a delete always finds the finalizer.
func (c *Backups) start(ctx context.Context, key string, b *apiv1.VirtualMachineBackup) error {
	next := proto.Clone(b).(*apiv1.VirtualMachineBackup)
	if !slices.Contains(next.Metadata.Finalizers, apiv1.FinalizerBackup) {
		next.Metadata.Finalizers = append(next.Metadata.Finalizers, apiv1.FinalizerBackup)
	}
	st := backupStatus(next)
	if st.Phase == "" {
		now := c.opts.Clock.Now()
		st.Phase = apiv1.BackupPending
		st.Started = timestamppb.New(now)
		st.Cluster = c.opts.Cluster
		st.SnapshotName = apiv1.BackupSnapshotName(b.GetMetadata().GetUid())
		st.Conditions = setConditions(st.Conditions, now, apiv1.ConditionTrue, reasonInProgress, "Backup started", false)
	}
	return c.write(ctx, key, next)
}

// pending waits for the VM's snapshot (making it first), then hands the
// upload to a node.
func (c *Backups) pending(ctx context.Context, key string, b *apiv1.VirtualMachineBackup) (controller.Result, error) {
	ns := b.GetMetadata().GetNamespace()
	now := c.opts.Clock.Now()
	t, ok := c.targetInf.Get("", b.GetSpec().GetTarget())
	if !ok {
		return controller.Result{}, c.fail(ctx, key, b, fmt.Sprintf("backup target %q does not exist", b.GetSpec().GetTarget()))
	}
	snap, haveSnap := c.snaps.Get(ns, snapshotName(b))
	vm, ok := c.vms.Get(ns, b.GetSpec().GetSource())
	if !haveSnap {
		switch {
		case !ok && now.Sub(b.GetMetadata().GetCreationTimestamp().AsTime()) < c.opts.SourceGrace:
			return controller.Result{RequeueAfter: c.opts.SourceGrace}, nil
		case !ok:
			return controller.Result{}, c.fail(ctx, key, b, fmt.Sprintf("source VM %q does not exist", b.GetSpec().GetSource()))
		}
		// The VM's uid and the base are fixed before the snapshot: the
		// base must be a backup whose snapshot is older than this one's.
		if b.GetMetadata().GetLabels()[apiv1.LabelBackupVMUID] == "" {
			next := proto.Clone(b).(*apiv1.VirtualMachineBackup)
			c.setGroup(next, vm)
			return controller.Result{}, c.write(ctx, key, next)
		}
		if err := c.createSnapshot(ctx, b); err != nil {
			return controller.Result{}, err
		}
		return controller.Result{}, nil
	}
	if !ownedBy(snap, b) {
		return controller.Result{}, c.fail(ctx, key, b, fmt.Sprintf("snapshot %q exists and is not this backup's", snap.GetMetadata().GetName()))
	}
	switch snap.GetStatus().GetPhase() {
	case apiv1.SnapshotFailed:
		return controller.Result{}, c.fail(ctx, key, b, "snapshot failed: "+snap.GetStatus().GetError())
	case apiv1.SnapshotSucceeded:
	default:
		next := proto.Clone(b).(*apiv1.VirtualMachineBackup)
		st := backupStatus(next)
		st.Conditions = setConditions(st.Conditions, now, apiv1.ConditionTrue, reasonInProgress, "taking the snapshot "+snap.GetMetadata().GetName(), false)
		return controller.Result{}, c.writeIfChanged(ctx, key, b, next)
	}
	ct, ok := c.contents.Get(ns, snap.GetStatus().GetContentName())
	if !ok {
		return controller.Result{RequeueAfter: staleRequeue}, nil
	}
	node, why := c.uploadNode(t, ct)
	if why != "" {
		return controller.Result{}, c.fail(ctx, key, b, why)
	}
	if node == "" {
		next := proto.Clone(b).(*apiv1.VirtualMachineBackup)
		st := backupStatus(next)
		st.Conditions = setConditions(st.Conditions, now, apiv1.ConditionFalse, reasonWaiting, "no Ready node reaches the target and the volumes' storage classes", false)
		return controller.Result{RequeueAfter: retryRequeue}, c.writeIfChanged(ctx, key, b, next)
	}
	next := proto.Clone(b).(*apiv1.VirtualMachineBackup)
	if next.Metadata.Labels == nil {
		next.Metadata.Labels = map[string]string{}
	}
	next.Metadata.Labels[apiv1.LabelNodeName] = node
	if !slices.Contains(next.Metadata.Finalizers, apiv1.FinalizerBackupUpload) {
		next.Metadata.Finalizers = append(next.Metadata.Finalizers, apiv1.FinalizerBackupUpload)
	}
	st := backupStatus(next)
	st.Phase, st.NodeName = apiv1.BackupInProgress, node
	st.Source = proto.Clone(ct.GetSpec().GetSource()).(*apiv1.VirtualMachine)
	st.ContentUid = ct.GetMetadata().GetUid()
	st.SnapshotVolumes = nil
	for _, v := range ct.GetStatus().GetVolumeBackups() {
		st.SnapshotVolumes = append(st.SnapshotVolumes, v.GetVolumeName())
	}
	st.Conditions = setConditions(st.Conditions, now, apiv1.ConditionTrue, reasonInProgress, "node "+node+" uploads the volumes", false)
	c.log.Info("backup handed to a node", "backup", key, "node", node, "base", st.GetBase())
	return controller.Result{}, c.write(ctx, key, next)
}

// setGroup labels next with its VM and target, and picks its base: the
// newest succeeded backup of the same VM (uid) to the same target.
func (c *Backups) setGroup(next *apiv1.VirtualMachineBackup, vm *apiv1.VirtualMachine) {
	md := next.Metadata
	md.Labels = maps.Clone(md.Labels)
	if md.Labels == nil {
		md.Labels = map[string]string{}
	}
	md.Labels[apiv1.LabelBackupVMUID] = vm.GetMetadata().GetUid()
	md.Labels[apiv1.LabelBackupTarget] = next.GetSpec().GetTarget()
	st := backupStatus(next)
	st.SourceUid = vm.GetMetadata().GetUid()
	if base := c.newestSucceeded(groupOf(next), next.GetMetadata().GetUid()); base != nil {
		st.Base, st.BaseBackup = base.GetStatus().GetManifestId(), base.GetMetadata().GetName()
		if s, ok := c.snaps.Get(base.GetMetadata().GetNamespace(), snapshotName(base)); ok {
			if ct, ok := c.contents.Get(s.GetMetadata().GetNamespace(), s.GetStatus().GetContentName()); ok {
				st.BaseContentUid = ct.GetMetadata().GetUid()
			}
		}
	}
}

// newestSucceeded is the newest succeeded backup of group (by creation)
// with a manifest, not being deleted, other than the backup except.
func (c *Backups) newestSucceeded(group, except string) *apiv1.VirtualMachineBackup {
	var best *apiv1.VirtualMachineBackup
	for _, o := range c.backups.ByIndex(groupIndex, group) {
		if o.GetMetadata().GetUid() == except || o.GetStatus().GetPhase() != apiv1.BackupSucceeded ||
			o.GetStatus().GetManifestId() == "" || o.GetMetadata().GetDeletionTimestamp() != nil {
			continue
		}
		if best == nil || newer(o, best) {
			best = o
		}
	}
	return best
}

// newer orders backups by creation, then name.
func newer(a, b *apiv1.VirtualMachineBackup) bool {
	ta, tb := a.GetMetadata().GetCreationTimestamp().AsTime(), b.GetMetadata().GetCreationTimestamp().AsTime()
	if !ta.Equal(tb) {
		return ta.After(tb)
	}
	return a.GetMetadata().GetName() > b.GetMetadata().GetName()
}

func ownedBy(s *apiv1.VirtualMachineSnapshot, b *apiv1.VirtualMachineBackup) bool {
	for _, o := range s.GetMetadata().GetOwnerReferences() {
		if o.GetKind() == apiv1.KindBackup && o.GetUid() == b.GetMetadata().GetUid() {
			return true
		}
	}
	return false
}

// createSnapshot makes the backup's snapshot of its VM: the consistent
// point (guest agent freeze, RBD snapshots, local copies), as any
// snapshot is taken.
func (c *Backups) createSnapshot(ctx context.Context, b *apiv1.VirtualMachineBackup) error {
	md := b.GetMetadata()
	_, err := c.snapSt.Create(ctx, &apiv1.VirtualMachineSnapshot{
		Metadata: &apiv1.ObjectMeta{
			Namespace: md.GetNamespace(), Name: snapshotName(b),
			Labels:          map[string]string{apiv1.LabelBackupVMUID: md.GetLabels()[apiv1.LabelBackupVMUID]},
			OwnerReferences: []*apiv1.OwnerReference{{Kind: apiv1.KindBackup, Name: md.GetName(), Uid: md.GetUid(), Controller: true}},
		},
		Spec: &apiv1.VirtualMachineSnapshotSpec{Source: b.GetSpec().GetSource(), DeletionPolicy: apiv1.DeletionPolicyDelete},
	})
	if err != nil && !errors.Is(err, store.ErrAlreadyExists) {
		return fmt.Errorf("creating snapshot for backup %s: %w", informer.Key(b), err)
	}
	c.log.Info("backup snapshotting its VM", "backup", informer.Key(b), "snapshot", snapshotName(b))
	return nil
}

// inProgress follows the node's upload.
func (c *Backups) inProgress(ctx context.Context, key string, b *apiv1.VirtualMachineBackup) (controller.Result, error) {
	st := b.GetStatus()
	switch st.GetUploadPhase() {
	case apiv1.BackupSucceeded:
		return controller.Result{}, c.succeed(ctx, key, b)
	case apiv1.BackupFailed:
		return controller.Result{}, c.fail(ctx, key, b, "upload failed: "+st.GetUploadError())
	}
	if node := st.GetNodeName(); c.opts.NodeGone(node) {
		return controller.Result{}, c.fail(ctx, key, b, fmt.Sprintf("node %s, which uploaded the backup, was deleted", node))
	}
	msg := "node " + st.GetNodeName() + " uploads the volumes"
	if m := st.GetMessage(); m != "" {
		msg += ": " + m
	}
	next := proto.Clone(b).(*apiv1.VirtualMachineBackup)
	nst := backupStatus(next)
	nst.Conditions = setConditions(nst.Conditions, c.opts.Clock.Now(), apiv1.ConditionTrue, reasonInProgress, msg, false)
	return controller.Result{}, c.writeIfChanged(ctx, key, b, next)
}

func (c *Backups) succeed(ctx context.Context, key string, b *apiv1.VirtualMachineBackup) error {
	next := proto.Clone(b).(*apiv1.VirtualMachineBackup)
	st := backupStatus(next)
	now := c.opts.Clock.Now()
	st.Phase = apiv1.BackupSucceeded
	st.Completed = timestamppb.New(now)
	st.Error = ""
	st.Conditions = setConditions(st.Conditions, now, apiv1.ConditionFalse, reasonSucceeded, "Operation complete", true)
	if err := c.write(ctx, key, next); err != nil {
		return err
	}
	var written int64
	for _, v := range st.GetVolumes() {
		written += v.GetBytesWritten()
	}
	c.log.Info("backup succeeded", "backup", key, "manifest", st.GetManifestId(), "base", st.GetBase(), "bytes_written", written)
	return nil
}

// fail ends a backup with msg. The node (if it had the upload) cleans
// up and drops its finalizer; its snapshot goes with pruneSnapshots.
func (c *Backups) fail(ctx context.Context, key string, b *apiv1.VirtualMachineBackup, msg string) error {
	next := proto.Clone(b).(*apiv1.VirtualMachineBackup)
	st := backupStatus(next)
	now := c.opts.Clock.Now()
	st.Phase = apiv1.BackupFailed
	st.Error = msg
	st.Completed = timestamppb.New(now)
	st.Conditions = setConditions(st.Conditions, now, apiv1.ConditionFalse, reasonFailed, msg, false)
	if err := c.write(ctx, key, next); err != nil {
		return err
	}
	c.log.Info("backup failed", "backup", key, "error", msg)
	return nil
}

// finalize is a deleted backup's clean-up: the node's upload stopped
// (its finalizer gone, or its node deleted), the manifest deleted when
// the policy says so, the snapshot deleted, the finalizer released.
func (c *Backups) finalize(ctx context.Context, key string, b *apiv1.VirtualMachineBackup) (controller.Result, error) {
	md := b.GetMetadata()
	if !slices.Contains(md.GetFinalizers(), apiv1.FinalizerBackup) {
		return controller.Result{}, nil
	}
	if slices.Contains(md.GetFinalizers(), apiv1.FinalizerBackupUpload) {
		if !c.opts.NodeGone(b.GetStatus().GetNodeName()) {
			return controller.Result{RequeueAfter: nodeGoneRecheck}, nil // the node's release brings it back
		}
		next := proto.Clone(b).(*apiv1.VirtualMachineBackup)
		next.Metadata.Finalizers = removeString(next.Metadata.Finalizers, apiv1.FinalizerBackupUpload)
		return controller.Result{}, c.write(ctx, key, next)
	}
	if id := b.GetStatus().GetManifestId(); id != "" && b.GetSpec().GetDeletionPolicy() == apiv1.DeletionPolicyDelete {
		if err := c.deleteManifest(ctx, b, id); err != nil {
			return controller.Result{}, err
		}
	}
	if err := c.deleteSnapshot(ctx, b); err != nil {
		return controller.Result{}, err
	}
	next := proto.Clone(b).(*apiv1.VirtualMachineBackup)
	next.Metadata.Finalizers = removeString(next.Metadata.Finalizers, apiv1.FinalizerBackup)
	if err := c.write(ctx, key, next); err != nil {
		return controller.Result{}, err
	}
	c.log.Info("backup released", "backup", key, "data_kept", b.GetSpec().GetDeletionPolicy() != apiv1.DeletionPolicyDelete)
	return controller.Result{}, nil
}

func (c *Backups) deleteManifest(ctx context.Context, b *apiv1.VirtualMachineBackup, id string) error {
	t, ok := c.targetInf.Get("", b.GetSpec().GetTarget())
	if !ok {
		// The API refuses to delete a target backups name; one gone
		// anyway took its data out of reach.
		c.log.Warn("backup's target is gone: its data is left where it was", "backup", informer.Key(b), "target", b.GetSpec().GetTarget())
		return nil
	}
	st, err := c.targets.Store(ctx, t)
	if err != nil {
		return fmt.Errorf("deleting the data of backup %s: opening target %s: %w", informer.Key(b), t.GetMetadata().GetName(), err)
	}
	if err := repo.New(st, c.opts.Repo).DeleteManifest(ctx, id); err != nil {
		return fmt.Errorf("deleting the manifest of backup %s: %w", informer.Key(b), err)
	}
	c.log.Info("backup manifest deleted", "backup", informer.Key(b), "target", t.GetMetadata().GetName(), "manifest", id)
	return nil
}

func (c *Backups) deleteSnapshot(ctx context.Context, b *apiv1.VirtualMachineBackup) error {
	s, ok := c.snaps.Get(b.GetMetadata().GetNamespace(), snapshotName(b))
	if !ok || !ownedBy(s, b) || s.GetMetadata().GetDeletionTimestamp() != nil {
		return nil
	}
	_, _, err := c.snapSt.Delete(ctx, s.GetMetadata().GetNamespace(), s.GetMetadata().GetName(), store.DeleteOptions{UID: s.GetMetadata().GetUid()})
	if err != nil && !errors.Is(err, store.ErrNotFound) && !errors.Is(err, store.ErrConflict) {
		return fmt.Errorf("deleting the snapshot of backup %s: %w", informer.Key(b), err)
	}
	return nil
}

// pruneSnapshots deletes the snapshot of final backup b unless it is the
// newest succeeded backup of its group, its VM still exists, and it holds
// RBD snapshots (what the next backup's rbd volumes diff from). Its local copies are gone
// already: the node removed them after the upload.
func (c *Backups) pruneSnapshots(ctx context.Context, b *apiv1.VirtualMachineBackup) error {
	if c.keepsSnapshot(b) {
		return nil
	}
	return c.deleteSnapshot(ctx, b)
}

func (c *Backups) keepsSnapshot(b *apiv1.VirtualMachineBackup) bool {
	if b.GetStatus().GetPhase() != apiv1.BackupSucceeded {
		return false
	}
	// A VM that is gone has no next backup: its snapshot would only keep
	// its images (and their data) in the pool.
	if vm, ok := c.vms.Get(b.GetMetadata().GetNamespace(), b.GetSpec().GetSource()); !ok ||
		vm.GetMetadata().GetUid() != b.GetMetadata().GetLabels()[apiv1.LabelBackupVMUID] {
		return false
	}
	newest := c.newestSucceeded(groupOf(b), "")
	if newest == nil || newest.GetMetadata().GetUid() != b.GetMetadata().GetUid() {
		return false
	}
	s, ok := c.snaps.Get(b.GetMetadata().GetNamespace(), snapshotName(b))
	if !ok {
		return false
	}
	ct, ok := c.contents.Get(s.GetMetadata().GetNamespace(), s.GetStatus().GetContentName())
	if !ok {
		return true // not in the cache yet: decided when it is
	}
	for _, v := range ct.GetStatus().GetVolumeBackups() {
		if v.OnRBD() {
			return true
		}
	}
	return false
}

// uploadNode is the node that uploads content ct to target t: the
// content's node (it holds the local copies, or ran the VM), else a Ready
// node the target and the classes of the RBD snapshots select. "" with
// no why: none now, wait. why says why the backup cannot be made.
func (c *Backups) uploadNode(t *apiv1.BackupTarget, ct *apiv1.VirtualMachineSnapshotContent) (node, why string) {
	if n := ct.GetSpec().GetNodeName(); n != "" {
		nd, ok := c.nodes.Get("", n)
		if !ok {
			return "", fmt.Sprintf("node %s, which holds the snapshot's copies, does not exist", n)
		}
		if !t.SelectsNode(nd.GetMetadata().GetLabels()) {
			return "", fmt.Sprintf("backup target %q does not select node %s, which holds the VM's volumes (spec.node_selector of the target)", t.GetMetadata().GetName(), n)
		}
		return n, ""
	}
	var classes []*apiv1.StorageClass
	for _, v := range ct.GetStatus().GetVolumeBackups() {
		if !v.OnRBD() {
			continue
		}
		sc, ok := c.classes.Get("", v.GetStorageClass())
		if !ok {
			return "", fmt.Sprintf("storage class %q of volume %q does not exist", v.GetStorageClass(), v.GetVolumeName())
		}
		classes = append(classes, sc)
	}
	return pickNode(c.nodes.List(), t, classes), ""
}
