package driver

import (
	"context"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
	"github.com/virtplane/terraform-provider-virtplane/launcher/internal/domxml"
)

// onOwnedDomain runs fn on the domain under the lock after the ownership
// check, and returns what fn returns. A missing domain is not an error:
// the caller wanted it gone or stopped, and it is.
func (d *Driver) onOwnedDomain(ctx context.Context, fn func(Domain) (*launcherpb.DomainStatus, error)) (*launcherpb.DomainStatus, error) {
	if err := ctx.Err(); err != nil {
		return nil, status.FromContextError(err).Err()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.onDomain(func(dom Domain) (*launcherpb.DomainStatus, error) {
		if _, err := d.owned(dom); err != nil {
			return nil, err
		}
		return fn(dom)
	})
}

// withOwnedDomain is onOwnedDomain for an fn after which the domain's
// status is the answer.
func (d *Driver) withOwnedDomain(ctx context.Context, fn func(Domain) error) (*launcherpb.DomainStatus, error) {
	return d.onOwnedDomain(ctx, func(dom Domain) (*launcherpb.DomainStatus, error) {
		if err := fn(dom); err != nil {
			return nil, err
		}
		return d.statusOf(dom)
	})
}

// liveMetadata reads dom's state and, when a guest runs in it (running,
// blocked or paused), its metadata; live is false otherwise.
func liveMetadata(dom Domain) (s State, md domxml.Metadata, live bool, err error) {
	s, _, err = dom.GetState()
	if err != nil {
		return s, md, false, grpcError(fmt.Errorf("get domain state: %w", err))
	}
	if s != StateRunning && s != StateBlocked && s != StatePaused {
		return s, md, false, nil
	}
	if md, _, err = readMetadata(dom); err != nil {
		return s, md, false, grpcError(err)
	}
	return s, md, true, nil
}

// Shutdown presses the ACPI power button. The node agent re-sends it every
// few seconds because a booting guest may miss it; the first request time
// is kept in the metadata as the start of the grace period.
func (d *Driver) Shutdown(ctx context.Context, _ *launcherpb.ShutdownRequest) (*launcherpb.DomainStatus, error) {
	requested := false
	st, err := d.withOwnedDomain(ctx, func(dom Domain) error {
		_, md, live, err := liveMetadata(dom)
		if err != nil || !live {
			return err
		}
		if md.ShutdownRequestedAt == 0 {
			md.ShutdownRequestedAt = d.cfg.Now().Unix()
			if err := writeMetadata(dom, md); err != nil {
				return grpcError(err)
			}
			requested = true
		}
		if err := dom.Shutdown(); err != nil {
			return grpcError(fmt.Errorf("shutdown domain: %w", err))
		}
		return nil
	})
	if requested {
		d.log.Info("graceful shutdown requested", "grace_started_at", st.GetShutdownRequestedAt())
		d.publish(st, "ShutdownRequested")
	}
	return st, err
}

// Kill powers the domain off.
func (d *Driver) Kill(ctx context.Context, _ *launcherpb.Empty) (*launcherpb.DomainStatus, error) {
	return d.withOwnedDomain(ctx, d.destroy)
}

// destroy tries a graceful destroy (SIGTERM only, so QEMU flushes its disk
// caches) and falls back to a plain one (SIGKILL after a timeout).
func (d *Driver) destroy(dom Domain) error {
	s, _, err := dom.GetState()
	if err != nil {
		return grpcError(fmt.Errorf("get domain state: %w", err))
	}
	if s == StateShutoff {
		return nil
	}
	if err := dom.Destroy(true); err == nil {
		d.log.Info("destroyed domain", "graceful", true)
		return nil
	} else {
		d.log.Warn("graceful destroy failed; destroying", "error", err)
	}
	if err := dom.Destroy(false); err != nil {
		// It may have stopped by itself meanwhile.
		if s, _, serr := dom.GetState(); serr == nil && s == StateShutoff {
			return nil
		}
		return grpcError(fmt.Errorf("destroy domain: %w", err))
	}
	d.log.Info("destroyed domain", "graceful", false)
	return nil
}

// Delete undefines the domain; it must be shut off first so that a Delete
// never doubles as an unintended hard power-off.
func (d *Driver) Delete(ctx context.Context, _ *launcherpb.Empty) (*launcherpb.DomainStatus, error) {
	return d.onOwnedDomain(ctx, func(dom Domain) (*launcherpb.DomainStatus, error) {
		last, err := d.statusOf(dom)
		if err != nil {
			return nil, err
		}
		if last.GetState() != StateShutoff.String() {
			return nil, status.Errorf(codes.FailedPrecondition, "domain %s is %s; Kill it before Delete", d.cfg.DomainName, last.GetState())
		}
		if err := dom.Undefine(); err != nil {
			return nil, grpcError(fmt.Errorf("undefine domain: %w", err))
		}
		d.log.Info("undefined domain", "uuid", last.GetUuid())
		gone := d.absent()
		gone.Uuid, gone.VmiUid = last.GetUuid(), last.GetVmiUid()
		return gone, nil
	})
}

// Pause suspends the domain and records that the user wanted it, so that
// Sync — from this launcher or one that adopts the domain later — leaves
// it paused. The mark is written before suspending: if the launcher dies
// in between, the worst case is a running domain marked paused, which the
// next Pause or Unpause corrects, never a user-paused guest resumed.
func (d *Driver) Pause(ctx context.Context, _ *launcherpb.Empty) (*launcherpb.DomainStatus, error) {
	return d.withOwnedDomain(ctx, func(dom Domain) error {
		// When nothing runs there is nothing to pause; Sync honours
		// spec.paused at the next start.
		s, md, live, err := liveMetadata(dom)
		if err != nil || !live {
			return err
		}
		if !md.PausedByUser {
			md.PausedByUser = true
			if err := writeMetadata(dom, md); err != nil {
				return grpcError(err)
			}
		}
		if s == StatePaused {
			return nil
		}
		if err := dom.Suspend(); err != nil {
			md.PausedByUser = false
			if werr := writeMetadata(dom, md); werr != nil {
				d.log.Warn("could not clear the pause mark after a failed suspend", "error", werr)
			}
			return grpcError(fmt.Errorf("suspend domain: %w", err))
		}
		d.log.Info("paused domain")
		return nil
	})
}

// Unpause resumes the domain, then clears the user-pause mark (also on a
// stopped domain, so its next start is not paused).
func (d *Driver) Unpause(ctx context.Context, _ *launcherpb.Empty) (*launcherpb.DomainStatus, error) {
	return d.withOwnedDomain(ctx, func(dom Domain) error {
		s, _, err := dom.GetState()
		if err != nil {
			return grpcError(fmt.Errorf("get domain state: %w", err))
		}
		if s == StatePaused {
			if err := dom.Resume(); err != nil {
				return grpcError(fmt.Errorf("resume domain: %w", err))
			}
			d.log.Info("unpaused domain")
		}
		md, _, err := readMetadata(dom)
		if err != nil {
			return grpcError(err)
		}
		if md.PausedByUser {
			md.PausedByUser = false
			return grpcError(writeMetadata(dom, md))
		}
		return nil
	})
}
