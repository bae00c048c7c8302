package driver

import (
	"context"
	"errors"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/utils/clock"

	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
)

// Freezes for snapshots the node agent takes itself (RBD snapshots of
// volumes on a storage class, docs/snapshots.md): Freeze freezes the
// guest's file systems when a guest agent answers and arms a timer that
// thaws them if no Thaw comes (KubeVirt's unfreezeTimeout), so that a
// node agent that dies between the two never leaves the guest frozen.

// DefaultThawAfter bounds a freeze whose request names no bound.
const DefaultThawAfter = 5 * time.Minute

// autoThaw is the timer of the freeze under way.
type autoThaw struct {
	mu   sync.Mutex
	stop chan struct{} // closed to disarm the armed timer
}

// arm (re)starts the timer: fn runs after d unless disarm comes first.
func (a *autoThaw) arm(clk clock.Clock, d time.Duration, fn func()) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.stop != nil {
		close(a.stop)
	}
	stop := make(chan struct{})
	a.stop = stop
	t := clk.NewTimer(d)
	go func() {
		defer t.Stop()
		select {
		case <-stop:
		case <-t.C():
			a.mu.Lock()
			current := a.stop == stop
			if current {
				a.stop = nil
			}
			a.mu.Unlock()
			if current {
				fn()
			}
		}
	}()
}

func (a *autoThaw) disarm() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.stop != nil {
		close(a.stop)
		a.stop = nil
	}
}

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
			d.thawer.arm(d.clock, thawAfter, d.thawNow)
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
	d.thawer.disarm()
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

// thawNow is the timer's thaw of a freeze nobody ended.
func (d *Driver) thawNow() {
	d.log.Warn("no thaw came in time; thawing the guest's file systems")
	if _, err := d.Thaw(context.Background(), &launcherpb.Empty{}); err != nil {
		d.log.Error("thawing the guest's file systems", "err", err)
	}
}
