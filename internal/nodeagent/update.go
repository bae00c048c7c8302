package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller"
	"github.com/virtplane/terraform-provider-virtplane/internal/informer"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/disks"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/imagepull"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/launchers"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/state"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/vmistatus"
)

// ReasonImagePullFailed is the VMI's reason while an image it needs could
// not be pulled; the agent keeps trying, as CDI retries an import.
const ReasonImagePullFailed = "ImagePullFailed"

// update converges the domain on a VMI that should run, in four steps:
// record it, start its domain (once per launcher), check the domain, and
// report it running. A step that is done ends the pass with its result.
func (h *handler) update(ctx context.Context, vmi *apiv1.VirtualMachineInstance, rec *state.VMI, e *launchers.Conn, dom *launcherpb.DomainStatus) (controller.Result, error) {
	phase := vmi.GetStatus().GetPhase()
	if phase != apiv1.PhaseScheduled && phase != apiv1.PhaseRunning {
		return controller.Result{}, nil // not handed to the node yet
	}
	p := &updatePass{key: informer.Key(vmi), vmi: vmi, rec: rec, e: e, dom: dom}
	for _, step := range []func(context.Context, *updatePass) (controller.Result, bool, error){
		h.record, h.start, h.checkDomain, h.hotplug, h.reportRunning,
	} {
		if res, done, err := step(ctx, p); done || err != nil {
			return res, err
		}
	}
	return controller.Result{}, nil
}

// updatePass is what the steps of one update learn: the record, the
// launcher and the domain.
type updatePass struct {
	key string
	vmi *apiv1.VirtualMachineInstance
	rec *state.VMI
	e   *launchers.Conn
	dom *launcherpb.DomainStatus
	// opts are the options of this pass's Sync, when it made one.
	opts *launcherpb.SyncOptions
	// volumes are the hotpluggable volumes' statuses the hotplug step
	// found (volumesSet: it ran), written with the running status;
	// requeue brings the VMI back while they are not settled.
	volumes    []*apiv1.VolumeStatus
	volumesSet bool
	requeue    time.Duration
}

// record makes sure the VMI has a state record, written before anything
// is started so a crash from here on leaves a trace the next agent
// follows, and holds back a RestartElsewhere guest without a valid lease.
func (h *handler) record(ctx context.Context, p *updatePass) (controller.Result, bool, error) {
	if p.rec == nil {
		rec, err := h.NewRecord(p.vmi)
		if err != nil {
			return controller.Result{}, true, fmt.Errorf("recording %s: %w", p.key, err)
		}
		if res, done, err := h.claimAdopted(ctx, p.vmi, rec); done || err != nil {
			return res, true, err
		}
		if err := h.db.PutVMI(rec); err != nil {
			return controller.Result{}, true, fmt.Errorf("saving state record of %s: %w", p.key, err)
		}
		p.rec = rec
	}
	if p.rec.NodeFailurePolicy == apiv1.NodeFailurePolicyRestartElsewhere && h.lease.remaining(h.now()) <= 0 {
		// Without a valid lease the guest could not be fenced, and the
		// control plane may be starting it elsewhere.
		h.log.Info("not starting a RestartElsewhere guest without a valid node lease", "vmi", p.key)
		return controller.Result{RequeueAfter: time.Second}, true, nil
	}
	return controller.Result{}, false, nil
}

// start, unless the launcher has synced already, prepares the VMI's
// files, makes sure it has a launcher, and has the launcher Sync: once
// per launcher, the first Sync defines and starts the domain, or adopts
// it (after an agent restart, a launcher crash, or a migration in). Then
// the handle is saved: Nomad's rule, it is on disk before the VMI is
// reported Running, or a restart could not find this launcher again.
func (h *handler) start(ctx context.Context, p *updatePass) (controller.Result, bool, error) {
	resize := p.e != nil && p.e.Synced && p.e.SyncedSizes != volumeSizes(p.vmi)
	if resize {
		h.log.Info("persistent volumes changed (grown, plugged or unplugged); syncing the domain", "vmi", p.key,
			"from", p.e.SyncedSizes, "to", volumeSizes(p.vmi))
	}
	if p.e == nil || !p.e.Synced || resize {
		if res, done, err := h.syncDomain(ctx, p); done || err != nil {
			return res, true, err
		}
	}
	if err := h.launchers.Persist(p.rec, p.e); err != nil {
		return controller.Result{}, true, err
	}
	return controller.Result{}, false, nil
}

func (h *handler) syncDomain(ctx context.Context, p *updatePass) (controller.Result, bool, error) {
	vmi, rec := p.vmi, p.rec
	if !domainAlive(p.dom) {
		// No QEMU has the volumes open: those whose size was raised while
		// the guest was stopped grow before it starts. A running guest's
		// are grown by its launcher's Sync (size_bytes).
		if err := h.disks.GrowVolumes(ctx, vmi, rec); err != nil {
			res, err := h.prepareFailed(ctx, vmi, err)
			return res, true, err
		}
	}
	opts, err := h.syncOptions(ctx, vmi, rec)
	if w := (*imagepull.Wait)(nil); errors.As(err, &w) {
		res, err := h.pullWaiting(ctx, vmi, w)
		return res, true, err
	}
	if err != nil {
		res, err := h.prepareFailed(ctx, vmi, err)
		return res, true, err
	}
	if p.e == nil {
		if p.e, err = h.launchers.Ensure(ctx, vmi, rec); err != nil {
			if launchers.Unavailable(err) {
				res, err := h.Unreachable(ctx, p.key, vmi, p.e, err)
				return res, true, err
			}
			return controller.Result{}, true, err
		}
	}
	sctx, cancel := context.WithTimeout(ctx, h.timing.SyncTimeout)
	p.dom, err = p.e.Client.Sync(sctx, vmi, opts)
	cancel()
	h.tookOver(rec, p.dom, err)
	if err != nil {
		if launchers.Unavailable(err) {
			res, err := h.Unreachable(ctx, p.key, vmi, p.e, err)
			return res, true, err
		}
		res, err := h.syncFailed(ctx, vmi, err)
		return res, true, err
	}
	p.e.Synced, p.e.SyncedSizes = true, volumeSizes(vmi)
	p.opts = opts
	h.markReachable(p.key)
	if rec.IncomingMigration != "" {
		// A migrated-in domain adopted: the instance is this node's.
		next := *rec
		next.IncomingMigration, next.IncomingPrepared = "", ""
		if err := h.db.PutVMI(&next); err != nil {
			return controller.Result{}, true, fmt.Errorf("saving state record of %s: %w", p.key, err)
		}
		*rec = next
	}
	h.log.Info("domain synced", "vmi", p.key, "launcher_pid", p.e.Handle.Pid,
		"state", p.dom.GetState(), "reason", p.dom.GetReason(), "qemu_pid", p.dom.GetQemuPid())
	if rec.NodeFailurePolicy == apiv1.NodeFailurePolicyRestartElsewhere {
		// Armed now, not at the next heartbeat: a launcher renewed
		// before its first Sync (in adopt) may have refused because
		// the domain did not record its policy yet.
		if err := h.arm(ctx, p.e); err != nil {
			h.log.Warn("arming launcher lease failed", "vmi", p.key, "err", err)
		}
	}
	return controller.Result{}, false, nil
}

// checkDomain ends the pass when the domain is not there to report on:
// gone (a running VMI fails, a starting one is defined again) or stopped
// meanwhile (the next pass records how it ended).
func (h *handler) checkDomain(ctx context.Context, p *updatePass) (controller.Result, bool, error) {
	if !p.dom.GetExists() {
		if p.vmi.GetStatus().GetPhase() == apiv1.PhaseRunning {
			res, err := h.finish(ctx, p.vmi, apiv1.PhaseFailed, ReasonDomainNotFound, "the domain of the running VMI disappeared")
			return res, true, err
		}
		p.e.Synced = false // define it again
		return controller.Result{RequeueAfter: time.Second}, true, nil
	}
	if !domainAlive(p.dom) {
		return controller.Result{RequeueAfter: time.Second}, true, nil
	}
	return controller.Result{}, false, nil
}

// reportRunning applies the VMI's pause state to the domain and writes
// the VMI running: phase, Ready, conditions, interfaces.
func (h *handler) reportRunning(ctx context.Context, p *updatePass) (controller.Result, bool, error) {
	dom, err := h.reflectPause(ctx, p.vmi, p.e, p.dom)
	if err != nil {
		if launchers.Unavailable(err) {
			res, err := h.Unreachable(ctx, p.key, p.vmi, p.e, err)
			return res, true, err
		}
		return controller.Result{}, true, err
	}
	running := runningStatus(dom, h.host.KVMUsable)
	migratable := liveMigratable(p.vmi, p.rec)
	if err := h.status.Report(ctx, p.vmi, p.withVolumeStatus(func(st *apiv1.VirtualMachineInstanceStatus, now time.Time) {
		running(st, now)
		st.Conditions = apiv1.SetCondition(st.Conditions, migratable, now)
		st.Interfaces = interfaceStatuses(p.vmi.GetSpec(), dom, st.Interfaces)
	})); err != nil {
		return controller.Result{}, true, err
	}
	return controller.Result{RequeueAfter: p.requeue}, true, nil
}

// reflectPause applies the VMI's desired pause state to the domain.
func (h *handler) reflectPause(ctx context.Context, vmi *apiv1.VirtualMachineInstance, e *launchers.Conn, dom *launcherpb.DomainStatus) (*launcherpb.DomainStatus, error) {
	want := vmi.GetSpec().GetPaused()
	cctx, cancel := context.WithTimeout(ctx, h.timing.CallTimeout)
	defer cancel()
	switch {
	case want && dom.GetState() == stateRunning:
		d, err := e.Client.Pause(cctx)
		if err != nil {
			return nil, fmt.Errorf("pausing %s: %w", e.Key, err)
		}
		return d, nil
	case !want && dom.GetState() == statePaused && dom.GetPausedByUser():
		d, err := e.Client.Unpause(cctx)
		if err != nil {
			return nil, fmt.Errorf("unpausing %s: %w", e.Key, err)
		}
		return d, nil
	}
	return dom, nil
}

// syncOptions prepares the VMI's files and completes the options its
// domain is built from with what the agent knows.
func (h *handler) syncOptions(ctx context.Context, vmi *apiv1.VirtualMachineInstance, rec *state.VMI) (*launcherpb.SyncOptions, error) {
	if rec.AdoptedUUID != "" {
		return h.adoptedOptions(rec)
	}
	if h.pulls != nil {
		if err := h.pulls.PullFor(ctx, vmi); err != nil {
			return nil, err
		}
	}
	opts, err := h.disks.Prepare(ctx, vmi, rec)
	if err != nil {
		return nil, err
	}
	opts.Kvm = h.host.KVMUsable
	opts.DomainName = rec.DomainName
	// Recorded in the domain, so the launcher's lease watchdog never
	// fences a Wait domain, whoever arms it.
	opts.NodeFailurePolicy = rec.NodeFailurePolicy
	return opts, nil
}

// pullWaiting handles an *imagepull.Wait from syncOptions.
func (h *handler) pullWaiting(ctx context.Context, vmi *apiv1.VirtualMachineInstance, w *imagepull.Wait) (controller.Result, error) {
	if w.Cause != nil {
		h.log.Warn("image pull failed; the VMI waits", "vmi", informer.Key(vmi), "err", w.Cause, "retry_in", w.After)
		msg := w.Cause.Error() + " (retrying)"
		if errors.As(w.Cause, new(*imagepull.PermanentError)) {
			msg = w.Cause.Error() // it says when the node tries again
		}
		if err := h.status.Report(ctx, vmi, vmistatus.SyncFailed(ReasonImagePullFailed, msg, false)); err != nil {
			return controller.Result{}, err
		}
	}
	return controller.Result{RequeueAfter: w.After}, nil
}

// syncFailed reports an error libvirt answered Sync with. A VMI that never
// ran fails with libvirt's message (a missing kernel must not leave it
// Scheduled forever); a running one keeps running and only shows the
// condition, since the guest is fine.
func (h *handler) syncFailed(ctx context.Context, vmi *apiv1.VirtualMachineInstance, err error) (controller.Result, error) {
	msg := launchers.ErrorMessage(err)
	fail := vmi.GetStatus().GetPhase() != apiv1.PhaseRunning
	h.log.Warn("syncing the domain failed", "vmi", informer.Key(vmi), "err", err, "failing_vmi", fail)
	if werr := h.status.Report(ctx, vmi, vmistatus.SyncFailed(ReasonSyncFailed, msg, fail)); werr != nil {
		return controller.Result{}, werr
	}
	if fail {
		return controller.Result{}, nil // final now: the next pass removes the domain
	}
	return controller.Result{}, fmt.Errorf("syncing %s: %w", informer.Key(vmi), err)
}

// prepareFailed reports a VMI whose files cannot be prepared.
func (h *handler) prepareFailed(ctx context.Context, vmi *apiv1.VirtualMachineInstance, err error) (controller.Result, error) {
	var pe *disks.Error
	if !errors.As(err, &pe) {
		return controller.Result{}, fmt.Errorf("preparing %s: %w", informer.Key(vmi), err)
	}
	// A volume that could not be provisioned yet keeps the VMI waiting
	// (the image may still be imported); anything else fails it unless
	// it already runs.
	fail := vmi.GetStatus().GetPhase() != apiv1.PhaseRunning && !pe.Retry
	h.log.Warn("preparing the VMI failed", "vmi", informer.Key(vmi), "err", err, "failing_vmi", fail)
	if werr := h.status.Report(ctx, vmi, vmistatus.SyncFailed(pe.Reason, err.Error(), fail)); werr != nil {
		return controller.Result{}, werr
	}
	if fail {
		return controller.Result{}, nil
	}
	return controller.Result{}, fmt.Errorf("preparing %s: %w", informer.Key(vmi), err)
}

// finish writes a final phase.
func (h *handler) finish(ctx context.Context, vmi *apiv1.VirtualMachineInstance, phase, reason, msg string) (controller.Result, error) {
	return controller.Result{}, h.status.Report(ctx, vmi, vmistatus.Final(phase, reason, msg))
}

// volumeSizes is the fingerprint of the VMI's persistent volumes and
// their sizes that a Sync carries (launchers.Conn.SyncedSizes):
// "data=128Mi,db=1Gi"; a volume plugged or unplugged changes it too.
func volumeSizes(vmi *apiv1.VirtualMachineInstance) string {
	var b strings.Builder
	for _, v := range vmi.GetSpec().GetVolumes() {
		if pv := v.GetPersistent(); pv != nil {
			if b.Len() > 0 {
				b.WriteByte(',')
			}
			b.WriteString(v.GetName() + "=" + pv.GetSize())
		}
	}
	return b.String()
}
