package storage

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/protobuf/types/known/timestamppb"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/ceph"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// content takes the RBD snapshots of a content that needs no node (the
// CSI CreateSnapshot of its volumes): its VM does not run (the snapshot
// holds its lock, so it cannot start meanwhile) and every volume to copy
// is on an rbd class. A volume with no image (never provisioned), or not
// on an rbd class, is left out, as a node leaves out what it does not
// have. An abandoned content has its snapshots removed.
func (v *Volumes) content(ctx context.Context, key string) (controller.Result, error) {
	ct, ok := v.contents.GetByKey(key)
	if !ok || !serverContent(ct) || ct.GetMetadata().GetDeletionTimestamp() != nil {
		return controller.Result{}, nil // a deleted content's snapshots go with the next collection
	}
	phase := ct.GetStatus().GetPhase()
	if phase == apiv1.SnapshotSucceeded || phase == apiv1.SnapshotFailed {
		return controller.Result{}, nil
	}
	uid := ct.GetMetadata().GetUid()
	src := ct.GetSpec().GetSource()
	owner := src.GetMetadata().GetUid()
	if ct.GetSpec().GetAbandoned() {
		v.removeSnapshots(ctx, ct)
		return controller.Result{}, v.writeContent(ctx, ct, func(st *apiv1.VirtualMachineSnapshotContentStatus) {
			st.Phase, st.Error, st.Message, st.ReadyToUse = apiv1.SnapshotFailed, "abandoned", "", false
		})
	}
	if err := validation.CheckUID(owner); err != nil {
		return controller.Result{}, v.failContent(ctx, ct, fmt.Errorf("spec.source.metadata.uid: %w", err))
	}
	pvs := persistentVolumes(src.GetSpec())
	var backups []*apiv1.VolumeBackup
	for _, name := range ct.GetSpec().GetVolumes() {
		pv := pvs[name]
		if pv == nil || pv.IsLocal() {
			continue // no node holds it for this content: left out
		}
		class := pv.GetStorageClass()
		if sc, ok := v.c.classes.Get("", class); ok && sc.GetSpec().GetRbd() == nil {
			continue // a shared filesystem: its copy needs a node
		}
		_, conn, err := v.rbdClass(class)
		if err != nil {
			return controller.Result{}, v.failContent(ctx, ct, fmt.Errorf("volume %s: %w", name, err))
		}
		s, err := conn.SnapshotVolume(ctx, owner, name, uid)
		switch {
		case errors.Is(err, ceph.ErrNotFound):
			continue
		case err != nil:
			// The class may answer again; the snapshot's deadline bounds it.
			_ = v.writeContent(ctx, ct, func(st *apiv1.VirtualMachineSnapshotContentStatus) {
				st.Phase, st.Message = apiv1.SnapshotInProgress, fmt.Sprintf("taking the RBD snapshot of volume %s: %v", name, err)
			})
			return controller.Result{}, fmt.Errorf("content %s, volume %s: %w", key, name, err)
		}
		backups = append(backups, &apiv1.VolumeBackup{VolumeName: name, StorageClass: class,
			RbdSnapshot: s.Spec(conn.Pool), VirtualSizeBytes: s.Size})
	}
	now := v.c.opts.Clock()
	err := v.writeContent(ctx, ct, func(st *apiv1.VirtualMachineSnapshotContentStatus) {
		*st = apiv1.VirtualMachineSnapshotContentStatus{Phase: apiv1.SnapshotSucceeded, CreationTime: timestamppb.New(now),
			ReadyToUse: true, VolumeBackups: backups}
	})
	if err == nil {
		v.log.Info("RBD snapshots taken", "content", key, "volumes", len(backups))
	}
	return controller.Result{}, err
}

// failContent ends a content with cause, keeping none of its snapshots.
func (v *Volumes) failContent(ctx context.Context, ct *apiv1.VirtualMachineSnapshotContent, cause error) error {
	v.log.Warn("snapshot content failed", "content", ct.GetMetadata().GetNamespace()+"/"+ct.GetMetadata().GetName(), "err", cause)
	v.removeSnapshots(ctx, ct)
	return v.writeContent(ctx, ct, func(st *apiv1.VirtualMachineSnapshotContentStatus) {
		st.Phase, st.Error, st.Message, st.ReadyToUse = apiv1.SnapshotFailed, cause.Error(), "", false
	})
}

// removeSnapshots removes the RBD snapshots of ct it can; the collection
// removes the rest once ct is gone.
func (v *Volumes) removeSnapshots(ctx context.Context, ct *apiv1.VirtualMachineSnapshotContent) {
	src := ct.GetSpec().GetSource()
	owner := src.GetMetadata().GetUid()
	if validation.CheckUID(owner) != nil {
		return
	}
	pvs := persistentVolumes(src.GetSpec())
	for _, name := range ct.GetSpec().GetVolumes() {
		pv := pvs[name]
		if pv == nil || pv.IsLocal() {
			continue
		}
		if _, conn, err := v.rbdClass(pv.GetStorageClass()); err == nil {
			_ = conn.SnapRemove(ctx, ceph.VolumeImage(owner, name), ceph.SnapshotName(ct.GetMetadata().GetUid()))
		}
	}
}

// writeContent changes the stored content's status with fn, if it is
// still ct (same uid) and not final.
func (v *Volumes) writeContent(ctx context.Context, ct *apiv1.VirtualMachineSnapshotContent, fn func(*apiv1.VirtualMachineSnapshotContentStatus)) error {
	uid := ct.GetMetadata().GetUid()
	_, err := v.contSt.GuaranteedUpdate(ctx, ct.GetMetadata().GetNamespace(), ct.GetMetadata().GetName(),
		func(cur *apiv1.VirtualMachineSnapshotContent) (*apiv1.VirtualMachineSnapshotContent, error) {
			if cur.GetMetadata().GetUid() != uid {
				return nil, store.ErrNotFound
			}
			if p := cur.GetStatus().GetPhase(); p == apiv1.SnapshotSucceeded || p == apiv1.SnapshotFailed {
				return cur, nil
			}
			if cur.Status == nil {
				cur.Status = &apiv1.VirtualMachineSnapshotContentStatus{}
			}
			fn(cur.Status)
			return cur, nil
		})
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	return err
}
