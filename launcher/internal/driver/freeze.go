package driver

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
)

// Freezes for snapshots the node agent takes itself (RBD snapshots of
// volumes on a storage class, docs/snapshots.md): Freeze freezes the
// guest's file systems when a guest agent answers and arms a timer that
// thaws them if no Thaw comes (KubeVirt's unfreezeTimeout), so that a
// node agent that dies between the two never leaves the guest frozen.

// DefaultThawAfter bounds a freeze whose request names no bound.
const DefaultThawAfter = 5 * time.Minute

// Freeze freezes the guest's file systems (unless the domain is paused,
// which stands still already, or no guest agent answers) and reports the
// indications and the point in time, as SnapshotDisks does.
func (d *Driver) Freeze(ctx context.Context, req *launcherpb.FreezeRequest) (*launcherpb.SnapshotDisksResponse, error) {
	thawAfter := time.Duration(req.GetThawAfterMillis()) * time.Millisecond
	if thawAfter <= 0 || thawAfter > DefaultThawAfter {
		thawAfter = DefaultThawAfter
	}
	var out *launcherpb.SnapshotDisksResponse
	err := d.onRunningDomain(ctx, "freeze", func(_ Domain, sdom SnapshottingDomain, st State) error {
		if d.migrating() {
			return status.Error(codes.FailedPrecondition, ErrMigrating)
		}
		ind, frozen, err := d.freezeFor(sdom, st, true)
		if err != nil {
			return err
		}
		if frozen {
			d.thawer.renew(thawAfter)
			d.log.Info("guest file systems frozen", "thaw_after", thawAfter)
		}
		out = &launcherpb.SnapshotDisksResponse{Indications: ind, TimeUnixMillis: d.cfg.Now().UnixMilli()}
		return nil
	})
	return out, err
}

// Thaw thaws the guest's file systems; a guest that is not frozen, has no
// guest agent or no longer runs is no error.
func (d *Driver) Thaw(ctx context.Context, _ *launcherpb.Empty) (*launcherpb.Empty, error) {
	d.thawer.renew(0)
	err := d.onRunningDomain(ctx, "thaw", func(_ Domain, sdom SnapshottingDomain, _ State) error {
		if err := d.thaw(sdom); err != nil && !errors.Is(err, ErrNoGuestAgent) {
			return grpcError(err)
		}
		return nil
	})
	if status.Code(err) == codes.FailedPrecondition {
		return &launcherpb.Empty{}, nil // not running: nothing is frozen
	}
	if err != nil {
		return nil, err
	}
	return &launcherpb.Empty{}, nil
}

// thawNow is the timer's thaw of a freeze nobody ended; a Thaw or a new
// Freeze since it fired (still false) has taken over.
func (d *Driver) thawNow(still func() bool) {
	if !still() {
		return
	}
	d.log.Warn("no thaw came in time; thawing the guest's file systems")
	if _, err := d.Thaw(context.Background(), &launcherpb.Empty{}); err != nil {
		d.log.Error("thawing the guest's file systems", "err", err)
	}
}
