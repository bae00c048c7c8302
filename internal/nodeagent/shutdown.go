package nodeagent

import (
	"context"
	"fmt"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller"
	"github.com/virtplane/terraform-provider-virtplane/internal/informer"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/launchers"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/state"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/vmistatus"
)

// shutdown stops a running guest whose VMI is gone or being deleted
// (KubeVirt helperVmShutdown): ACPI, re-sent at least every ACPIInterval
// because a booting guest may miss it, until the grace period ends; then
// a kill. The grace period runs from the first request, recorded in the
// state database so that an agent restart does not restart it, and is
// read from the record so that it outlives the VMI object.
func (h *handler) shutdown(ctx context.Context, vmi *apiv1.VirtualMachineInstance, rec *state.VMI, e *launchers.Conn, dom *launcherpb.DomainStatus) (controller.Result, error) {
	now := h.now()
	grace := time.Duration(rec.GracePeriodSeconds) * time.Second
	if grace <= 0 {
		return h.kill(ctx, vmi, e, "no grace period")
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
		if err := h.db.PutVMI(&next); err != nil {
			return controller.Result{}, fmt.Errorf("saving shutdown start of %s: %w", rec.Key(), err)
		}
		*rec = next
	}
	deadline := rec.ShutdownStartedAt.Add(grace)
	if !now.Before(deadline) {
		return h.kill(ctx, vmi, e, "grace period expired")
	}
	if err := h.callLauncher(ctx, e.Client.Shutdown); err != nil {
		if launchers.Unavailable(err) {
			return h.Unreachable(ctx, e.Key, vmi, e, err)
		}
		h.log.Warn("ACPI shutdown failed; retrying", "vmi", e.Key, "err", err)
	} else {
		h.log.Info("shutting down guest", "vmi", e.Key, "grace_left", deadline.Sub(now).Round(time.Second))
	}
	return controller.Result{RequeueAfter: min(h.timing.ACPIInterval, deadline.Sub(now))}, nil
}

// callLauncher makes one call to a launcher (Shutdown, Kill) within the
// call timeout.
func (h *handler) callLauncher(ctx context.Context, call func(context.Context) (*launcherpb.DomainStatus, error)) error {
	cctx, cancel := context.WithTimeout(ctx, h.timing.CallTimeout)
	defer cancel()
	_, err := call(cctx)
	return err
}

func (h *handler) kill(ctx context.Context, vmi *apiv1.VirtualMachineInstance, e *launchers.Conn, why string) (controller.Result, error) {
	if err := h.callLauncher(ctx, e.Client.Kill); err != nil {
		if launchers.Unavailable(err) {
			return h.Unreachable(ctx, e.Key, vmi, e, err)
		}
		return controller.Result{}, fmt.Errorf("killing domain of %s: %w", e.Key, err)
	}
	h.log.Info("killed guest", "vmi", e.Key, "why", why)
	// The next pass sees the domain off and deletes it.
	return controller.Result{RequeueAfter: 10 * time.Millisecond}, nil
}

// deleteAndCleanup ends a VMI on this node: it records the VMI's final
// phase if it has none (before the domain goes, so a crash in between
// cannot lose how the guest ended), removes the domain, stops the
// launcher and drops the VMI's files and record.
func (h *handler) deleteAndCleanup(ctx context.Context, vmi *apiv1.VirtualMachineInstance, rec *state.VMI, e *launchers.Conn, dom *launcherpb.DomainStatus) (controller.Result, error) {
	if vmi != nil && !apiv1.IsFinal(vmi.GetStatus().GetPhase()) {
		grace := vmi.GetSpec().GracePeriodSeconds()
		if rec != nil {
			grace = rec.GracePeriodSeconds
		}
		phase, reason, msg := endPhase(vmi, dom, grace)
		if err := h.status.Report(ctx, vmi, vmistatus.Final(phase, reason, msg)); err != nil {
			return controller.Result{}, err
		}
		h.log.Info("vmi ended", "vmi", informer.Key(vmi), "phase", phase, "reason", reason)
	}
	if rec == nil {
		if vmi != nil {
			// Files made before a record could be saved, if any.
			if err := h.layout.RemoveVMIDir(vmi.GetMetadata().GetUid()); err != nil {
				h.log.Warn("removing the files of an instance without a record", "vmi", informer.Key(vmi), "err", err)
			}
		}
		return controller.Result{}, nil
	}
	key := rec.Key()
	if e != nil {
		cctx, cancel := context.WithTimeout(ctx, h.timing.CallTimeout)
		defer cancel()
		if dom.GetExists() {
			if dom.GetState() != stateShutoff {
				if _, err := e.Client.Kill(cctx); err != nil {
					return h.cleanupFailed(ctx, vmi, e, fmt.Errorf("killing domain of %s: %w", key, err))
				}
			}
			if _, err := e.Client.Delete(cctx); err != nil {
				return h.cleanupFailed(ctx, vmi, e, fmt.Errorf("deleting domain of %s: %w", key, err))
			}
		}
		h.launchers.Remove(e)
		e.StopWatching()
		if err := e.Client.Stop(cctx); err != nil {
			h.log.Warn("stopping launcher failed", "vmi", key, "err", err)
		}
	}
	// The console log outlives the VMI's files, for `console --log`.
	if err := h.console.Keep(rec); err != nil {
		h.log.Warn("keeping the console log failed", "vmi", key, "err", err)
	}
	if err := h.layout.CheckVMIDir(rec.UID, rec.Dir); err != nil {
		// A record an older agent wrote for a uid that was a path: its
		// domain is gone now, its "directory" is left alone.
		h.log.Error("not removing the files of a record whose directory is not its own", "vmi", key, "dir", rec.Dir, "err", err)
	} else if err := h.layout.RemoveVMIDir(rec.UID); err != nil {
		return controller.Result{}, fmt.Errorf("removing files of %s: %w", key, err)
	}
	if rec.MigratedAway != "" && rec.VMUID != "" {
		// A live migration copied the VM's volumes to where it runs now.
		if err := h.layout.RemoveVMDir(rec.VMUID); err != nil {
			return controller.Result{}, fmt.Errorf("removing the volumes %s took along: %w", key, err)
		}
	}
	if err := h.db.DeleteVMI(rec.UID); err != nil {
		return controller.Result{}, fmt.Errorf("dropping state record of %s: %w", key, err)
	}
	h.markReachable(key)
	if rec.VMUID != "" {
		h.vmEnded() // the VM may be going too
	}
	h.log.Info("domain deleted and cleaned up", "vmi", key, "domain", rec.DomainName)
	return controller.Result{}, nil
}

// RemoveLocal removes the record's domain (which must not run: a
// migrated-away domain is shut off), launcher and files, reporting
// nothing on the instance (it is not this node's to report on).
func (h *handler) RemoveLocal(ctx context.Context, rec *state.VMI) (controller.Result, error) {
	e, err := h.launchers.Ensure(ctx, nil, rec)
	if err != nil {
		if launchers.Unavailable(err) {
			return controller.Result{RequeueAfter: h.timing.LivenessInterval}, nil
		}
		return controller.Result{}, err
	}
	dom, err := h.launchers.GetDomain(ctx, e)
	if err != nil {
		return controller.Result{}, err
	}
	return h.deleteAndCleanup(ctx, nil, rec, e, dom)
}

func (h *handler) cleanupFailed(ctx context.Context, vmi *apiv1.VirtualMachineInstance, e *launchers.Conn, err error) (controller.Result, error) {
	if launchers.Unavailable(err) {
		return h.Unreachable(ctx, e.Key, vmi, e, err)
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
