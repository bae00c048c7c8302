package snapshot

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/virtplane/terraform-provider-virtplane/internal/ceph"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
)

// thawAfter bounds a freeze around RBD snapshots: the launcher thaws the
// guest itself then, should this agent die before it thaws.
const thawAfter = time.Minute

// snapshotRBD takes the RBD snapshot of each rbd volume of set for
// content uid; a volume never provisioned (no image) is left out.
func (c *Contents) snapshotRBD(ctx context.Context, uid string, set *volumeSet) (map[string]*ceph.VolumeSnapshot, error) {
	out := map[string]*ceph.VolumeSnapshot{}
	for _, v := range set.rbds {
		s, err := v.class.Conn.SnapshotVolume(ctx, set.owner, v.name, uid)
		switch {
		case errors.Is(err, ceph.ErrNotFound):
			continue
		case err != nil:
			return nil, fmt.Errorf("volume %s (storage class %s): %w", v.name, v.class.Name, err)
		}
		out[v.name] = s
	}
	return out, nil
}

// onlineWithRBD snapshots a running guest that has volumes on rbd
// classes: its file systems frozen (when a guest agent answers), the
// file volumes moved onto overlays, the RBD snapshots taken, thawed;
// then the files are copied and the overlays committed back, as
// onlineCopy does.
func (c *Contents) onlineWithRBD(ctx context.Context, ref *contentRef, e launcher.Snapshots, uid string, set *volumeSet) (time.Time, []string, map[string]*ceph.VolumeSnapshot, error) {
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	resp, err := e.Freeze(cctx, &launcherpb.FreezeRequest{ThawAfterMillis: thawAfter.Milliseconds()})
	cancel()
	if err != nil {
		return time.Time{}, nil, nil, fmt.Errorf("freezing the running guest: %w", err)
	}
	thaw := func() error {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), callTimeout)
		defer cancel()
		if err := e.Thaw(cctx); err != nil {
			return fmt.Errorf("thawing the running guest: %w", err)
		}
		return nil
	}
	if len(set.files) > 0 {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		_, err := e.SnapshotDisks(cctx, &launcherpb.SnapshotDisksRequest{Disks: snapshotDisks(set.files)})
		cancel()
		if err != nil {
			return time.Time{}, nil, nil, errors.Join(fmt.Errorf("snapshot of the running guest's disks: %w", err), thaw())
		}
	}
	snaps, err := c.snapshotRBD(ctx, uid, set)
	if err = errors.Join(err, thaw()); err != nil {
		return time.Time{}, nil, nil, err
	}
	if len(set.files) > 0 {
		if err := c.copyVolumes(ctx, ref, set.files, true); err != nil {
			return time.Time{}, nil, nil, err
		}
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		err := e.CommitDisks(cctx, &launcherpb.CommitDisksRequest{Disks: snapshotDisks(set.files)})
		cancel()
		if err != nil {
			return time.Time{}, nil, nil, fmt.Errorf("committing the snapshot overlays: %w", err)
		}
	}
	return time.UnixMilli(resp.GetTimeUnixMillis()), resp.GetIndications(), snaps, nil
}
