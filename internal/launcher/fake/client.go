package fake

import (
	"context"
	"os"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
)

type client struct {
	m      *Manager
	pid    int
	domain string
}

var _ launcher.Client = (*client)(nil)

// enter records the call and checks the launcher answers; it returns with
// m.mu held on success.
func (c *client) enter(ctx context.Context, call Call) error {
	call.Domain, call.Pid = c.domain, c.pid
	c.m.notify(call)
	c.m.mu.Lock()
	c.m.record(call)
	p := c.m.procs[c.pid]
	if p == nil || !p.alive {
		c.m.mu.Unlock()
		return status.Errorf(codes.Unavailable, "launcher pid %d: connection refused", c.pid)
	}
	if p.hung {
		c.m.mu.Unlock()
		<-ctx.Done()
		return status.Errorf(codes.DeadlineExceeded, "launcher pid %d: %v", c.pid, ctx.Err())
	}
	if err := ctx.Err(); err != nil {
		c.m.mu.Unlock()
		return status.FromContextError(err).Err()
	}
	return nil
}

func (c *client) Sync(ctx context.Context, vmi *apiv1.VirtualMachineInstance, opts *launcherpb.SyncOptions) (*launcherpb.DomainStatus, error) {
	if err := c.enter(ctx, Call{Op: "Sync"}); err != nil {
		return nil, err
	}
	m := c.m
	defer m.mu.Unlock()
	if opts.GetDomainName() != c.domain {
		return nil, status.Errorf(codes.InvalidArgument, "launcher manages %s, not %s", c.domain, opts.GetDomainName())
	}
	if err := m.syncErr[c.domain]; err != nil {
		return nil, err
	}
	md := vmi.GetMetadata()
	d := m.domains[c.domain]
	if d != nil && d.VMIUID != md.GetUid() {
		return nil, status.Errorf(codes.FailedPrecondition, "domain %s belongs to VMI uid %s, not %s", c.domain, d.VMIUID, md.GetUid())
	}
	phase := vmi.GetStatus().GetPhase()
	if d == nil {
		d = &Domain{Name: c.domain, UUID: uuid.NewString(), VMIUID: md.GetUid(), VMIKey: md.GetNamespace() + "/" + md.GetName(),
			State: StateShutoff, Reason: ReasonUnknown, PowerOffAfterACPI: m.PowerOffAfterACPI,
			Node: vmi.GetStatus().GetNodeName()}
		m.domains[c.domain] = d
		m.emit(c.domain, "Defined/Added")
	}
	d.GracePeriodSeconds = vmi.GetSpec().GracePeriodSeconds()
	if p := opts.GetNodeFailurePolicy(); p != "" {
		d.NodeFailurePolicy = p
	}
	// Like libvirt, starting needs every file the domain points at.
	if d.State == StateShutoff && phase != apiv1.PhaseRunning && !apiv1.IsFinal(phase) {
		for _, p := range append([]string{opts.GetKernelPath(), opts.GetInitrdPath()}, diskPaths(opts)...) {
			if p == "" {
				continue
			}
			if _, err := os.Stat(p); err != nil {
				return nil, status.Errorf(codes.Unknown, "Cannot access storage file '%s': No such file or directory", p)
			}
		}
		// A new boot; spec.paused ("start --paused") boots paused, as a
		// user pause that Sync will not undo.
		d.ShutdownRequestedAt, d.ACPIPresses = 0, 0
		d.State, d.Reason, d.PausedByUser = StateRunning, "Booted", false
		if vmi.GetSpec().GetPaused() {
			d.State, d.Reason, d.PausedByUser = StatePaused, "StartingUp", true
		}
		d.Starts++
		d.Disks = bootDisks(opts)
		m.emit(c.domain, "Started/Booted")
	}
	if d.State == StatePaused && !d.PausedByUser {
		d.State, d.Reason = StateRunning, "Unpaused"
		m.emit(c.domain, "Resumed/Unpaused")
	}
	if d.State == StateRunning || d.State == StatePaused {
		// The launcher grows a running domain's disks to their sizes.
		for _, disk := range opts.GetDisks() {
			if n := disk.GetSizeBytes(); n > d.DiskSizes[disk.GetName()] {
				if d.DiskSizes == nil {
					d.DiskSizes = map[string]int64{}
				}
				d.DiskSizes[disk.GetName()] = n
			}
		}
	}
	return m.statusLocked(c.domain), nil
}

func diskPaths(opts *launcherpb.SyncOptions) []string {
	var out []string
	for _, d := range opts.GetDisks() {
		out = append(out, d.GetPath())
	}
	return out
}

// domainOp is a call that acts on the domain: apply runs under the
// manager's lock when the domain exists, and the call returns the
// domain's status after it.
func (c *client) domainOp(ctx context.Context, op string, apply func(d *Domain) error) (*launcherpb.DomainStatus, error) {
	if err := c.enter(ctx, Call{Op: op}); err != nil {
		return nil, err
	}
	m := c.m
	defer m.mu.Unlock()
	if d := m.domains[c.domain]; d != nil && apply != nil {
		if err := apply(d); err != nil {
			return nil, err
		}
	}
	return m.statusLocked(c.domain), nil
}

func (c *client) Shutdown(ctx context.Context) (*launcherpb.DomainStatus, error) {
	return c.domainOp(ctx, "Shutdown", func(d *Domain) error {
		if d.State == StateRunning || d.State == StatePaused {
			if d.ShutdownRequestedAt == 0 {
				d.ShutdownRequestedAt = time.Now().Unix()
			}
			d.ACPIPresses++
			if d.PowerOffAfterACPI > 0 && d.ACPIPresses >= d.PowerOffAfterACPI && d.State == StateRunning {
				d.State, d.Reason = StateShutoff, "Shutdown"
				c.m.emit(c.domain, "Stopped/Shutdown")
			}
		}
		return nil
	})
}

func (c *client) Kill(ctx context.Context) (*launcherpb.DomainStatus, error) {
	return c.domainOp(ctx, "Kill", func(d *Domain) error {
		if d.State != StateShutoff {
			d.State, d.Reason = StateShutoff, "Destroyed"
			c.m.emit(c.domain, "Stopped/Destroyed")
		}
		return nil
	})
}

func (c *client) Delete(ctx context.Context) (*launcherpb.DomainStatus, error) {
	return c.domainOp(ctx, "Delete", func(d *Domain) error {
		if d.State != StateShutoff {
			return status.Errorf(codes.FailedPrecondition, "domain %s is %s; kill it first", c.domain, d.State)
		}
		delete(c.m.domains, c.domain)
		c.m.emit(c.domain, "Undefined/Removed")
		return nil
	})
}

func (c *client) Pause(ctx context.Context) (*launcherpb.DomainStatus, error) {
	return c.domainOp(ctx, "Pause", func(d *Domain) error {
		if d.State == StateRunning {
			d.State, d.Reason, d.PausedByUser = StatePaused, "User", true
			c.m.emit(c.domain, "Suspended/Paused")
		}
		return nil
	})
}

func (c *client) Unpause(ctx context.Context) (*launcherpb.DomainStatus, error) {
	return c.domainOp(ctx, "Unpause", func(d *Domain) error {
		if d.State == StatePaused {
			d.State, d.Reason, d.PausedByUser = StateRunning, "Unpaused", false
			c.m.emit(c.domain, "Resumed/Unpaused")
		}
		return nil
	})
}

func (c *client) GetDomain(ctx context.Context) (*launcherpb.DomainStatus, error) {
	return c.domainOp(ctx, "GetDomain", nil)
}

func (c *client) Ping(ctx context.Context) error {
	if err := c.enter(ctx, Call{Op: "Ping"}); err != nil {
		return err
	}
	c.m.mu.Unlock()
	return nil
}

func (c *client) RenewLease(ctx context.Context, validFor time.Duration) error {
	if err := c.enter(ctx, Call{Op: "RenewLease", Lease: validFor}); err != nil {
		return err
	}
	defer c.m.mu.Unlock()
	if d := c.m.domains[c.domain]; d != nil {
		d.Leases = append(d.Leases, validFor)
	}
	return nil
}

func (c *client) Events(ctx context.Context) (<-chan *launcherpb.DomainEvent, error) {
	if err := c.enter(ctx, Call{Op: "Events"}); err != nil {
		return nil, err
	}
	m := c.m
	defer m.mu.Unlock()
	p := m.procs[c.pid]
	ch := make(chan *launcherpb.DomainEvent, 64)
	ch <- &launcherpb.DomainEvent{Status: m.statusLocked(c.domain), Event: "Current"}
	p.subs[ch] = struct{}{}
	go func() {
		<-ctx.Done()
		m.mu.Lock()
		defer m.mu.Unlock()
		if _, ok := p.subs[ch]; ok {
			delete(p.subs, ch)
			close(ch)
		}
	}()
	return ch, nil
}

func (c *client) Detach() {
	call := Call{Op: "Detach", Domain: c.domain, Pid: c.pid}
	c.m.notify(call)
	c.m.mu.Lock()
	defer c.m.mu.Unlock()
	c.m.record(call)
}

func (c *client) Stop(ctx context.Context) error {
	call := Call{Op: "Stop", Domain: c.domain, Pid: c.pid}
	c.m.notify(call)
	c.m.mu.Lock()
	defer c.m.mu.Unlock()
	c.m.record(call)
	// Stopping works on a hung launcher too: the real one is killed by pid.
	if p := c.m.procs[c.pid]; p != nil && p.alive {
		c.m.exit(p)
	}
	return nil
}
