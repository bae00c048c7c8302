package snapshot

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
	s, ok := c.snaps.GetByKey(key)
	if !ok {
		c.writes.Forget(key)
		return controller.Result{}, nil
	}
	if c.writes.Stale(key, s.GetMetadata().GetResourceVersion()) {
		// The cache does not show our last write yet; its event brings
		// the key back.
		return controller.Result{RequeueAfter: staleRequeue}, nil
	}
	if s.GetMetadata().GetDeletionTimestamp() != nil {
		return c.finalize(ctx, key, s)
	}
	if !slices.Contains(s.GetMetadata().GetFinalizers(), apiv1.FinalizerSnapshot) || s.GetStatus().GetPhase() == "" {
		return controller.Result{}, c.start(ctx, key, s)
	}
	switch s.GetStatus().GetPhase() {
	case apiv1.SnapshotSucceeded:
		return controller.Result{}, c.unlock(ctx, s, false)
	case apiv1.SnapshotFailed:
		// Repeated after a crash between the snapshot's write and these.
		if err := c.abandon(ctx, s); err != nil {
			return controller.Result{}, err
		}
		if c.nodeUndoing(s) {
			return controller.Result{}, nil // the content's release brings it back
		}
		return controller.Result{}, c.unlock(ctx, s, false)
	}
	return c.progress(ctx, key, s)
}

// start adds the finalizer and sets phase InProgress and the deadline, in
// one write, before anything else exists: a delete always finds the
// finalizer that lets it clean up.
func (c *Controller) start(ctx context.Context, key string, s *apiv1.VirtualMachineSnapshot) error {
	next := proto.Clone(s).(*apiv1.VirtualMachineSnapshot)
	if !slices.Contains(next.Metadata.Finalizers, apiv1.FinalizerSnapshot) {
		next.Metadata.Finalizers = append(next.Metadata.Finalizers, apiv1.FinalizerSnapshot)
	}
	st := status(next)
	if st.Phase == "" {
		st.Phase = apiv1.SnapshotInProgress
		st.ContentName = apiv1.SnapshotContentName(s.GetMetadata().GetUid())
		if d := deadlineSeconds(s); d > 0 {
			created := s.GetMetadata().GetCreationTimestamp().AsTime()
			st.FailureDeadline = timestamppb.New(created.Add(time.Duration(d) * time.Second))
		}
		c.setConditions(st, apiv1.ConditionFalse, reasonInProgress, "Snapshot started", false, reasonNotReady)
	}
	return c.write(ctx, key, next)
}

// deadlineSeconds is the snapshot's failure deadline, defaulted; 0 is none.
func deadlineSeconds(s *apiv1.VirtualMachineSnapshot) int64 {
	if s.GetSpec().FailureDeadlineSeconds == nil {
		return apiv1.DefaultSnapshotFailureDeadlineSeconds
	}
	return s.GetSpec().GetFailureDeadlineSeconds()
}

// progress moves an InProgress snapshot on: deadline, outcome of the
// content, or lock and content.
func (c *Controller) progress(ctx context.Context, key string, s *apiv1.VirtualMachineSnapshot) (controller.Result, error) {
	now := c.opts.Clock()
	var untilDeadline time.Duration
	if dl := s.GetStatus().GetFailureDeadline(); dl != nil {
		untilDeadline = dl.AsTime().Sub(now)
		if untilDeadline <= 0 {
			return controller.Result{}, c.fail(ctx, key, s, msgDeadlineExceeded)
		}
	}
	// wait requeues at the deadline at the latest, so a snapshot nothing
	// else happens to is failed on time.
	wait := func(d time.Duration) controller.Result {
		if untilDeadline > 0 && (d == 0 || untilDeadline < d) {
			d = untilDeadline
		}
		return controller.Result{RequeueAfter: d}
	}
	ns := s.GetMetadata().GetNamespace()
	if ct, ok := c.contents.Get(ns, contentName(s)); ok && ct.GetSpec().GetSnapshotUid() == s.GetMetadata().GetUid() {
		switch ct.GetStatus().GetPhase() {
		case apiv1.SnapshotSucceeded:
			return controller.Result{}, c.succeed(ctx, key, s, ct)
		case apiv1.SnapshotFailed:
			return controller.Result{}, c.fail(ctx, key, s, "snapshot content failed: "+ct.GetStatus().GetError())
		}
		msg := "Source locked and operation in progress"
		if m := ct.GetStatus().GetMessage(); m != "" {
			msg += ": " + m
		}
		return wait(0), c.setProgress(ctx, key, s, apiv1.ConditionTrue, reasonInProgress, msg)
	}

	vm, ok := c.vms.Get(ns, s.GetSpec().GetSource())
	if !ok || (s.GetStatus().GetSourceUid() != "" && vm.GetMetadata().GetUid() != s.GetStatus().GetSourceUid()) {
		// Not failed: the deadline does that, as KubeVirt's does.
		return wait(0), c.setProgress(ctx, key, s, apiv1.ConditionFalse, reasonSourceMissing, "Source does not exist")
	}
	locked, err := c.lock(ctx, s, vm)
	var nl *notLockedError
	switch {
	case errors.As(err, &nl):
		return wait(lockRetry), c.setProgress(ctx, key, s, apiv1.ConditionFalse, reasonNotLocked, "Source not locked: "+nl.why)
	case err != nil:
		return controller.Result{}, err
	case locked == nil:
		return wait(0), c.setProgress(ctx, key, s, apiv1.ConditionFalse, reasonSourceMissing, "Source does not exist")
	}
	if err := c.createContent(ctx, s, locked); err != nil {
		return controller.Result{}, err
	}
	next := proto.Clone(s).(*apiv1.VirtualMachineSnapshot)
	st := status(next)
	st.SourceUid = locked.GetMetadata().GetUid()
	st.ContentName = contentName(s)
	c.setConditions(st, apiv1.ConditionTrue, reasonInProgress, "Source locked and operation in progress", false, reasonNotReady)
	return wait(0), c.writeIfChanged(ctx, key, s, next)
}

// contentName is the snapshot's content: from its status, else by uid.
func contentName(s *apiv1.VirtualMachineSnapshot) string {
	if n := s.GetStatus().GetContentName(); n != "" {
		return n
	}
	return apiv1.SnapshotContentName(s.GetMetadata().GetUid())
}

// createContent makes the content from the locked VM (docs/snapshots.md
// step 2) and gives it to whoever takes the snapshot: the node of the
// running instance (online: it freezes the guest), else the node that
// holds the VM's local volumes, else, when the volumes to copy are all
// on rbd classes, no node: the server's storage controller takes the RBD
// snapshots, whatever became of the nodes. A VM that never ran has no
// volumes anywhere, and one without persistent volumes has nothing to
// copy: its content only holds the spec and is done at once.
func (c *Controller) createContent(ctx context.Context, s *apiv1.VirtualMachineSnapshot, vm *apiv1.VirtualMachine) error {
	vmMeta := vm.GetMetadata()
	node := vm.GetStatus().GetNodeName()
	online := false
	if vmi, ok := c.vmis.Get(vmMeta.GetNamespace(), vmMeta.GetName()); ok && apiv1.IsControlledBy(vmi, vm) &&
		!apiv1.IsFinal(vmi.GetStatus().GetPhase()) && vmi.GetStatus().GetNodeName() != "" {
		node, online = vmi.GetStatus().GetNodeName(), true
	}
	var volumes []string
	onRBD, onNode := false, false
	for _, v := range vm.GetSpec().GetTemplate().GetSpec().GetVolumes() {
		if pv := v.GetPersistent(); pv != nil {
			volumes = append(volumes, v.GetName())
			if c.onRBD(pv) {
				onRBD = true
			} else {
				onNode = true
			}
		}
	}
	if !online && !onNode {
		node = "" // nothing for a node to copy or freeze
	}
	ct := &apiv1.VirtualMachineSnapshotContent{
		Metadata: &apiv1.ObjectMeta{Namespace: s.GetMetadata().GetNamespace(), Name: contentName(s)},
		Spec: &apiv1.VirtualMachineSnapshotContentSpec{
			SnapshotName: s.GetMetadata().GetName(),
			SnapshotUid:  s.GetMetadata().GetUid(),
			Source: &apiv1.VirtualMachine{
				Metadata: &apiv1.ObjectMeta{
					Namespace: vmMeta.GetNamespace(), Name: vmMeta.GetName(), Uid: vmMeta.GetUid(),
					Labels: vmMeta.GetLabels(), Annotations: vmMeta.GetAnnotations(),
				},
				Spec: proto.Clone(vm.GetSpec()).(*apiv1.VirtualMachineSpec),
			},
			NodeName: node,
			Volumes:  volumes,
		},
	}
	switch {
	case len(volumes) == 0 || node == "" && !onRBD:
		ct.Status = &apiv1.VirtualMachineSnapshotContentStatus{
			Phase: apiv1.SnapshotSucceeded, CreationTime: timestamppb.New(c.opts.Clock()), ReadyToUse: true,
		}
	case node != "":
		ct.Metadata.Labels = map[string]string{apiv1.LabelNodeName: node}
		ct.Metadata.Finalizers = []string{apiv1.FinalizerSnapshotData}
	}
	_, err := c.contSt.Create(ctx, ct)
	switch {
	case errors.Is(err, store.ErrAlreadyExists):
		// Made by an earlier pass the cache does not show yet.
		return nil
	case err != nil:
		return fmt.Errorf("creating content %s for snapshot %s: %w", ct.Metadata.Name, apiv1.Ref(s.Metadata.Namespace, s.Metadata.Name), err)
	}
	c.log.Info("snapshot content created", "snapshot", apiv1.Ref(s.Metadata.Namespace, s.Metadata.Name),
		"content", ct.Metadata.Name, "node", node, "online", online, "volumes", volumes)
	return nil
}

// onRBD reports whether pv is on an rbd class (or on a class that does
// not exist, which the storage controller then reports), whose snapshot
// the Ceph cluster holds rather than a node.
func (c *Controller) onRBD(pv *apiv1.PersistentVolume) bool {
	if pv.IsLocal() || c.opts.Classes == nil {
		return false
	}
	sc, ok := c.opts.Classes.Get("", pv.GetStorageClass())
	return !ok || sc.GetSpec().GetRbd() != nil
}

// succeed copies the content's outcome onto the snapshot, once the VM is
// unlocked: the snapshot's Succeeded then always means an unlocked VM.
func (c *Controller) succeed(ctx context.Context, key string, s *apiv1.VirtualMachineSnapshot, ct *apiv1.VirtualMachineSnapshotContent) error {
	if err := c.unlock(ctx, s, true); err != nil {
		return err
	}
	next := proto.Clone(s).(*apiv1.VirtualMachineSnapshot)
	st := status(next)
	cs := ct.GetStatus()
	st.Phase = apiv1.SnapshotSucceeded
	st.ReadyToUse = cs.GetReadyToUse()
	st.CreationTime = cs.GetCreationTime()
	st.Indications = cs.GetIndications()
	st.NodeName = ""
	if slices.ContainsFunc(cs.GetVolumeBackups(), (*apiv1.VolumeBackup).OnNodeDisk) {
		st.NodeName = ct.GetSpec().GetNodeName() // a copy on its disk
	}
	st.SourceUid = ct.GetSpec().GetSource().GetMetadata().GetUid()
	st.Error = ""
	st.IncludedVolumes, st.ExcludedVolumes = nil, nil
	copied := map[string]bool{}
	for _, b := range cs.GetVolumeBackups() {
		copied[b.GetVolumeName()] = true
		st.IncludedVolumes = append(st.IncludedVolumes, b.GetVolumeName())
	}
	for _, v := range ct.GetSpec().GetSource().GetSpec().GetTemplate().GetSpec().GetVolumes() {
		if !copied[v.GetName()] {
			st.ExcludedVolumes = append(st.ExcludedVolumes, v.GetName())
		}
	}
	readyReason := reasonNotReady
	if st.ReadyToUse {
		readyReason = reasonReady
	}
	c.setConditions(st, apiv1.ConditionFalse, reasonComplete, "Operation complete", st.ReadyToUse, readyReason)
	if err := c.write(ctx, key, next); err != nil {
		return err
	}
	c.log.Info("snapshot succeeded", "snapshot", key, "included", st.IncludedVolumes, "excluded", st.ExcludedVolumes)
	return nil
}

// fail ends the snapshot: the content, if any, is given up (the node
// undoes its work and keeps nothing), the VM unlocked, the phase Failed.
// The first two are repeated by every later pass over the Failed
// snapshot, so a crash between these writes loses none.
func (c *Controller) fail(ctx context.Context, key string, s *apiv1.VirtualMachineSnapshot, msg string) error {
	if err := c.abandon(ctx, s); err != nil {
		return err
	}
	if !c.nodeUndoing(s) {
		if err := c.unlock(ctx, s, true); err != nil {
			return err
		}
	}
	next := proto.Clone(s).(*apiv1.VirtualMachineSnapshot)
	st := status(next)
	st.Phase = apiv1.SnapshotFailed
	st.Error = msg
	st.ReadyToUse = false
	c.setConditions(st, apiv1.ConditionFalse, reasonFailed, "Operation failed", false, reasonNotReady)
	st.Conditions = apiv1.SetCondition(st.Conditions, &apiv1.Condition{
		Type: apiv1.ConditionFailure, Status: apiv1.ConditionTrue, Reason: reasonFailed, Message: msg,
	}, c.opts.Clock())
	if err := c.write(ctx, key, next); err != nil {
		return err
	}
	c.log.Info("snapshot failed", "snapshot", key, "error", msg)
	return nil
}

// nodeUndoing reports whether the node may still be undoing the
// snapshot's abandoned content: it holds the content (its data
// finalizer) and has not written it final. The VM stays locked until
// then: an online snapshot whose guest stopped meanwhile leaves its
// writes since the snapshot in an overlay that the node merges back,
// and an instance started on the bare volume first would lose them.
// Deleting the snapshot unlocks regardless (finalize).
func (c *Controller) nodeUndoing(s *apiv1.VirtualMachineSnapshot) bool {
	ct, ok := c.contents.Get(s.GetMetadata().GetNamespace(), contentName(s))
	if !ok || ct.GetSpec().GetSnapshotUid() != s.GetMetadata().GetUid() {
		return false
	}
	phase := ct.GetStatus().GetPhase()
	return slices.Contains(ct.GetMetadata().GetFinalizers(), apiv1.FinalizerSnapshotData) &&
		phase != apiv1.SnapshotSucceeded && phase != apiv1.SnapshotFailed && !c.nodeGone(ct)
}

// nodeGone reports whether the node that holds ct's data is deleted.
func (c *Controller) nodeGone(ct *apiv1.VirtualMachineSnapshotContent) bool {
	node := ct.GetMetadata().GetLabels()[apiv1.LabelNodeName]
	return node != "" && c.opts.NodeGone != nil && c.opts.NodeGone(node)
}

// releaseForGoneNode drops the data finalizer of a deleting content whose
// node was deleted: no node will ever drop it, and the data is gone with
// the node's disk. Without this a snapshot of a removed node could never
// be deleted.
func (c *Controller) releaseForGoneNode(ctx context.Context, ct *apiv1.VirtualMachineSnapshotContent) error {
	if !slices.Contains(ct.GetMetadata().GetFinalizers(), apiv1.FinalizerSnapshotData) || !c.nodeGone(ct) {
		return nil
	}
	ns, name, uid := ct.GetMetadata().GetNamespace(), ct.GetMetadata().GetName(), ct.GetMetadata().GetUid()
	node := ct.GetMetadata().GetLabels()[apiv1.LabelNodeName]
	_, err := c.contSt.GuaranteedUpdate(ctx, ns, name, func(cur *apiv1.VirtualMachineSnapshotContent) (*apiv1.VirtualMachineSnapshotContent, error) {
		if cur.GetMetadata().GetUid() != uid {
			return cur, nil
		}
		cur.Metadata.Finalizers = slices.DeleteFunc(cur.Metadata.Finalizers, func(f string) bool { return f == apiv1.FinalizerSnapshotData })
		return cur, nil
	})
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("releasing content %s of deleted node %s: %w", name, node, err)
	}
	c.log.Info("snapshot content released for its deleted node", "content", ns+"/"+name, "node", node)
	return nil
}

// abandon marks the snapshot's content abandoned unless it succeeded or
// failed on its own: the node stops and keeps nothing.
func (c *Controller) abandon(ctx context.Context, s *apiv1.VirtualMachineSnapshot) error {
	ns := s.GetMetadata().GetNamespace()
	ct, ok := c.contents.Get(ns, contentName(s))
	if !ok || ct.GetSpec().GetAbandoned() || ct.GetSpec().GetSnapshotUid() != s.GetMetadata().GetUid() ||
		ct.GetStatus().GetPhase() == apiv1.SnapshotSucceeded || ct.GetStatus().GetPhase() == apiv1.SnapshotFailed {
		return nil
	}
	uid := s.GetMetadata().GetUid()
	_, err := c.contSt.GuaranteedUpdate(ctx, ns, ct.GetMetadata().GetName(), func(cur *apiv1.VirtualMachineSnapshotContent) (*apiv1.VirtualMachineSnapshotContent, error) {
		if cur.GetSpec().GetSnapshotUid() != uid || cur.GetSpec() == nil {
			return cur, nil
		}
		cur.Spec.Abandoned = true
		return cur, nil
	})
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("abandoning content %s: %w", ct.GetMetadata().GetName(), err)
	}
	return nil
}

// finalize is a deleted snapshot's clean-up: phase Deleting, the VM
// unlocked, the content deleted unless it is kept (Retain, and ready) and
// gone, then the finalizer dropped.
func (c *Controller) finalize(ctx context.Context, key string, s *apiv1.VirtualMachineSnapshot) (controller.Result, error) {
	if !slices.Contains(s.GetMetadata().GetFinalizers(), apiv1.FinalizerSnapshot) {
		return controller.Result{}, nil // another finalizer holds it
	}
	if s.GetStatus().GetPhase() != apiv1.SnapshotDeleting {
		next := proto.Clone(s).(*apiv1.VirtualMachineSnapshot)
		status(next).Phase = apiv1.SnapshotDeleting
		return controller.Result{}, c.write(ctx, key, next)
	}
	if err := c.unlock(ctx, s, true); err != nil {
		return controller.Result{}, err
	}
	ns, name := s.GetMetadata().GetNamespace(), contentName(s)
	// Fresh: a content made by the last pass may not be cached yet, and
	// dropping the finalizer over it would leave its data behind.
	ct, err := c.contSt.Get(ctx, ns, name)
	switch {
	case errors.Is(err, store.ErrNotFound):
		ct = nil
	case err != nil:
		return controller.Result{}, fmt.Errorf("reading content %s: %w", name, err)
	}
	if ct != nil && ct.GetSpec().GetSnapshotUid() == s.GetMetadata().GetUid() {
		keep := s.GetSpec().GetDeletionPolicy() == apiv1.DeletionPolicyRetain && ct.GetStatus().GetReadyToUse()
		if !keep {
			if ct.GetMetadata().GetDeletionTimestamp() == nil {
				_, _, err := c.contSt.Delete(ctx, ns, name, store.DeleteOptions{UID: ct.GetMetadata().GetUid()})
				if err != nil && !errors.Is(err, store.ErrNotFound) {
					return controller.Result{}, fmt.Errorf("deleting content %s: %w", name, err)
				}
				c.log.Info("deleting snapshot content", "snapshot", key, "content", name)
			}
			if err := c.releaseForGoneNode(ctx, ct); err != nil {
				return controller.Result{}, err
			}
			// The node drops the data and then the content's finalizer;
			// the content's deletion event brings the snapshot back.
			return controller.Result{RequeueAfter: lockRetry}, nil
		}
	}
	next := proto.Clone(s).(*apiv1.VirtualMachineSnapshot)
	next.Metadata.Finalizers = slices.DeleteFunc(next.Metadata.Finalizers, func(f string) bool { return f == apiv1.FinalizerSnapshot })
	if err := c.write(ctx, key, next); err != nil {
		return controller.Result{}, err
	}
	c.log.Info("snapshot released", "snapshot", key)
	return controller.Result{}, nil
}

// status is s's status, made when missing.
func status(s *apiv1.VirtualMachineSnapshot) *apiv1.VirtualMachineSnapshotStatus {
	if s.Status == nil {
		s.Status = &apiv1.VirtualMachineSnapshotStatus{}
	}
	return s.Status
}

// setProgress writes the Progressing condition (and an unready Ready)
// when it changed.
func (c *Controller) setProgress(ctx context.Context, key string, s *apiv1.VirtualMachineSnapshot, st, reason, msg string) error {
	next := proto.Clone(s).(*apiv1.VirtualMachineSnapshot)
	c.setConditions(status(next), st, reason, msg, false, reasonNotReady)
	return c.writeIfChanged(ctx, key, s, next)
}

func (c *Controller) setConditions(st *apiv1.VirtualMachineSnapshotStatus, progressing, reason, msg string, ready bool, readyReason string) {
	now := c.opts.Clock()
	st.Conditions = apiv1.SetCondition(st.Conditions, &apiv1.Condition{
		Type: ConditionProgressing, Status: progressing, Reason: reason, Message: msg,
	}, now)
	rs := apiv1.ConditionFalse
	if ready {
		rs = apiv1.ConditionTrue
	}
	st.Conditions = apiv1.SetCondition(st.Conditions, &apiv1.Condition{
		Type: apiv1.ConditionReady, Status: rs, Reason: readyReason,
	}, now)
}

func (c *Controller) writeIfChanged(ctx context.Context, key string, old, next *apiv1.VirtualMachineSnapshot) error {
	if proto.Equal(old, next) {
		return nil
	}
	return c.write(ctx, key, next)
}

// write stores next with compare-and-swap on the cached version it was
// cloned from. A conflict is returned: the cache is behind, and the
// newer version's event requeues the key.
func (c *Controller) write(ctx context.Context, key string, next *apiv1.VirtualMachineSnapshot) error {
	out, err := c.snapSt.Update(ctx, next)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil
	case err != nil:
		return fmt.Errorf("writing snapshot %s: %w", key, err)
	}
	if out.GetMetadata().GetDeletionTimestamp() == nil || len(out.GetMetadata().GetFinalizers()) > 0 {
		c.writes.Wrote(key, out.GetMetadata().GetResourceVersion())
	}
	return nil
}
