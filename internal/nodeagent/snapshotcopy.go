package nodeagent

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
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/nodedir"
)

// snapshotCallTimeout bounds SnapshotDisks and CommitDisks: a commit
// waits for QEMU to merge what the guest wrote during the copy.
const snapshotCallTimeout = 5 * time.Minute

// errMigrating is KubeVirt's refusal to snapshot a migrating instance.
var errMigrating = errors.New("failed to freeze VMI, VMI is currently during migration")

// snapVolume is one persistent volume to copy: the live file, its copy,
// and the overlay an online snapshot puts over the live file.
type snapVolume struct {
	name, live, copy, overlay string
}

// snapshotVolumes lists the volumes of c that exist on this node; a
// volume never provisioned is skipped (the controller lists it as
// excluded). Every path is built from checked uids and names.
func (a *Agent) snapshotVolumes(c *apiv1.VirtualMachineSnapshotContent) ([]snapVolume, error) {
	uid := c.GetMetadata().GetUid()
	vmDir, err := a.layout.VMDir(c.GetSpec().GetSource().GetMetadata().GetUid())
	if err != nil {
		return nil, fmt.Errorf("spec.source.metadata.uid: %w", err)
	}
	var out []snapVolume
	for i, name := range c.GetSpec().GetVolumes() {
		live, err := nodedir.FileIn(nodedir.VolumesDir(vmDir), name+".qcow2")
		if err != nil {
			return nil, fmt.Errorf("spec.volumes[%d]: %w", i, err)
		}
		cp, err := a.layout.SnapshotVolumePath(uid, name)
		if err != nil {
			return nil, fmt.Errorf("spec.volumes[%d]: %w", i, err)
		}
		v := snapVolume{name: name, live: live, copy: cp, overlay: live + ".snap-" + uid}
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

func snapshotDisks(vols []snapVolume) []*launcherpb.SnapshotDisk {
	out := make([]*launcherpb.SnapshotDisk, len(vols))
	for i, v := range vols {
		out[i] = &launcherpb.SnapshotDisk{Path: v.live, OverlayPath: v.overlay}
	}
	return out
}

// runningDomain returns the launcher of the running (or paused) domain
// of VM vmUID on this node, or nil when none runs. A launcher the agent
// cannot reach yet is an error: whether the guest writes to the volumes
// is unknown.
func (a *Agent) runningDomain(ctx context.Context, vmUID string) (*entry, *apiv1.VirtualMachineInstance, error) {
	recs, err := a.db.ListVMIs()
	if err != nil {
		return nil, nil, err
	}
	for _, r := range recs {
		if r.VMUID != vmUID || !r.HasLauncher() {
			continue
		}
		e := a.launchers.get(r.Key())
		if e == nil || e.isDead() {
			return nil, nil, fmt.Errorf("%w: instance %s of the VM", errLauncherUnavailable, r.Key())
		}
		cctx, cancel := context.WithTimeout(ctx, a.opts.Timing.CallTimeout)
		st, err := e.client.GetDomain(cctx)
		cancel()
		if err != nil {
			return nil, nil, err
		}
		switch st.GetState() {
		case "Running", "Paused", "Blocked":
			vmi, _ := a.vmis.GetByKey(r.Key())
			return e, vmi, nil
		}
	}
	return nil, nil, nil
}

// takeSnapshot copies the volumes of c into its snapshot directory and
// writes the outcome. Anything a previous attempt left (an agent killed
// mid-copy) is undone first, so every attempt starts from scratch.
func (a *Agent) takeSnapshot(ctx context.Context, c *apiv1.VirtualMachineSnapshotContent) error {
	key := informer.Key(c)
	ref := &contentRef{c: c}
	if err := a.updateContent(ctx, ref, func(next *apiv1.VirtualMachineSnapshotContent) {
		next.Status.Phase, next.Status.Message = apiv1.SnapshotInProgress, "copying volume data"
	}); err != nil {
		return err
	}
	fail := func(cause error) error {
		a.log.Warn("snapshot failed", "content", key, "err", cause)
		if err := a.undoSnapshot(ctx, c); err != nil {
			return err
		}
		return a.updateContent(ctx, ref, func(next *apiv1.VirtualMachineSnapshotContent) {
			next.Status.Phase, next.Status.Error, next.Status.Message = apiv1.SnapshotFailed, cause.Error(), ""
			next.Status.ReadyToUse = false
		})
	}
	vols, err := a.snapshotVolumes(c)
	if err != nil {
		return fail(err)
	}
	if err := a.undoSnapshot(ctx, c); err != nil {
		return err
	}
	dir, _ := a.layout.SnapshotDir(c.GetMetadata().GetUid())
	if _, err := fsutil.MkdirAll(dir, 0o700); err != nil {
		return fail(fmt.Errorf("creating %s: %w", dir, err))
	}
	e, vmi, err := a.runningDomain(ctx, c.GetSpec().GetSource().GetMetadata().GetUid())
	if err != nil {
		return err // the launcher may answer soon; the deadline bounds it
	}
	if vmi != nil && migrating(vmi) {
		return errMigrating
	}

	var at time.Time
	var indications []string
	if e == nil || len(vols) == 0 {
		at = a.now()
		if err := a.copyVolumes(ctx, ref, vols, false); err != nil {
			return a.failOrStop(ctx, fail, err)
		}
	} else {
		at, indications, err = a.onlineCopy(ctx, ref, e, vols)
		if err != nil {
			return a.failOrStop(ctx, fail, err)
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
		info, err := a.copier.Info(ctx, v.copy)
		if err != nil {
			return fail(err)
		}
		st.VolumeBackups = append(st.VolumeBackups, &apiv1.VolumeBackup{VolumeName: v.name, Path: v.copy, SizeBytes: fi.Size(), VirtualSizeBytes: info.VirtualSize})
	}
	if err := a.updateContent(ctx, ref, func(next *apiv1.VirtualMachineSnapshotContent) {
		next.Status = proto.Clone(st).(*apiv1.VirtualMachineSnapshotContentStatus)
	}); err != nil {
		a.snaps.keepResult(c.GetMetadata().GetUid(), st)
		return err
	}
	a.log.Info("snapshot taken", "content", key, "volumes", len(vols), "online", e != nil, "indications", indications)
	return nil
}

// failOrStop fails the content unless the copy was stopped (the content
// deleted or abandoned, or the agent stopping): that pass undoes it.
func (a *Agent) failOrStop(ctx context.Context, fail func(error) error, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if unavailable(err) {
		return err
	}
	return fail(err)
}

// onlineCopy snapshots the running domain's volumes, copies the files
// that then stand still, and commits the overlays back.
func (a *Agent) onlineCopy(ctx context.Context, ref *contentRef, e *entry, vols []snapVolume) (time.Time, []string, error) {
	cctx, cancel := context.WithTimeout(ctx, snapshotCallTimeout)
	resp, err := e.client.SnapshotDisks(cctx, &launcherpb.SnapshotDisksRequest{Disks: snapshotDisks(vols), Freeze: true})
	cancel()
	if err != nil {
		return time.Time{}, nil, fmt.Errorf("snapshot of the running guest's disks: %w", err)
	}
	if err := a.copyVolumes(ctx, ref, vols, true); err != nil {
		return time.Time{}, nil, err
	}
	cctx, cancel = context.WithTimeout(ctx, snapshotCallTimeout)
	err = e.client.CommitDisks(cctx, &launcherpb.CommitDisksRequest{Disks: snapshotDisks(vols)})
	cancel()
	if err != nil {
		return time.Time{}, nil, fmt.Errorf("committing the snapshot overlays: %w", err)
	}
	return time.UnixMilli(resp.GetTimeUnixMillis()), resp.GetIndications(), nil
}

// copyVolumes writes each volume's copy aside and renames it when
// complete; progress shows in the content's message.
func (a *Agent) copyVolumes(ctx context.Context, ref *contentRef, vols []snapVolume, shared bool) error {
	for i, v := range vols {
		msg := fmt.Sprintf("copying volume %s (%d/%d)", v.name, i+1, len(vols))
		// Progress only: a failed write does not stop the copy.
		_ = a.updateContent(ctx, ref, func(next *apiv1.VirtualMachineSnapshotContent) { next.Status.Message = msg })
		tmp := v.copy + ".tmp"
		if err := a.copier.Convert(ctx, v.live, tmp, shared); err != nil {
			_ = os.Remove(tmp)
			return fmt.Errorf("copying volume %s: %w", v.name, err)
		}
		if err := fsutil.Commit(tmp, v.copy); err != nil {
			return fmt.Errorf("copying volume %s: %w", v.name, err)
		}
	}
	return nil
}

// undoSnapshot puts the VM's volumes back as they were before any
// attempt at c (an online snapshot's overlays committed, by the launcher
// while the guest runs, by qemu-img otherwise) and removes c's data.
func (a *Agent) undoSnapshot(ctx context.Context, c *apiv1.VirtualMachineSnapshotContent) error {
	ctx = context.WithoutCancel(ctx)
	vols, err := a.snapshotVolumes(c)
	if err != nil {
		vols = nil // nothing can have been made from a content whose paths are refused
	}
	var left []snapVolume
	for _, v := range vols {
		if _, err := os.Stat(v.overlay); err == nil {
			left = append(left, v)
		}
	}
	if len(left) > 0 {
		e, _, err := a.runningDomain(ctx, c.GetSpec().GetSource().GetMetadata().GetUid())
		if err != nil {
			return err
		}
		if e != nil {
			cctx, cancel := context.WithTimeout(ctx, snapshotCallTimeout)
			err = e.client.CommitDisks(cctx, &launcherpb.CommitDisksRequest{Disks: snapshotDisks(left)})
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
			if err := a.copier.Commit(ctx, v.overlay); err != nil {
				return fmt.Errorf("merging the snapshot overlay of volume %s: %w", v.name, err)
			}
			if err := os.Remove(v.overlay); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
		}
	}
	if err := a.layout.RemoveSnapshotDir(c.GetMetadata().GetUid()); err != nil {
		return fmt.Errorf("removing the data of snapshot content %s: %w", informer.Key(c), err)
	}
	return nil
}

// contentRef is the latest copy of a content this pass wrote.
type contentRef struct {
	c *apiv1.VirtualMachineSnapshotContent
}

func (a *Agent) updateContent(ctx context.Context, ref *contentRef, mutate func(*apiv1.VirtualMachineSnapshotContent)) error {
	out, err := a.writeContent(ctx, ref.c, mutate)
	if err == nil {
		ref.c = out
	}
	return err
}
