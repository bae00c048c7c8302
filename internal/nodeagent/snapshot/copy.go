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
	"github.com/virtplane/terraform-provider-virtplane/internal/fsutil"
	"github.com/virtplane/terraform-provider-virtplane/internal/informer"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/launchers"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/nodedir"
)

// callTimeout bounds SnapshotDisks and CommitDisks: a commit waits for
// QEMU to merge what the guest wrote during the copy.
const callTimeout = 5 * time.Minute

// errMigrating is KubeVirt's refusal to snapshot a migrating instance.
var errMigrating = errors.New("failed to freeze VMI, VMI is currently during migration")

// volume is one persistent volume to copy: the live file, its copy, and
// the overlay an online snapshot puts over the live file.
type volume struct {
	name, live, copy, overlay string
}

// volumes lists the volumes of sc that exist on this node; a volume
// never provisioned is skipped (the controller lists it as excluded).
// Every path is built from checked uids and names.
func (c *Contents) volumes(sc *apiv1.VirtualMachineSnapshotContent) ([]volume, error) {
	layout := c.opts.Layout
	uid := sc.GetMetadata().GetUid()
	vmDir, err := layout.VMDir(sc.GetSpec().GetSource().GetMetadata().GetUid())
	if err != nil {
		return nil, fmt.Errorf("spec.source.metadata.uid: %w", err)
	}
	// The content's own namespace, not the one its spec names: a content
	// copies only its namespace's VMs.
	if err := nodedir.CheckVMDirOwner(vmDir, sc.GetMetadata().GetNamespace(), sc.GetSpec().GetSource().GetMetadata().GetName()); err != nil {
		return nil, fmt.Errorf("spec.source: %w", err)
	}
	var out []volume
	for i, name := range sc.GetSpec().GetVolumes() {
		live, err := nodedir.FileIn(nodedir.VolumesDir(vmDir), name+".qcow2")
		if err != nil {
			return nil, fmt.Errorf("spec.volumes[%d]: %w", i, err)
		}
		cp, err := layout.SnapshotVolumePath(uid, name)
		if err != nil {
			return nil, fmt.Errorf("spec.volumes[%d]: %w", i, err)
		}
		v := volume{name: name, live: live, copy: cp, overlay: live + ".snap-" + uid}
		if _, err := os.Stat(live); errors.Is(err, os.ErrNotExist) {
			if _, oerr := os.Stat(v.overlay); oerr != nil {
				continue
			}
		} else if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func snapshotDisks(vols []volume) []*launcherpb.SnapshotDisk {
	out := make([]*launcherpb.SnapshotDisk, len(vols))
	for i, v := range vols {
		out[i] = &launcherpb.SnapshotDisk{Path: v.live, OverlayPath: v.overlay}
	}
	return out
}

// take copies the volumes of sc into its snapshot directory and writes
// the outcome. Anything a previous attempt left (an agent killed
// mid-copy) is undone first, so every attempt starts from scratch.
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
	vols, err := c.volumes(sc)
	if err != nil {
		return fail(err)
	}
	if err := c.undo(ctx, sc); err != nil {
		return err
	}
	dir, _ := c.opts.Layout.SnapshotDir(sc.GetMetadata().GetUid())
	if _, err := fsutil.MkdirAll(dir, 0o700); err != nil {
		return fail(fmt.Errorf("creating %s: %w", dir, err))
	}
	e, vmi, err := c.opts.Domains.RunningDomain(ctx, sc.GetSpec().GetSource().GetMetadata().GetUid())
	if err != nil {
		return err // the launcher may answer soon; the deadline bounds it
	}
	if vmi != nil && apiv1.MigrationInFlight(vmi) {
		return errMigrating
	}

	var at time.Time
	var indications []string
	if e == nil || len(vols) == 0 {
		at = c.opts.Clock.Now()
		if err := c.copyVolumes(ctx, ref, vols, false); err != nil {
			return failOrStop(ctx, fail, err)
		}
	} else {
		at, indications, err = c.onlineCopy(ctx, ref, e, vols)
		if err != nil {
			return failOrStop(ctx, fail, err)
		}
	}

	st := &apiv1.VirtualMachineSnapshotContentStatus{
		Phase: apiv1.SnapshotSucceeded, CreationTime: timestamppb.New(at), ReadyToUse: true, Indications: indications,
	}
	for _, v := range vols {
		fi, err := os.Stat(v.copy)
		if err != nil {
			return fail(err)
		}
		info, err := c.opts.Copier.Info(ctx, v.copy)
		if err != nil {
			return fail(err)
		}
		st.VolumeBackups = append(st.VolumeBackups, &apiv1.VolumeBackup{VolumeName: v.name, Path: v.copy, SizeBytes: fi.Size(), VirtualSizeBytes: info.VirtualSize})
	}
	if err := c.update(ctx, ref, func(next *apiv1.VirtualMachineSnapshotContent) {
		next.Status = proto.Clone(st).(*apiv1.VirtualMachineSnapshotContentStatus)
	}); err != nil {
		c.keepResult(sc.GetMetadata().GetUid(), st)
		return err
	}
	c.log.Info("snapshot taken", "content", key, "volumes", len(vols), "online", e != nil, "indications", indications)
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
// guest runs, by qemu-img otherwise) and removes sc's data.
func (c *Contents) undo(ctx context.Context, sc *apiv1.VirtualMachineSnapshotContent) error {
	ctx = context.WithoutCancel(ctx)
	vols, err := c.volumes(sc)
	if err != nil {
		vols = nil // nothing can have been made from a content whose paths are refused
	}
	var left []volume
	for _, v := range vols {
		if _, err := os.Stat(v.overlay); err == nil {
			left = append(left, v)
		}
	}
	if len(left) > 0 {
		e, _, err := c.opts.Domains.RunningDomain(ctx, sc.GetSpec().GetSource().GetMetadata().GetUid())
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
	if err := c.opts.Layout.RemoveSnapshotDir(sc.GetMetadata().GetUid()); err != nil {
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
