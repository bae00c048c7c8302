package nodeagent

import (
	"context"
	"fmt"
	"sync"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/launchers"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/state"
)

const defaultHeartbeatInterval = 10 * time.Second

// leaseTracker holds the node's fencing lease as the agent sees it: it
// ends a lease duration after the agent *sent* its last successful
// heartbeat, on the agent's monotonic clock (docs/failover.md), so a slow
// or retried RPC shortens the lease and never lengthens it.
type leaseTracker struct {
	mu     sync.Mutex
	end    time.Time
	fenced bool // the current expiry was acted on
}

func (l *leaseTracker) set(end time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.end, l.fenced = end, false
}

// remaining is how long the lease is still valid (≤ 0: expired or never
// granted).
func (l *leaseTracker) remaining(now time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.end.IsZero() {
		return 0
	}
	return l.end.Sub(now)
}

// expiredUnfenced reports, once per expiry, that the lease ran out.
func (l *leaseTracker) expiredUnfenced(now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.end.IsZero() || now.Before(l.end) || l.fenced {
		return false
	}
	l.fenced = true
	return true
}

// heartbeat reports the node alive. A schedulable heartbeat extends the
// lease and renews the launchers' watchdogs; the last one, at shutdown,
// only marks the node unschedulable.
func (a *Agent) heartbeat(ctx context.Context, schedulable bool) (time.Duration, error) {
	sent := a.now()
	// The image list and the network inventory go along only when they
	// changed; listing happens in the inventories (disks.Inventory.Run,
	// netinventory.Inventory.Run), never here.
	images, nets := a.images.Pending(), a.networks.Pending()
	var storage *apiv1.NodeStorageList
	if a.storage != nil {
		storage = a.storage.Report().Pending()
	}
	resp, err := a.nodes.Heartbeat(ctx, &apiv1.HeartbeatRequest{Name: a.opts.NodeName, Schedulable: schedulable,
		Images: images, NetworkInventory: nets, Storage: storage})
	if err != nil {
		return 0, fmt.Errorf("heartbeat: %w", err)
	}
	if storage != nil {
		a.storage.Report().MarkSent(storage)
	}
	if images != nil {
		a.images.MarkSent(images)
	}
	if nets != nil {
		a.networks.MarkSent(nets)
	}
	a.takeImagePolicy(resp.GetImagePullPolicy())
	interval := time.Duration(resp.GetHeartbeatIntervalSeconds()) * time.Second
	if interval <= 0 {
		interval = defaultHeartbeatInterval
	}
	if !schedulable {
		return interval, nil
	}
	end := sent.Add(time.Duration(resp.GetLeaseDurationSeconds()) * time.Second)
	a.lease.set(end)
	// The wall-clock end is kept for the next agent: one that starts after
	// it must fence before heartbeating again.
	if err := a.db.PutNode(&state.Node{LeaseExpiry: end.Round(0)}); err != nil {
		a.log.Warn("could not save the lease expiry", "err", err)
	}
	a.renewLeases(ctx)
	return interval, nil
}

func (a *Agent) firstHeartbeat(ctx context.Context) (time.Duration, error) {
	var interval time.Duration
	err := retry(ctx, a, "heartbeat", func() error {
		var err error
		interval, err = a.heartbeat(ctx, true)
		return err
	})
	return interval, err
}

func (a *Agent) heartbeatLoop(ctx context.Context, interval time.Duration) {
	var storageChanged <-chan struct{} // nil: never
	if a.storage != nil {
		storageChanged = a.storage.Report().Changed()
	}
	t := a.opts.Clock.NewTimer(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		case <-a.images.Changed():
			// Early, once per changed list (at most one per refresh
			// period); unchanged lists cost no extra beat.
			if a.images.Pending() == nil {
				continue
			}
		case <-a.networks.Changed():
			// The same for a new bridge or libvirt network.
			if a.networks.Pending() == nil {
				continue
			}
		case <-storageChanged:
			// And for a storage class that became reachable or not.
			if a.storage.Report().Pending() == nil {
				continue
			}
		}
		next, err := a.heartbeat(ctx, true)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			a.log.Warn("heartbeat failed", "err", err, "lease_left", a.lease.remaining(a.now()))
		} else {
			interval = next
		}
		if a.lease.expiredUnfenced(a.now()) {
			a.selfFence(ctx, "the node lease expired without a successful heartbeat")
		}
		t.Reset(interval)
	}
}

// renewLeases hands the launchers of RestartElsewhere VMIs the time left
// on the lease; Wait VMIs never get one, so lease expiry never kills them.
func (a *Agent) renewLeases(ctx context.Context) {
	var wg sync.WaitGroup
	for _, e := range a.launchers.List() {
		if e.Policy != apiv1.NodeFailurePolicyRestartElsewhere || e.Dead() {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := a.renewLease(ctx, e); err != nil {
				a.log.Warn("renewing launcher lease failed", "vmi", e.Key, "err", err)
			}
		}()
	}
	wg.Wait()
}

// renewLease renews one launcher's watchdog. An expired lease is not
// "renewed" with 0, which would disarm the watchdog: the domain must
// die instead, and selfFence sees to that.
func (a *Agent) renewLease(ctx context.Context, e *launchers.Conn) error {
	left := a.lease.remaining(a.now())
	if left <= 0 {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, min(a.opts.Timing.CallTimeout, left))
	defer cancel()
	return e.Client.RenewLease(cctx, left)
}

// selfFence destroys the domains of RestartElsewhere VMIs: the control
// plane may already be failing them over elsewhere. The launchers'
// watchdogs do the same on their own; this covers a launcher whose
// watchdog did not fire.
func (a *Agent) selfFence(ctx context.Context, why string) {
	for _, e := range a.launchers.List() {
		if e.Policy != apiv1.NodeFailurePolicyRestartElsewhere {
			continue
		}
		a.log.Warn("self-fencing: destroying domain", "vmi", e.Key, "why", why)
		cctx, cancel := context.WithTimeout(ctx, a.opts.Timing.CallTimeout)
		if _, err := e.Client.Kill(cctx); err != nil {
			a.log.Error("self-fencing kill failed", "vmi", e.Key, "err", err)
		}
		cancel()
		a.queue.Add(e.Key)
	}
}
