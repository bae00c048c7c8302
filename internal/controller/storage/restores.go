package storage

import (
	"context"
	"errors"
	"fmt"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/ceph"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// restore does a restore's part on rbd classes, following its phases
// (docs/snapshots.md, "Restore flow"): in Staging it clones each RBD
// snapshot beside the target's image (storage_staged); in Committing,
// past the commit point, it swaps the clones in by renames and retires
// the target's images of volumes the snapshot does not have
// (storage_swapped); a restore that failed, or is deleted before its
// commit point, has its clones removed. Each step is safe to repeat: a
// killed server resumes where the images say.
func (v *Volumes) restore(ctx context.Context, key string) (controller.Result, error) {
	r, ok := v.restores.GetByKey(key)
	if !ok || !hasRBD(r) {
		return controller.Result{}, nil
	}
	st := r.GetStatus()
	target, uid := st.GetTargetUid(), r.GetMetadata().GetUid()
	if validation.CheckUID(target) != nil || validation.CheckUID(uid) != nil {
		return controller.Result{}, nil // nothing can have been made under such names
	}
	deleting := r.GetMetadata().GetDeletionTimestamp() != nil
	switch {
	case st.GetPhase() == apiv1.RestoreFailed || deleting && st.GetPhase() != apiv1.RestoreCommitting && !st.GetStorageSwapped():
		return controller.Result{}, v.dropStaged(ctx, r)
	case st.GetPhase() == apiv1.RestoreStaging && !st.GetStorageStaged() && st.GetError() == "":
		return v.stage(ctx, r)
	case st.GetPhase() == apiv1.RestoreCommitting && !st.GetStorageSwapped():
		return controller.Result{}, v.swap(ctx, r)
	}
	return controller.Result{}, nil
}

// stage clones the restore's RBD snapshots beside the target's images.
// The source is found by the content's uids (the VM snapshotted, the
// volume, the content), on the class the content's spec names for the
// volume: nothing a node wrote into a status picks what is cloned.
func (v *Volumes) stage(ctx context.Context, r *apiv1.VirtualMachineRestore) (controller.Result, error) {
	ct, err := v.contentOf(r)
	if err != nil {
		return controller.Result{}, v.writeRestore(ctx, r, func(st *apiv1.VirtualMachineRestoreStatus) { st.Error = err.Error() })
	}
	if ct == nil {
		return controller.Result{}, nil // the restore controller fails a restore whose snapshot went
	}
	src := ct.GetSpec().GetSource()
	owner := src.GetMetadata().GetUid()
	pvs := persistentVolumes(src.GetSpec())
	for i, vr := range r.GetStatus().GetRestores() {
		if !vr.OnRBD() {
			continue
		}
		name := vr.GetVolumeName()
		pv := pvs[name]
		if pv == nil || pv.GetStorageClass() != vr.GetStorageClass() {
			return controller.Result{}, v.failRestore(ctx, r, fmt.Errorf("status.restores[%d]: volume %s is not on storage class %q in the snapshot", i, name, vr.GetStorageClass()))
		}
		_, conn, err := v.rbdClass(vr.GetStorageClass())
		if err != nil {
			return controller.Result{}, v.failRestore(ctx, r, fmt.Errorf("volume %s: %w", name, err))
		}
		err = conn.StageRestore(ctx, owner, name, ct.GetMetadata().GetUid(), r.GetStatus().GetTargetUid(), r.GetMetadata().GetUid())
		switch {
		case errors.Is(err, ceph.ErrNotFound):
			return controller.Result{}, v.failRestore(ctx, r, fmt.Errorf("volume %s: %w", name, err))
		case err != nil:
			_ = v.writeRestore(ctx, r, func(st *apiv1.VirtualMachineRestoreStatus) {
				st.Message = fmt.Sprintf("cloning the RBD snapshot of volume %s: %v", name, err)
			})
			return controller.Result{}, fmt.Errorf("restore %s, volume %s: %w", r.GetMetadata().GetName(), name, err)
		}
	}
	err = v.writeRestore(ctx, r, func(st *apiv1.VirtualMachineRestoreStatus) {
		st.StorageStaged, st.Message = true, "RBD snapshots cloned beside the target's volumes"
	})
	if err == nil {
		v.log.Info("restore staged on RBD", "restore", r.GetMetadata().GetNamespace()+"/"+r.GetMetadata().GetName())
	}
	return controller.Result{}, err
}

// contentOf is the content of the restore's snapshot; nil when the
// snapshot or its content is gone.
func (v *Volumes) contentOf(r *apiv1.VirtualMachineRestore) (*apiv1.VirtualMachineSnapshotContent, error) {
	ns := r.GetMetadata().GetNamespace()
	snap, ok := v.snaps.Get(ns, r.GetSpec().GetSnapshot())
	if !ok {
		return nil, nil
	}
	ct, ok := v.contents.Get(ns, snap.GetStatus().GetContentName())
	if !ok || ct.GetSpec().GetSnapshotUid() != snap.GetMetadata().GetUid() {
		return nil, nil
	}
	if err := validation.CheckUID(ct.GetSpec().GetSource().GetMetadata().GetUid()); err != nil {
		return nil, fmt.Errorf("the snapshot's spec.source.metadata.uid: %w", err)
	}
	return ct, nil
}

// swap puts the clones in place of the target's images (past the commit
// point: it only goes forward) and retires the target's images of
// volumes on rbd classes that the restore does not bring.
func (v *Volumes) swap(ctx context.Context, r *apiv1.VirtualMachineRestore) error {
	target, uid := r.GetStatus().GetTargetUid(), r.GetMetadata().GetUid()
	restored := map[string]bool{} // class/volume
	for _, vr := range r.GetStatus().GetRestores() {
		if !vr.OnRBD() {
			continue
		}
		_, conn, err := v.rbdClass(vr.GetStorageClass())
		if err != nil {
			return fmt.Errorf("restore %s, volume %s: %w", r.GetMetadata().GetName(), vr.GetVolumeName(), err)
		}
		if err := conn.SwapRestore(ctx, target, vr.GetVolumeName(), uid); err != nil {
			return fmt.Errorf("restore %s, volume %s: %w", r.GetMetadata().GetName(), vr.GetVolumeName(), err)
		}
		restored[vr.GetStorageClass()+"/"+vr.GetVolumeName()] = true
	}
	for _, sc := range v.c.classes.List() {
		if sc.GetSpec().GetRbd() == nil {
			continue
		}
		_, conn, err := v.rbdClass(sc.GetMetadata().GetName())
		if err != nil {
			return err
		}
		entries, err := conn.Entries(ctx)
		if err != nil {
			return fmt.Errorf("restore %s: listing storage class %s: %w", r.GetMetadata().GetName(), sc.GetMetadata().GetName(), err)
		}
		for _, e := range entries {
			n := ceph.ParseImage(e.Image)
			if e.Snapshot != "" || n.Kind != ceph.KindVolume || n.Owner != target || restored[sc.GetMetadata().GetName()+"/"+n.Volume] {
				continue
			}
			// The snapshot does not have it: the target loses it, as it
			// loses such a local volume's file.
			if err := conn.Retire(ctx, target, n.Volume, uid); err != nil {
				return err
			}
			conn.RemoveRetired(ctx, target, n.Volume, uid)
		}
	}
	err := v.writeRestore(ctx, r, func(st *apiv1.VirtualMachineRestoreStatus) {
		st.StorageSwapped, st.Message = true, "RBD volumes restored"
	})
	if err == nil {
		v.log.Info("restore swapped RBD volumes", "restore", r.GetMetadata().GetNamespace()+"/"+r.GetMetadata().GetName(), "target_uid", target)
	}
	return err
}

// dropStaged removes the restore's clones (it failed, or is deleted,
// before its commit point).
func (v *Volumes) dropStaged(ctx context.Context, r *apiv1.VirtualMachineRestore) error {
	for _, vr := range r.GetStatus().GetRestores() {
		if !vr.OnRBD() {
			continue
		}
		_, conn, err := v.rbdClass(vr.GetStorageClass())
		if err != nil {
			continue // the collection takes what a class coming back still has
		}
		if err := conn.DropStaged(ctx, r.GetStatus().GetTargetUid(), vr.GetVolumeName(), r.GetMetadata().GetUid()); err != nil {
			return fmt.Errorf("restore %s, volume %s: removing the clone: %w", r.GetMetadata().GetName(), vr.GetVolumeName(), err)
		}
	}
	return nil
}

// failRestore records why the storage part cannot be done; the restore
// controller fails the restore for it before the commit point.
func (v *Volumes) failRestore(ctx context.Context, r *apiv1.VirtualMachineRestore, cause error) error {
	v.log.Warn("restore failed on RBD", "restore", r.GetMetadata().GetNamespace()+"/"+r.GetMetadata().GetName(), "err", cause)
	return v.writeRestore(ctx, r, func(st *apiv1.VirtualMachineRestoreStatus) { st.Error = cause.Error() })
}

// writeRestore changes the stored restore's status with fn, if it is
// still r (same uid).
func (v *Volumes) writeRestore(ctx context.Context, r *apiv1.VirtualMachineRestore, fn func(*apiv1.VirtualMachineRestoreStatus)) error {
	uid := r.GetMetadata().GetUid()
	_, err := v.rSt.GuaranteedUpdate(ctx, r.GetMetadata().GetNamespace(), r.GetMetadata().GetName(),
		func(cur *apiv1.VirtualMachineRestore) (*apiv1.VirtualMachineRestore, error) {
			if cur.GetMetadata().GetUid() != uid {
				return nil, store.ErrNotFound
			}
			if cur.Status == nil {
				cur.Status = &apiv1.VirtualMachineRestoreStatus{}
			}
			fn(cur.Status)
			return cur, nil
		})
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	return err
}
