package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller"
	"github.com/virtplane/terraform-provider-virtplane/internal/informer"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/state"
)

// shutdown stops a running guest whose VMI is gone or being deleted
// (KubeVirt helperVmShutdown): ACPI, re-sent at least every ACPIInterval
// because a booting guest may miss it, until the grace period ends; then
// a kill. The grace period runs from the first request, recorded in the
// state database so that an agent restart does not restart it, and is
// read from the record so that it outlives the VMI object.
func (a *Agent) shutdown(ctx context.Context, vmi *apiv1.VirtualMachineInstance, rec *state.VMI, e *entry, dom *launcherpb.DomainStatus) (controller.Result, error) {
	now := a.now()
	grace := time.Duration(rec.GracePeriodSeconds) * time.Second
	if grace <= 0 {
		return a.kill(ctx, vmi, e, "no grace period")
	}
	if rec.ShutdownStartedAt.IsZero() {
		start := now
		// The launcher's stamp counts if a shutdown began without us
		// (e.g. before the record was written by this agent version).
		if t := dom.GetShutdownRequestedAt(); t > 0 && time.Unix(t, 0).Before(start) {
			start = time.Unix(t, 0)
		}
		next := *rec
		next.ShutdownStartedAt = start.Round(0)
		if err := a.db.PutVMI(&next); err != nil {
			return controller.Result{}, fmt.Errorf("saving shutdown start of %s: %w", rec.Key(), err)
		}
		*rec = next
	}
	deadline := rec.ShutdownStartedAt.Add(grace)
	if !now.Before(deadline) {
		return a.kill(ctx, vmi, e, "grace period expired")
	}
	if err := a.callLauncher(ctx, e.client.Shutdown); err != nil {
		if unavailable(err) {
			return a.launcherUnreachable(ctx, e.key, vmi, e, err)
		}
		a.log.Warn("ACPI shutdown failed; retrying", "vmi", e.key, "err", err)
	} else {
		a.log.Info("shutting down guest", "vmi", e.key, "grace_left", deadline.Sub(now).Round(time.Second))
	}
	return controller.Result{RequeueAfter: min(a.opts.Timing.ACPIInterval, deadline.Sub(now))}, nil
}

// callLauncher makes one call to a launcher (Shutdown, Kill) within the
// call timeout.
func (a *Agent) callLauncher(ctx context.Context, call func(context.Context) (*launcherpb.DomainStatus, error)) error {
	cctx, cancel := context.WithTimeout(ctx, a.opts.Timing.CallTimeout)
	defer cancel()
	_, err := call(cctx)
	return err
}

func (a *Agent) kill(ctx context.Context, vmi *apiv1.VirtualMachineInstance, e *entry, why string) (controller.Result, error) {
	if err := a.callLauncher(ctx, e.client.Kill); err != nil {
		if unavailable(err) {
			return a.launcherUnreachable(ctx, e.key, vmi, e, err)
		}
		return controller.Result{}, fmt.Errorf("killing domain of %s: %w", e.key, err)
	}
	a.log.Info("killed guest", "vmi", e.key, "why", why)
	// The next pass sees the domain off and deletes it.
	return controller.Result{RequeueAfter: 10 * time.Millisecond}, nil
}

// deleteAndCleanup ends a VMI on this node: it records the VMI's final
// phase if it has none (before the domain goes, so a crash in between
// cannot lose how the guest ended), removes the domain, stops the
// launcher and drops the VMI's files and record.
func (a *Agent) deleteAndCleanup(ctx context.Context, vmi *apiv1.VirtualMachineInstance, rec *state.VMI, e *entry, dom *launcherpb.DomainStatus) (controller.Result, error) {
	if vmi != nil && !apiv1.IsFinal(vmi.GetStatus().GetPhase()) {
		grace := vmi.GetSpec().GracePeriodSeconds()
		if rec != nil {
			grace = rec.GracePeriodSeconds
		}
		phase, reason, msg := endPhase(vmi, dom, grace)
		if _, err := a.writeStatus(ctx, vmi, finalStatus(phase, reason, msg)); err != nil && !errors.Is(err, errVMIGone) {
			return controller.Result{}, err
		}
		a.log.Info("vmi ended", "vmi", informer.Key(vmi), "phase", phase, "reason", reason)
	}
	if rec == nil {
		if vmi != nil {
			// Files made before a record could be saved, if any.
			if err := a.layout.RemoveVMIDir(vmi.GetMetadata().GetUid()); err != nil {
				a.log.Warn("removing the files of an instance without a record", "vmi", informer.Key(vmi), "err", err)
			}
		}
		return controller.Result{}, nil
	}
	key := rec.Key()
	if e != nil {
		cctx, cancel := context.WithTimeout(ctx, a.opts.Timing.CallTimeout)
		defer cancel()
		if dom.GetExists() {
			if dom.GetState() != stateShutoff {
				if _, err := e.client.Kill(cctx); err != nil {
					return a.cleanupFailed(ctx, vmi, e, fmt.Errorf("killing domain of %s: %w", key, err))
				}
			}
			if _, err := e.client.Delete(cctx); err != nil {
				return a.cleanupFailed(ctx, vmi, e, fmt.Errorf("deleting domain of %s: %w", key, err))
			}
		}
		a.launchers.remove(e)
		e.stopWatching()
		if err := e.client.Stop(cctx); err != nil {
			a.log.Warn("stopping launcher failed", "vmi", key, "err", err)
		}
	}
	// The console log outlives the VMI's files, for `console --log`.
	if err := a.console.Keep(rec); err != nil {
		a.log.Warn("keeping the console log failed", "vmi", key, "err", err)
	}
	if err := a.layout.CheckVMIDir(rec.UID, rec.Dir); err != nil {
		// A record an older agent wrote for a uid that was a path: its
		// domain is gone now, its "directory" is left alone.
		a.log.Error("not removing the files of a record whose directory is not its own", "vmi", key, "dir", rec.Dir, "err", err)
	} else if err := a.layout.RemoveVMIDir(rec.UID); err != nil {
		return controller.Result{}, fmt.Errorf("removing files of %s: %w", key, err)
	}
	if rec.MigratedAway != "" && rec.VMUID != "" {
		// A live migration copied the VM's volumes to where it runs now.
		if err := a.layout.RemoveVMDir(rec.VMUID); err != nil {
			return controller.Result{}, fmt.Errorf("removing the volumes %s took along: %w", key, err)
		}
	}
	if err := a.db.DeleteVMI(rec.UID); err != nil {
		return controller.Result{}, fmt.Errorf("dropping state record of %s: %w", key, err)
	}
	a.markReachable(key)
	if rec.VMUID != "" {
		a.kickVMDirGC() // the VM may be going too
	}
	a.log.Info("domain deleted and cleaned up", "vmi", key, "domain", rec.DomainName)
	return controller.Result{}, nil
}

func (a *Agent) cleanupFailed(ctx context.Context, vmi *apiv1.VirtualMachineInstance, e *entry, err error) (controller.Result, error) {
	if unavailable(err) {
		return a.launcherUnreachable(ctx, e.key, vmi, e, err)
	}
	return controller.Result{}, err
}

// endPhase is the final phase of a VMI whose domain is off, or gone.
func endPhase(vmi *apiv1.VirtualMachineInstance, dom *launcherpb.DomainStatus, grace int64) (phase, reason, msg string) {
	if dom.GetExists() {
		phase, reason = domainPhase(dom, grace)
		msg = fmt.Sprintf("domain is %s (%s)", dom.GetState(), dom.GetReason())
		if !apiv1.IsFinal(phase) {
			// Deleting a VMI whose domain libvirt has no final word on
			// (Migrated, NoState): it did not end cleanly.
			phase, reason = apiv1.PhaseFailed, ReasonDomainStopped
		}
		return phase, reason, msg
	}
	if vmi.GetStatus().GetPhase() == apiv1.PhaseRunning {
		return apiv1.PhaseFailed, ReasonDomainNotFound, "the domain of the running VMI disappeared"
	}
	return apiv1.PhaseFailed, ReasonDeletedBeforeStart, "the VMI was deleted before its guest started"
}
