package driver

import (
	"context"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/utils/clock"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
)

// fenceRetry is how often a failed self-fence is retried.
const fenceRetry = time.Second

// watchdog fires fn when a lease runs out without renewal. gen identifies
// the arming, so a renewal during a fence attempt stops the retries.
type watchdog struct {
	mu      sync.Mutex
	clk     clock.WithDelayedExecution
	timer   clock.Timer
	gen     uint64
	stopped bool
	fn      func(still func() bool)
}

func newWatchdog(clk clock.WithDelayedExecution, fn func(still func() bool)) *watchdog {
	return &watchdog{clk: clk, fn: fn}
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
	w.timer = w.clk.AfterFunc(d, func() {
		// Its own goroutine, as time.AfterFunc gives it: a fake clock
		// calls this under its lock, which fn's renew (timer.Stop)
		// takes again.
		go w.fn(func() bool { return w.current(gen) })
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
	if ms > 0 {
		// Only a domain known to be Wait is refused. One that does not
		// exist yet (a new launcher is renewed before its first Sync), or
		// whose metadata cannot be read now, is armed: the policy is
		// checked again when the watchdog fires, and refusing a renewal
		// because libvirtd hiccuped would fence a healthy guest later.
		if p, known := d.recordedPolicy(); known && p != apiv1.NodeFailurePolicyRestartElsewhere {
			d.lease.renew(0)
			return nil, status.Errorf(codes.FailedPrecondition,
				"domain %s has node failure policy %s: lease expiry never destroys it, so no lease watchdog is armed", d.cfg.DomainName, policyName(p))
		}
	}
	d.lease.renew(time.Duration(ms) * time.Millisecond)
	return &launcherpb.Empty{}, nil
}

// recordedPolicy returns the node failure policy in the domain's
// metadata; known is false when the domain or its metadata cannot be
// read.
func (d *Driver) recordedPolicy() (policy string, known bool) {
	dom, err := d.lookup()
	if err != nil || dom == nil {
		return "", false
	}
	defer dom.Free()
	md, ok, err := readMetadata(dom)
	if err != nil || !ok {
		return "", false
	}
	d.policy.remember(md)
	return md.NodeFailurePolicy, true
}

// policyName names an empty (pre-recording) policy as what it means.
func policyName(p string) string {
	if p == "" {
		return apiv1.NodeFailurePolicyWait + " (none recorded)"
	}
	return p
}

// fence destroys the domain because the node agent stopped renewing the
// lease: the control plane may already be starting this VM elsewhere
// (node_failure_policy RestartElsewhere), and two copies of one VM must
// never run. It retries until the domain is down or the lease is renewed.
func (d *Driver) fence(still func() bool) {
	d.log.Error("lease expired without renewal: destroying the domain (self-fence)")
	viaLibvirt := make(chan struct{})
	go func() {
		defer close(viaLibvirt)
		d.fenceThroughLibvirt(still)
	}()
	select {
	case <-viaLibvirt:
		return
	case <-d.done:
		return
	case <-time.After(fenceKillAfter):
	}
	// libvirt has not answered: QEMU goes without it. The libvirt attempt
	// carries on, to leave the domain's state right when it answers.
	for still() {
		gone, err := d.killQEMU()
		if gone {
			// The event pump reports the domain's end once libvirt
			// answers; the node agent sees the lease gone anyway.
			return
		}
		d.log.Error("self-fence: cannot kill QEMU without libvirt; retrying", "error", err)
		select {
		case <-viaLibvirt:
			return
		case <-d.done:
			return
		case <-time.After(fenceRetry):
		}
	}
}

// fenceThroughLibvirt destroys the domain through libvirt, retrying until
// it is down or the lease is renewed.
func (d *Driver) fenceThroughLibvirt(still func() bool) {
	for still() {
		// The domain's own record decides, not whoever armed the
		// watchdog: a Wait domain is never killed by lease expiry
		// (docs/failover.md, point 3).
		dom, err := d.lookup()
		if err == nil && dom == nil {
			d.log.Warn("self-fence: the domain does not exist; nothing to destroy")
			return
		}
		if err == nil {
			md, ok, merr := readMetadata(dom)
			dom.Free()
			if merr == nil && ok {
				d.policy.remember(md)
			}
			if merr == nil && (!ok || !md.FencedOnLeaseExpiry()) {
				d.log.Warn("self-fence skipped: the domain's node failure policy is not RestartElsewhere",
					"node_failure_policy", policyName(md.NodeFailurePolicy))
				return
			}
			err = merr
		}
		if err != nil {
			d.log.Error("self-fence: cannot read the domain's policy; retrying", "error", err)
			select {
			case <-d.done:
				return
			case <-time.After(fenceRetry):
			}
			continue
		}
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
