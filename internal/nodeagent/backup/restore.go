package backup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/backup/repo"
	"github.com/virtplane/terraform-provider-virtplane/internal/ceph"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller"
	"github.com/virtplane/terraform-provider-virtplane/internal/fsutil"
	"github.com/virtplane/terraform-provider-virtplane/internal/informer"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/nodedir"
)

// ReconcileRestore brings one backup restore of this node forward:
// writes its volumes, or cleans up and releases it.
func (r *Role) ReconcileRestore(ctx context.Context, key string) (controller.Result, error) {
	rs, ok := r.restores.Inf.GetByKey(key)
	if !ok {
		return controller.Result{}, nil
	}
	if r.restores.Stale(rs) {
		return controller.Result{}, nil
	}
	st := rs.GetStatus()
	switch {
	case restoreStops(rs) || apiv1.BackupFinal(st.GetWritePhase()):
		return controller.Result{}, r.releaseRestore(ctx, rs)
	case st.GetPhase() != apiv1.BackupInProgress:
		return controller.Result{}, nil
	}
	uid := rs.GetMetadata().GetUid()
	cctx, done := r.restores.Start(ctx, key)
	defer done()
	r.working.Store(uid, true)
	defer r.working.Delete(uid)
	vols, prog, err := r.restore(cctx, rs)
	_ = r.opts.Layout.RemoveBackupWorkDir(uid)
	if cctx.Err() != nil && ctx.Err() == nil {
		return controller.Result{}, nil // released by the pass its update queued
	}
	if err != nil {
		r.log.Warn("backup restore failed", "restore", key, "err", err)
		return controller.Result{}, r.writeRestore(ctx, key, func(next *apiv1.VirtualMachineBackupRestore) {
			s := next.Status
			s.WritePhase, s.WriteError, s.Message = apiv1.BackupFailed, validation.ClipStatusMessage(err.Error()), ""
			next.Metadata.Finalizers = removeFinalizer(next.Metadata.Finalizers, apiv1.FinalizerBackupRestoreData)
		})
	}
	return controller.Result{}, r.writeRestore(ctx, key, func(next *apiv1.VirtualMachineBackupRestore) {
		s := next.Status
		s.WritePhase, s.WriteError, s.Message = apiv1.BackupSucceeded, "", ""
		s.Volumes, s.Progress = vols, prog
		next.Metadata.Finalizers = removeFinalizer(next.Metadata.Finalizers, apiv1.FinalizerBackupRestoreData)
	})
}

// releaseRestore drops the node's hold on rs: scratch removed, finalizer
// gone; a write cut short is marked Failed. What a failed restore wrote
// goes with the VM the controller deletes.
func (r *Role) releaseRestore(ctx context.Context, rs *apiv1.VirtualMachineBackupRestore) error {
	uid := rs.GetMetadata().GetUid()
	if err := r.opts.Layout.RemoveBackupWorkDir(uid); err != nil {
		return err
	}
	final := apiv1.BackupFinal(rs.GetStatus().GetWritePhase())
	if !slices.Contains(rs.GetMetadata().GetFinalizers(), apiv1.FinalizerBackupRestoreData) && (final || rs.GetStatus().GetWritePhase() == "") {
		return nil
	}
	_, err := r.restores.WriteStatus(ctx, rs, func(next *apiv1.VirtualMachineBackupRestore) {
		next.Metadata.Finalizers = removeFinalizer(next.Metadata.Finalizers, apiv1.FinalizerBackupRestoreData)
		if !final && next.Status.WritePhase != "" {
			next.Status.WritePhase, next.Status.WriteError, next.Status.Message = apiv1.BackupFailed, "cancelled", ""
		}
	})
	if status.Code(err) == codes.NotFound {
		return nil
	}
	if err == nil {
		r.restores.Forget(uid)
	}
	return err
}

func (r *Role) writeRestore(ctx context.Context, key string, mutate func(*apiv1.VirtualMachineBackupRestore)) error {
	rs, ok := r.restores.Inf.GetByKey(key)
	if !ok {
		return nil
	}
	_, err := r.restores.WriteStatus(ctx, rs, mutate)
	if status.Code(err) == codes.NotFound {
		return nil
	}
	return err
}

// restore writes every volume of the manifest rs names for its new VM.
func (r *Role) restore(ctx context.Context, rs *apiv1.VirtualMachineBackupRestore) ([]*apiv1.BackupVolumeStatus, *apiv1.BackupProgress, error) {
	key := informer.Key(rs)
	sp, st := rs.GetSpec(), rs.GetStatus()
	if err := r.writeRestore(ctx, key, func(next *apiv1.VirtualMachineBackupRestore) {
		next.Status.WritePhase, next.Status.Message = apiv1.BackupInProgress, "reading the backup's manifest"
	}); err != nil {
		return nil, nil, err
	}
	vmUID := st.GetVmUid()
	if err := validation.CheckUID(vmUID); err != nil {
		return nil, nil, fmt.Errorf("status.vm_uid: %w", err)
	}
	rp, err := r.openTarget(ctx, sp.GetTarget(), &apiv1.ConnectBackupTargetRequest{
		Name: sp.GetTarget(), BackupRestore: &apiv1.ObjectKey{Namespace: rs.GetMetadata().GetNamespace(), Name: rs.GetMetadata().GetName()},
	})
	if err != nil {
		return nil, nil, err
	}
	m, err := rp.GetManifest(ctx, sp.GetBackupId())
	if err != nil {
		return nil, nil, fmt.Errorf("backup %s: %w", sp.GetBackupId(), err)
	}
	classes, err := manifestClasses(m)
	if err != nil {
		return nil, nil, err
	}
	var total int64
	for _, v := range m.Volumes {
		total += v.SizeBytes
	}
	prog := newProgress(total)
	stopReport := prog.report(ctx, r.opts.Clock, r.opts.ProgressInterval, func(ctx context.Context, p *apiv1.BackupProgress) {
		_ = r.writeRestore(ctx, key, func(next *apiv1.VirtualMachineBackupRestore) { next.Status.Progress = p })
	})
	defer stopReport()
	ns, name := rs.GetMetadata().GetNamespace(), sp.GetVmName()
	var out []*apiv1.BackupVolumeStatus
	for i := range m.Volumes {
		v := &m.Volumes[i]
		msg := fmt.Sprintf("writing volume %s (%d/%d)", v.Name, i+1, len(m.Volumes))
		_ = r.writeRestore(ctx, key, func(next *apiv1.VirtualMachineBackupRestore) { next.Status.Message = msg })
		class := classes[v.Name]
		if err := r.restoreVolume(ctx, rp, rs, ns, name, vmUID, class, v, prog.volume()); err != nil {
			return nil, nil, fmt.Errorf("volume %s: %w", v.Name, err)
		}
		prog.volumeDone(v.SizeBytes)
		out = append(out, &apiv1.BackupVolumeStatus{Name: v.Name, StorageClass: v.StorageClass, ClassKind: v.ClassKind, SizeBytes: v.SizeBytes})
		r.log.Info("backup volume restored", "restore", key, "volume", v.Name, "class_kind", v.ClassKind, "size_bytes", v.SizeBytes)
	}
	return out, prog.status(r.opts.Clock.Now()), nil
}

// manifestClasses is the storage class of each volume of m, as its VM
// spec has it ("" for local): the class is the spec's, as for every
// volume the node makes, never the manifest's word alone.
func manifestClasses(m *repo.Manifest) (map[string]string, error) {
	var vm apiv1.VirtualMachine
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(m.Spec, &vm); err != nil {
		return nil, fmt.Errorf("backup %s: its VM spec does not parse: %w", m.ID, err)
	}
	pvs := map[string]*apiv1.PersistentVolume{}
	for _, v := range vm.GetSpec().GetTemplate().GetSpec().GetVolumes() {
		if pv := v.GetPersistent(); pv != nil {
			pvs[v.GetName()] = pv
		}
	}
	out := map[string]string{}
	for _, v := range m.Volumes {
		pv, ok := pvs[v.Name]
		if !ok {
			return nil, fmt.Errorf("backup %s: volume %q is no persistent volume of its VM", m.ID, v.Name)
		}
		if !pv.IsLocal() {
			out[v.Name] = pv.GetStorageClass()
		}
	}
	return out, nil
}

// restoreVolume writes volume v of the VM vmUID (ns/name): a file in its
// directory (local, or on a shared filesystem class) or an rbd image.
func (r *Role) restoreVolume(ctx context.Context, rp *repo.Repo, rs *apiv1.VirtualMachineBackupRestore, ns, name, vmUID, class string, v *repo.Volume, p repo.ProgressFunc) error {
	if class == "" {
		if v.ClassKind != apiv1.ClassKindLocal {
			return fmt.Errorf("backed up from a %s class, restored onto local", v.ClassKind)
		}
		return r.restoreFile(ctx, rp, rs.GetMetadata().GetUid(), r.opts.Layout, ns, name, vmUID, v, p)
	}
	if r.opts.Classes == nil {
		return fmt.Errorf("storage class %s: this node has no storage classes", class)
	}
	sc, err := r.opts.Classes.Lookup(ctx, class)
	if err != nil {
		return err
	}
	switch {
	case sc.RBD() != nil && v.ClassKind == apiv1.ClassKindRBD:
		return r.restoreRBD(ctx, rp, sc.Conn, rs.GetMetadata().GetUid(), vmUID, v, p)
	case sc.SharedPath() != "" && v.ClassKind == apiv1.ClassKindSharedFilesystem:
		return r.restoreFile(ctx, rp, rs.GetMetadata().GetUid(), sc.SharedLayout(), ns, name, vmUID, v, p)
	}
	return fmt.Errorf("backed up from a %s class; storage class %s here is not one", v.ClassKind, class)
}

// restoreFile restores v into a raw sparse file in the restore's scratch
// directory (every chunk verified as it is written), converts it to a
// qcow2 beside the volume's path and renames it into place.
func (r *Role) restoreFile(ctx context.Context, rp *repo.Repo, uid string, lay nodedir.Layout, ns, name, vmUID string, v *repo.Volume, p repo.ProgressFunc) error {
	if err := lay.EnsureVMDir(vmUID, ns, name); err != nil {
		return err
	}
	vmDir, err := lay.VMDir(vmUID)
	if err != nil {
		return err
	}
	dst, err := nodedir.FileIn(nodedir.VolumesDir(vmDir), v.Name+".qcow2")
	if err != nil {
		return err
	}
	dir, err := r.opts.Layout.BackupWorkDir(uid)
	if err != nil {
		return err
	}
	if _, err := fsutil.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	raw, err := r.opts.Layout.BackupRawPath(uid, v.Name)
	if err != nil {
		return err
	}
	defer os.Remove(raw)
	f, err := os.OpenFile(raw, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	err = f.Truncate(v.SizeBytes)
	if err == nil {
		err = rp.RestoreRaw(ctx, v, f, p)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := nodedir.MkdirTraversable(filepath.Dir(dst)); err != nil {
		return err
	}
	tmp := dst + ".tmp"
	_ = os.Remove(tmp)
	if err := r.opts.Images.ConvertRaw(ctx, raw, tmp); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("converting to qcow2: %w", err)
	}
	if err := fsutil.Commit(tmp, dst); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return nil
}

// stagedImage is where a restore imports volume vol before renaming it
// into place: a name no collector of VM images reads as one (it does
// not start with "vm-"), unique to the restore.
func stagedImage(restoreUID, vol string) string { return "backup-restore-" + restoreUID + "-" + vol }

// restoreRBD imports v into a new image under a scratch name, from an
// export-diff stream the repository writes (every chunk verified), then
// renames it to the volume's image. A failure removes the scratch image.
func (r *Role) restoreRBD(ctx context.Context, rp *repo.Repo, conn *ceph.Conn, uid, vmUID string, v *repo.Volume, p repo.ProgressFunc) (err error) {
	tmp, image := stagedImage(uid, v.Name), ceph.VolumeImage(vmUID, v.Name)
	_ = conn.Remove(ctx, tmp) // a killed attempt's leftover
	if err := conn.Create(ctx, tmp, v.SizeBytes); err != nil {
		return fmt.Errorf("creating %s: %w", tmp, err)
	}
	defer func() {
		if err != nil {
			_ = conn.Remove(context.WithoutCancel(ctx), tmp)
		}
	}()
	ctx2, cancel := context.WithCancel(ctx)
	defer cancel()
	pr, pw := io.Pipe()
	written := make(chan error, 1)
	go func() {
		err := rp.RestoreRBDDiff(ctx2, v, pw, p)
		pw.CloseWithError(err)
		written <- err
	}()
	ierr := conn.ImportDiff(ctx2, tmp, pr)
	if ierr != nil {
		cancel()
		_ = pr.CloseWithError(ierr)
	}
	werr := <-written
	switch {
	case werr != nil && !errors.Is(werr, context.Canceled) && !errors.Is(werr, io.ErrClosedPipe):
		return werr // the repository's error (a corrupt chunk) says why
	case ierr != nil:
		return ierr
	}
	// A killed attempt may have renamed it already: this VM is new and
	// locked, its image only ever this restore's.
	if _, err := conn.Info(ctx, image); err == nil {
		if err := conn.Remove(ctx, image); err != nil {
			return fmt.Errorf("replacing %s: %w", image, err)
		}
	}
	if err := conn.Rename(ctx, tmp, image); err != nil {
		return fmt.Errorf("renaming %s to %s: %w", tmp, image, err)
	}
	return nil
}
