package snapshot

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/ceph"
	"github.com/virtplane/terraform-provider-virtplane/internal/fsutil"
	"github.com/virtplane/terraform-provider-virtplane/internal/informer"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/launchers"
)

// callTimeout bounds SnapshotDisks and CommitDisks: a commit waits for
// QEMU to merge what the guest wrote during the copy.
const callTimeout = 5 * time.Minute

// errMigrating is KubeVirt's refusal to snapshot a migrating instance.
var errMigrating = errors.New("failed to freeze VMI, VMI is currently during migration")

func snapshotDisks(vols []volume) []*launcherpb.SnapshotDisk {
	out := make([]*launcherpb.SnapshotDisk, len(vols))
	for i, v := range vols {
		out[i] = &launcherpb.SnapshotDisk{Path: v.live, OverlayPath: v.overlay}
	}
	return out
}

// take copies the volumes of sc (files into snapshot directories, RBD
// snapshots of the volumes on rbd classes) and writes the outcome.
// Anything a previous attempt left (an agent killed mid-copy) is undone
// first, so every attempt starts from scratch.
func (c *Contents) take(ctx context.Context, sc *apiv1.VirtualMachineSnapshotContent) error {
	key := informer.Key(sc)
	ref := &contentRef{c: sc}
	if err := c.update(ctx, ref, func(next *apiv1.VirtualMachineSnapshotContent) {
		next.Status.Phase, next.Status.Message = apiv1.SnapshotInProgress, "copying volume data"
	}); err != nil {
		return err
	}
	fail := func(cause error) error {
		c.log.Warn("snapshot failed", "content", key, "err", cause)
		if err := c.undo(ctx, sc); err != nil {
			return err
		}
		return c.update(ctx, ref, func(next *apiv1.VirtualMachineSnapshotContent) {
			next.Status.Phase, next.Status.Error, next.Status.Message = apiv1.SnapshotFailed, cause.Error(), ""
			next.Status.ReadyToUse = false
		})
	}
	set, err := c.volumes(ctx, sc)
	if err != nil {
		return fail(err)
	}
	if len(set.unreachable) > 0 {
		// The class may be reachable again soon: tried again with
		// backoff, the snapshot's deadline bounding the wait.
		err := errors.Join(set.unreachable...)
		_ = c.update(ctx, ref, func(next *apiv1.VirtualMachineSnapshotContent) { next.Status.Message = err.Error() })
		return err
	}
	if err := c.undo(ctx, sc); err != nil {
		return err
	}
	uid := sc.GetMetadata().GetUid()
	for _, l := range append(set.localLayout(c.opts.Layout), set.sharedLayouts()...) {
		dir, _ := l.SnapshotDir(uid)
		if _, err := fsutil.MkdirAll(dir, 0o700); err != nil {
			return fail(fmt.Errorf("creating %s: %w", dir, err))
		}
	}
	e, vmi, err := c.opts.Domains.RunningDomain(ctx, set.owner)
	if err != nil {
		return err // the launcher may answer soon; the deadline bounds it
	}
	if vmi != nil && apiv1.MigrationInFlight(vmi) {
		return errMigrating
	}

	var at time.Time
	var indications []string
	var snaps map[string]*ceph.VolumeSnapshot
	switch {
	case e == nil || set.empty():
		at = c.opts.Clock.Now()
		if snaps, err = c.snapshotRBD(ctx, uid, set); err == nil {
			err = c.copyVolumes(ctx, ref, set.files, false)
		}
	case len(set.rbds) == 0:
		at, indications, err = c.onlineCopy(ctx, ref, e, set.files)
	default:
		at, indications, snaps, err = c.onlineWithRBD(ctx, ref, e, uid, set)
	}
	if err != nil {
		return failOrStop(ctx, fail, err)
	}

	st := &apiv1.VirtualMachineSnapshotContentStatus{
		Phase: apiv1.SnapshotSucceeded, CreationTime: timestamppb.New(at), ReadyToUse: true, Indications: indications,
	}
	backups := map[string]*apiv1.VolumeBackup{}
	for _, v := range set.files {
		fi, err := os.Stat(v.copy)
		if err != nil {
			return fail(err)
		}
		info, err := c.opts.Copier.Info(ctx, v.copy)
		if err != nil {
			return fail(err)
		}
		backups[v.name] = &apiv1.VolumeBackup{VolumeName: v.name, Path: v.copy, SizeBytes: fi.Size(), VirtualSizeBytes: info.VirtualSize, StorageClass: v.class}
	}
	for _, v := range set.rbds {
		if s := snaps[v.name]; s != nil {
			backups[v.name] = &apiv1.VolumeBackup{VolumeName: v.name, StorageClass: v.class.Name,
				RbdSnapshot: s.Spec(v.class.Conn.Pool), VirtualSizeBytes: s.Size}
		}
	}
	for _, name := range sc.GetSpec().GetVolumes() {
		if b := backups[name]; b != nil {
			st.VolumeBackups = append(st.VolumeBackups, b)
		}
	}
	if err := c.update(ctx, ref, func(next *apiv1.VirtualMachineSnapshotContent) {
		next.Status = proto.Clone(st).(*apiv1.VirtualMachineSnapshotContentStatus)
	}); err != nil {
		c.keepResult(sc.GetMetadata().GetUid(), st)
		return err
	}
	c.log.Info("snapshot taken", "content", key, "files", len(set.files), "rbd", len(snaps), "online", e != nil, "indications", indications)
	return nil
}

// failOrStop fails the content unless the copy was stopped (the content
// deleted or abandoned, or the agent stopping): that pass undoes it.
func failOrStop(ctx context.Context, fail func(error) error, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if launchers.Unavailable(err) {
		return err
	}
	return fail(err)
}

// onlineCopy snapshots the running domain's volumes, copies the files
// that then stand still, and commits the overlays back.
func (c *Contents) onlineCopy(ctx context.Context, ref *contentRef, e launcher.Snapshots, vols []volume) (time.Time, []string, error) {
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	resp, err := e.SnapshotDisks(cctx, &launcherpb.SnapshotDisksRequest{Disks: snapshotDisks(vols), Freeze: true})
	cancel()
	if err != nil {
		return time.Time{}, nil, fmt.Errorf("snapshot of the running guest's disks: %w", err)
	}
	if err := c.copyVolumes(ctx, ref, vols, true); err != nil {
		return time.Time{}, nil, err
	}
	cctx, cancel = context.WithTimeout(ctx, callTimeout)
	err = e.CommitDisks(cctx, &launcherpb.CommitDisksRequest{Disks: snapshotDisks(vols)})
	cancel()
	if err != nil {
		return time.Time{}, nil, fmt.Errorf("committing the snapshot overlays: %w", err)
	}
	return time.UnixMilli(resp.GetTimeUnixMillis()), resp.GetIndications(), nil
}

// copyVolumes writes each volume's copy aside and renames it when
// complete; progress shows in the content's message.
func (c *Contents) copyVolumes(ctx context.Context, ref *contentRef, vols []volume, shared bool) error {
	for i, v := range vols {
		msg := fmt.Sprintf("copying volume %s (%d/%d)", v.name, i+1, len(vols))
		// Progress only: a failed write does not stop the copy.
		_ = c.update(ctx, ref, func(next *apiv1.VirtualMachineSnapshotContent) { next.Status.Message = msg })
		tmp := v.copy + ".tmp"
		if err := c.opts.Copier.Convert(ctx, v.live, tmp, shared); err != nil {
			_ = os.Remove(tmp)
			return fmt.Errorf("copying volume %s: %w", v.name, err)
		}
		if err := fsutil.Commit(tmp, v.copy); err != nil {
			return fmt.Errorf("copying volume %s: %w", v.name, err)
		}
	}
	return nil
}

// undo puts the VM's volumes back as they were before any attempt at sc
// (an online snapshot's overlays committed, by the launcher while the
// guest runs, by qemu-img otherwise) and removes sc's data: its copies
// and its RBD snapshots. A class the node cannot reach now keeps its RBD
// snapshots, which the server's storage controller removes once the
// content is gone.
func (c *Contents) undo(ctx context.Context, sc *apiv1.VirtualMachineSnapshotContent) error {
	ctx = context.WithoutCancel(ctx)
	set, err := c.volumes(ctx, sc)
	if err != nil {
		set = &volumeSet{} // nothing can have been made from a content whose paths are refused
	}
	for _, e := range set.unreachable {
		c.log.Warn("undoing a snapshot without a storage class", "content", informer.Key(sc), "err", e)
	}
	var left []volume
	for _, v := range set.files {
		if _, err := os.Stat(v.overlay); err == nil {
			left = append(left, v)
		}
	}
	if len(left) > 0 {
		e, _, err := c.opts.Domains.RunningDomain(ctx, set.owner)
		if err != nil {
			return err
		}
		if e != nil {
			cctx, cancel := context.WithTimeout(ctx, callTimeout)
			err = e.CommitDisks(cctx, &launcherpb.CommitDisksRequest{Disks: snapshotDisks(left)})
			cancel()
			if status.Code(err) != codes.FailedPrecondition {
				if err != nil {
					return fmt.Errorf("committing the snapshot overlays: %w", err)
				}
				left = nil
			}
			// FailedPrecondition: the guest stopped meanwhile; its
			// overlays are merged here.
		}
		for _, v := range left {
			// The overlay holds what the guest wrote after the snapshot:
			// merged into the volume before it goes.
			if err := c.opts.Copier.Commit(ctx, v.overlay); err != nil {
				return fmt.Errorf("merging the snapshot overlay of volume %s: %w", v.name, err)
			}
			if err := os.Remove(v.overlay); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
		}
	}
	uid := sc.GetMetadata().GetUid()
	for _, v := range set.rbds {
		if err := v.class.Conn.SnapRemove(ctx, ceph.VolumeImage(set.owner, v.name), ceph.SnapshotName(uid)); err != nil {
			c.log.Warn("removing an RBD snapshot; the storage controller removes it once the content is gone",
				"content", informer.Key(sc), "volume", v.name, "err", err)
		}
	}
	for _, l := range set.sharedLayouts() {
		if err := l.RemoveSnapshotDir(uid); err != nil {
			return fmt.Errorf("removing the data of snapshot content %s under %s: %w", informer.Key(sc), l.Root, err)
		}
	}
	if err := c.opts.Layout.RemoveSnapshotDir(uid); err != nil {
		return fmt.Errorf("removing the data of snapshot content %s: %w", informer.Key(sc), err)
	}
	return nil
}

// contentRef is the latest copy of a content this pass wrote.
type contentRef struct {
	c *apiv1.VirtualMachineSnapshotContent
}

func (c *Contents) update(ctx context.Context, ref *contentRef, mutate func(*apiv1.VirtualMachineSnapshotContent)) error {
	out, err := c.work.WriteStatus(ctx, ref.c, mutate)
	if err == nil {
		ref.c = out
	}
	return err
}
