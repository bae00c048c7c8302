package backup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/backup/repo"
	"github.com/virtplane/terraform-provider-virtplane/internal/backup/target"
	"github.com/virtplane/terraform-provider-virtplane/internal/ceph"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller"
	"github.com/virtplane/terraform-provider-virtplane/internal/informer"
)

// ReconcileBackup brings one backup of this node forward: uploads it, or
// cleans up and releases it.
func (r *Role) ReconcileBackup(ctx context.Context, key string) (controller.Result, error) {
	b, ok := r.uploads.Inf.GetByKey(key)
	if !ok {
		return controller.Result{}, nil // its scratch directory goes with the next collection
	}
	if r.uploads.Stale(b) {
		return controller.Result{}, nil
	}
	st := b.GetStatus()
	switch {
	case backupStops(b) || apiv1.BackupFinal(st.GetUploadPhase()):
		return controller.Result{}, r.releaseBackup(ctx, b)
	case st.GetPhase() != apiv1.BackupInProgress:
		return controller.Result{}, nil // not handed over yet
	}
	uid := b.GetMetadata().GetUid()
	cctx, done := r.uploads.Start(ctx, key)
	defer done()
	r.working.Store(uid, true)
	defer r.working.Delete(uid)
	res, err := r.upload(cctx, b)
	if cctx.Err() != nil && ctx.Err() == nil {
		// Deleted or failed meanwhile: its update queued it again, and
		// that pass releases it.
		_ = r.opts.Layout.RemoveBackupWorkDir(uid)
		return controller.Result{}, nil
	}
	_ = r.opts.Layout.RemoveBackupWorkDir(uid)
	if err != nil {
		r.log.Warn("backup upload failed", "backup", key, "err", err)
		return controller.Result{}, r.writeBackup(ctx, key, func(next *apiv1.VirtualMachineBackup) {
			s := next.Status
			s.UploadPhase, s.UploadError, s.Message = apiv1.BackupFailed, validation.ClipStatusMessage(err.Error()), ""
			next.Metadata.Finalizers = removeFinalizer(next.Metadata.Finalizers, apiv1.FinalizerBackupUpload)
		})
	}
	return controller.Result{}, r.writeBackup(ctx, key, func(next *apiv1.VirtualMachineBackup) {
		s := next.Status
		s.UploadPhase, s.UploadError, s.Message = apiv1.BackupSucceeded, "", ""
		s.ManifestId, s.Volumes, s.Progress = res.manifest, res.volumes, res.progress
		next.Metadata.Finalizers = removeFinalizer(next.Metadata.Finalizers, apiv1.FinalizerBackupUpload)
	})
}

// releaseBackup drops the node's hold on b: scratch removed, finalizer
// gone; an upload cut short is marked Failed.
func (r *Role) releaseBackup(ctx context.Context, b *apiv1.VirtualMachineBackup) error {
	uid := b.GetMetadata().GetUid()
	if err := r.opts.Layout.RemoveBackupWorkDir(uid); err != nil {
		return err
	}
	final := apiv1.BackupFinal(b.GetStatus().GetUploadPhase())
	if !slices.Contains(b.GetMetadata().GetFinalizers(), apiv1.FinalizerBackupUpload) && (final || b.GetStatus().GetUploadPhase() == "") {
		return nil
	}
	_, err := r.uploads.WriteStatus(ctx, b, func(next *apiv1.VirtualMachineBackup) {
		next.Metadata.Finalizers = removeFinalizer(next.Metadata.Finalizers, apiv1.FinalizerBackupUpload)
		if !final && next.Status.UploadPhase != "" {
			next.Status.UploadPhase, next.Status.UploadError, next.Status.Message = apiv1.BackupFailed, "cancelled", ""
		}
	})
	if status.Code(err) == codes.NotFound {
		return nil
	}
	if err == nil {
		r.uploads.Forget(uid)
	}
	return err
}

// writeBackup writes the freshest cached copy of key as mutate changes it.
func (r *Role) writeBackup(ctx context.Context, key string, mutate func(*apiv1.VirtualMachineBackup)) error {
	b, ok := r.uploads.Inf.GetByKey(key)
	if !ok {
		return nil
	}
	_, err := r.uploads.WriteStatus(ctx, b, mutate)
	if status.Code(err) == codes.NotFound {
		return nil
	}
	return err
}

// uploaded is what an upload made.
type uploaded struct {
	manifest string
	volumes  []*apiv1.BackupVolumeStatus
	progress *apiv1.BackupProgress
}

// source is one volume to upload.
type source struct {
	name, class, kind string
	// file: the snapshot's qcow2 copy (local and shared filesystem).
	file string
	// rbd: the image, the content's snapshot, and the connection.
	image, snap string
	conn        *ceph.Conn
	size        int64
}

// upload sends b's volumes and then its manifest to the target.
func (r *Role) upload(ctx context.Context, b *apiv1.VirtualMachineBackup) (*uploaded, error) {
	key := informer.Key(b)
	st := b.GetStatus()
	if err := r.writeBackup(ctx, key, func(next *apiv1.VirtualMachineBackup) {
		next.Status.UploadPhase, next.Status.Message = apiv1.BackupInProgress, "connecting to the backup target"
	}); err != nil {
		return nil, err
	}
	src := st.GetSource()
	vmUID := src.GetMetadata().GetUid()
	if err := validation.CheckUID(vmUID); err != nil {
		return nil, fmt.Errorf("status.source.metadata.uid: %w", err)
	}
	contentUID := st.GetContentUid()
	if err := validation.CheckUID(contentUID); err != nil {
		return nil, fmt.Errorf("status.content_uid: %w", err)
	}
	rp, err := r.openTarget(ctx, b.GetSpec().GetTarget(), &apiv1.ConnectBackupTargetRequest{
		Name: b.GetSpec().GetTarget(), Backup: &apiv1.ObjectKey{Namespace: b.GetMetadata().GetNamespace(), Name: b.GetMetadata().GetName()},
	})
	if err != nil {
		return nil, err
	}
	base := r.baseManifest(ctx, rp, b)
	sources, err := r.sources(ctx, b, vmUID, contentUID)
	if err != nil {
		return nil, err
	}
	var total int64
	for _, s := range sources {
		total += s.size
	}
	prog := newProgress(total)
	stopReport := prog.report(ctx, r.opts.Clock, r.opts.ProgressInterval, func(ctx context.Context, p *apiv1.BackupProgress) {
		_ = r.writeBackup(ctx, key, func(next *apiv1.VirtualMachineBackup) { next.Status.Progress = p })
	})
	defer stopReport()

	// While the chunks go up, GC in any cluster keeps them (and those
	// found there) until the manifest names them.
	lock, err := rp.Lock(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = lock.Unlock(context.WithoutCancel(ctx)) }()
	m := &repo.Manifest{
		ID: b.GetMetadata().GetUid(), Cluster: st.GetCluster(),
		VMNamespace: b.GetMetadata().GetNamespace(), VMName: src.GetMetadata().GetName(), VMUID: vmUID,
		Created: st.GetStarted().AsTime(), Labels: manifestLabels(b),
	}
	spec, err := protojson.Marshal(&apiv1.VirtualMachine{Metadata: &apiv1.ObjectMeta{
		Namespace: b.GetMetadata().GetNamespace(), Name: src.GetMetadata().GetName(), Uid: vmUID,
		Labels: src.GetMetadata().GetLabels(), Annotations: src.GetMetadata().GetAnnotations(),
	}, Spec: src.GetSpec()})
	if err != nil {
		return nil, fmt.Errorf("encoding the VM: %w", err)
	}
	m.Spec = spec
	out := &uploaded{manifest: m.ID}
	for i, s := range sources {
		msg := fmt.Sprintf("uploading volume %s (%d/%d)", s.name, i+1, len(sources))
		_ = r.writeBackup(ctx, key, func(next *apiv1.VirtualMachineBackup) { next.Status.Message = msg })
		v, vs, err := r.uploadVolume(ctx, rp, b, s, base, prog.volume())
		if err != nil {
			return nil, fmt.Errorf("volume %s: %w", s.name, err)
		}
		prog.volumeDone(s.size)
		m.Volumes = append(m.Volumes, *v)
		out.volumes = append(out.volumes, vs)
		r.log.Info("backup volume uploaded", "backup", key, "volume", s.name, "class_kind", s.kind, "size_bytes", v.SizeBytes,
			"bytes_read", vs.BytesRead, "bytes_written", vs.BytesWritten, "incremental", vs.Incremental,
			"chunks", vs.ChunksTotal, "chunks_uploaded", vs.ChunksUploaded)
	}
	// The manifest last: until it exists the backup does not, and a
	// failure before leaves only chunks that GC removes.
	// The manifest's id is the backup's uid: one that exists is this
	// backup's, put by an attempt whose status write was lost.
	if err := rp.PutManifest(ctx, m); err != nil && !errors.Is(err, repo.ErrExists) {
		return nil, fmt.Errorf("writing the manifest: %w", err)
	}
	// The local copies have served: keeping them would double the disk
	// the VM's volumes take (RBD snapshots stay, for the next diff).
	for _, s := range sources {
		if s.file != "" {
			if err := os.Remove(s.file); err != nil && !errors.Is(err, os.ErrNotExist) {
				r.log.Warn("removing a snapshot copy after its upload", "backup", key, "path", s.file, "err", err)
			}
		}
	}
	out.progress = prog.status(r.opts.Clock.Now())
	return out, nil
}

// openTarget connects to target name for the object req names.
func (r *Role) openTarget(ctx context.Context, name string, req *apiv1.ConnectBackupTargetRequest) (*repo.Repo, error) {
	conn, err := r.opts.Targets.Connect(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("connecting to backup target %s: %w", name, err)
	}
	t := conn.GetBackupTarget()
	st, err := target.Store(ctx, t)
	if err != nil {
		_, msg := target.Explain(t, err)
		return nil, fmt.Errorf("backup target %s: %s", name, msg)
	}
	return repo.New(st, r.opts.Repo), nil
}

// baseManifest is the manifest of b's base, or nil (a full backup): one
// that is gone or corrupt makes the backup full, not failed.
func (r *Role) baseManifest(ctx context.Context, rp *repo.Repo, b *apiv1.VirtualMachineBackup) *repo.Manifest {
	id := b.GetStatus().GetBase()
	if id == "" {
		return nil
	}
	m, err := rp.GetManifest(ctx, id)
	if err != nil {
		r.log.Warn("the base backup cannot be read: this backup is full", "backup", informer.Key(b), "base", id, "err", err)
		return nil
	}
	if m.VMUID != b.GetStatus().GetSource().GetMetadata().GetUid() {
		r.log.Warn("the base backup is of another VM: this backup is full", "backup", informer.Key(b), "base", id)
		return nil
	}
	return m
}

// sources lists the volumes of b's snapshot, each with where its data is:
// every path and image name built from checked uids and names.
func (r *Role) sources(ctx context.Context, b *apiv1.VirtualMachineBackup, vmUID, contentUID string) ([]source, error) {
	pvs := map[string]*apiv1.PersistentVolume{}
	for _, v := range b.GetStatus().GetSource().GetSpec().GetTemplate().GetSpec().GetVolumes() {
		if pv := v.GetPersistent(); pv != nil {
			pvs[v.GetName()] = pv
		}
	}
	var out []source
	for i, name := range b.GetStatus().GetSnapshotVolumes() {
		pv := pvs[name]
		if pv == nil {
			return nil, fmt.Errorf("status.snapshot_volumes[%d]: %q is no persistent volume of the VM", i, name)
		}
		s := source{name: name, class: validation.StorageClassOf(pv), kind: apiv1.ClassKindLocal}
		if pv.IsLocal() {
			p, err := r.opts.Layout.SnapshotVolumePath(contentUID, name)
			if err != nil {
				return nil, fmt.Errorf("status.snapshot_volumes[%d]: %w", i, err)
			}
			s.file = p
		} else {
			if r.opts.Classes == nil {
				return nil, fmt.Errorf("volume %s: storage class %s: this node has no storage classes", name, pv.GetStorageClass())
			}
			class, err := r.opts.Classes.Lookup(ctx, pv.GetStorageClass())
			if err != nil {
				return nil, fmt.Errorf("volume %s: %w", name, err)
			}
			switch {
			case class.RBD() != nil:
				s.kind, s.conn = apiv1.ClassKindRBD, class.Conn
				s.image, s.snap = ceph.VolumeImage(vmUID, name), ceph.SnapshotName(contentUID)
			case class.SharedPath() != "":
				lay := class.SharedLayout()
				p, err := lay.SnapshotVolumePath(contentUID, name)
				if err != nil {
					return nil, fmt.Errorf("status.snapshot_volumes[%d]: %w", i, err)
				}
				s.kind, s.file = apiv1.ClassKindSharedFilesystem, p
			default:
				return nil, fmt.Errorf("volume %s: storage class %s is of a kind this node does not know", name, class.Name)
			}
		}
		size, err := r.sourceSize(ctx, s)
		if err != nil {
			return nil, fmt.Errorf("volume %s: %w", name, err)
		}
		s.size = size
		out = append(out, s)
	}
	return out, nil
}

func (r *Role) sourceSize(ctx context.Context, s source) (int64, error) {
	if s.conn != nil {
		info, err := s.conn.Info(ctx, s.image)
		if err != nil {
			return 0, fmt.Errorf("reading image %s: %w", s.image, err)
		}
		return info.Size, nil
	}
	info, err := r.opts.Images.Info(ctx, s.file)
	if err != nil {
		return 0, err
	}
	return info.VirtualSize, nil
}

// uploadVolume writes one volume to the repository on base's volume of
// the same name when it can be used.
func (r *Role) uploadVolume(ctx context.Context, rp *repo.Repo, b *apiv1.VirtualMachineBackup, s source, base *repo.Manifest, p repo.ProgressFunc) (*repo.Volume, *apiv1.BackupVolumeStatus, error) {
	bv := baseVolume(base, s)
	var v *repo.Volume
	var ws repo.WriteStats
	var err error
	if s.conn != nil {
		bv, err = r.diffBase(ctx, b, s, bv)
		if err != nil {
			return nil, nil, err
		}
		v, ws, err = r.uploadRBD(ctx, rp, s, bv, p)
	} else {
		v, ws, err = r.uploadFile(ctx, rp, s, bv, p)
	}
	if err != nil {
		return nil, nil, err
	}
	v.Name, v.StorageClass, v.ClassKind = s.name, s.class, s.kind
	if bv != nil {
		v.Parent = base.ID
	}
	return v, &apiv1.BackupVolumeStatus{
		Name: s.name, StorageClass: s.class, ClassKind: s.kind, SizeBytes: v.SizeBytes,
		BytesRead: ws.BytesRead, BytesWritten: ws.BytesWritten, Incremental: bv != nil,
		ChunksTotal: int64(ws.ChunksTotal), ChunksUploaded: int64(ws.ChunksUploaded),
	}, nil
}

// baseVolume is base's volume of s's name and kind, or nil.
func baseVolume(base *repo.Manifest, s source) *repo.Volume {
	if base == nil {
		return nil
	}
	for i := range base.Volumes {
		if v := &base.Volumes[i]; v.Name == s.name && v.ClassKind == s.kind {
			return v
		}
	}
	return nil
}

// diffBase is bv when an rbd volume's diff can start from it: its RBD
// snapshot is the base backup's (the one the controller kept, named by
// its content's uid, not by what the target says) and still on the
// image. Otherwise nil: a full export.
func (r *Role) diffBase(ctx context.Context, b *apiv1.VirtualMachineBackup, s source, bv *repo.Volume) (*repo.Volume, error) {
	baseContent := b.GetStatus().GetBaseContentUid()
	if bv == nil || baseContent == "" || validation.CheckUID(baseContent) != nil || bv.Snapshot != ceph.SnapshotName(baseContent) {
		return nil, nil
	}
	snaps, err := s.conn.Snaps(ctx, s.image)
	if err != nil {
		return nil, fmt.Errorf("listing the snapshots of %s: %w", s.image, err)
	}
	for _, sn := range snaps {
		if sn.Name == bv.Snapshot {
			return bv, nil
		}
	}
	r.log.Info("the base backup's RBD snapshot is gone: a full export", "backup", informer.Key(b), "volume", s.name, "snapshot", bv.Snapshot)
	return nil, nil
}

// uploadRBD streams `rbd export-diff` of s (from bv's snapshot, when
// set) into the repository.
func (r *Role) uploadRBD(ctx context.Context, rp *repo.Repo, s source, bv *repo.Volume, p repo.ProgressFunc) (*repo.Volume, repo.WriteStats, error) {
	from := ""
	if bv != nil {
		from = bv.Snapshot
	}
	diff, err := s.conn.ExportDiff(ctx, s.image, from, s.snap)
	if err != nil {
		return nil, repo.WriteStats{}, err
	}
	v, ws, err := rp.WriteRBDDiff(ctx, diff, bv, p)
	if err == nil {
		// WriteRBDDiff stops at the stream's end record: read on to EOF
		// (nothing, or rbd's error), or Close takes the stream as cut.
		_, err = io.Copy(io.Discard, io.LimitReader(diff, 1<<20))
	}
	// Close waits for rbd: its error says why a stream ended early.
	if cerr := diff.Close(); err == nil {
		err = cerr
	} else if cerr != nil {
		err = fmt.Errorf("%w (%v)", err, cerr)
	}
	if err != nil {
		return nil, ws, err
	}
	return v, ws, nil
}

// uploadFile writes a qcow2 copy read in place (qemu-img map says where
// each extent is; holes are read as none), so chunks the base or the
// target has are not sent again.
func (r *Role) uploadFile(ctx context.Context, rp *repo.Repo, s source, bv *repo.Volume, p repo.ProgressFunc) (*repo.Volume, repo.WriteStats, error) {
	f, err := repo.OpenQCOW2(ctx, s.file)
	if err != nil {
		return nil, repo.WriteStats{}, err
	}
	defer f.Close()
	return rp.WriteRaw(ctx, f, bv, p)
}

// manifestLabels are the labels a manifest carries: the schedule that
// made the backup and the backup's name.
func manifestLabels(b *apiv1.VirtualMachineBackup) map[string]string {
	l := map[string]string{"virtplane.io/backup": b.GetMetadata().GetName()}
	if s := b.GetMetadata().GetLabels()[apiv1.LabelBackupSchedule]; s != "" {
		l[apiv1.LabelBackupSchedule] = s
	}
	return l
}

func removeFinalizer(list []string, f string) []string {
	return slices.DeleteFunc(slices.Clone(list), func(s string) bool { return s == f })
}
