package driver

import (
	"context"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
)

// fenceRetry is how often a failed self-fence is retried.
const fenceRetry = time.Second

// watchdog fires fn when a lease runs out without renewal. gen identifies
// the arming, so a renewal during a fence attempt stops the retries.
type watchdog struct {
	mu      sync.Mutex
	timer   *time.Timer
	gen     uint64
	stopped bool
	fn      func(still func() bool)
}

func newWatchdog(fn func(still func() bool)) *watchdog {
	return &watchdog{fn: fn}
}

// renew arms (or re-arms) the watchdog; d == 0 disarms it.
func (w *watchdog) renew(d time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return
	}
	w.gen++
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
	if d <= 0 {
		return
	}
	gen := w.gen
	w.timer = time.AfterFunc(d, func() {
		w.fn(func() bool { return w.current(gen) })
	})
}

// current reports whether the arming gen is still the latest.
func (w *watchdog) current(gen uint64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return !w.stopped && w.gen == gen
}

func (w *watchdog) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopped = true
	w.gen++
	if w.timer != nil {
		w.timer.Stop()
	}
}

// RenewLease arms or renews the self-fencing lease.
func (d *Driver) RenewLease(ctx context.Context, req *launcherpb.LeaseRequest) (*launcherpb.Empty, error) {
	if err := ctx.Err(); err != nil {
		return nil, status.FromContextError(err).Err()
	}
	ms := req.GetValidForMillis()
	if ms < 0 {
		return nil, status.Error(codes.InvalidArgument, "valid_for_millis must not be negative")
	}
	d.lease.renew(time.Duration(ms) * time.Millisecond)
	return &launcherpb.Empty{}, nil
}

// fence destroys the domain because the node agent stopped renewing the
// lease: the control plane may already be starting this VM elsewhere
// (node_failure_policy RestartElsewhere), and two copies of one VM must
// never run. It retries until the domain is down or the lease is renewed.
func (d *Driver) fence(still func() bool) {
	d.log.Error("lease expired without renewal: destroying the domain (self-fence)")
	for still() {
		st, err := d.Kill(context.Background(), &launcherpb.Empty{})
		if err == nil {
			d.log.Error("self-fenced: domain destroyed", "state", st.GetState(), "reason", st.GetReason())
			d.publish(st, "Fenced/LeaseExpired")
			return
		}
		d.log.Error("self-fence failed; retrying", "error", err)
		select {
		case <-d.done:
			return
		case <-time.After(fenceRetry):
		}
	}
	d.log.Warn("self-fence abandoned: the lease was renewed or the launcher is stopping")
}
