package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller"
	"github.com/virtplane/terraform-provider-virtplane/internal/informer"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/disks"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/state"
)

// Reconcile handles one VMI key (namespace/name): it looks at the VMI as
// cached, the local record and the domain as the launcher reports it, and
// acts as decide says.
func (a *Agent) Reconcile(ctx context.Context, key string) (controller.Result, error) {
	vmi, ok := a.vmis.GetByKey(key)
	if !ok {
		vmi = nil
	}
	if vmi != nil && !a.admissible(vmi) {
		// As if it were not here: it never runs on this node, and a
		// record of this key (another VMI's) is finished as usual.
		vmi = nil
	}
	res, vmi, handled, err := a.migrationPass(ctx, key, vmi)
	if handled || err != nil {
		return res, err
	}
	rec, err := a.recordFor(key)
	if err != nil {
		return controller.Result{}, err
	}
	if vmi == nil && rec != nil {
		// Gone from both views: ask the API before a guest is stopped for
		// it. An instance that just migrated here moves from the target
		// view to the node view when the controller relabels it, and may
		// briefly be in neither.
		if here, err := a.stillHere(ctx, key, rec); err != nil || here {
			return controller.Result{RequeueAfter: a.opts.Timing.MigrationPoll}, err
		}
	}
	if vmi != nil && rec != nil && rec.UID != vmi.GetMetadata().GetUid() {
		// A new VMI took the name of one whose domain is still here
		// (domain names are per name): the old one is gone, so finish it
		// first.
		res, err := a.sync(ctx, key, nil, rec)
		if err != nil || res.RequeueAfter > 0 {
			return res, err
		}
		rec = nil
	}
	return a.sync(ctx, key, vmi, rec)
}

// admissible reports whether the node may act on vmi at all: its uid,
// its VM's uid, namespace and name become directory and domain names
// here, so a VMI whose identity the API would never have written (one put
// straight into etcd) is refused and logged, and no file is made for it.
func (a *Agent) admissible(vmi *apiv1.VirtualMachineInstance) bool {
	errs := validation.ValidateInstanceIdentity(vmi)
	if len(errs) == 0 {
		return true
	}
	a.log.Error("refusing a VMI whose identity is invalid; it was not written through the API",
		"vmi", informer.Key(vmi), "err", errs.ToAggregate())
	return false
}

// recordFor returns the state record of key, or nil.
func (a *Agent) recordFor(key string) (*state.VMI, error) {
	rec, err := a.db.GetVMIByKey(key)
	if errors.Is(err, state.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the state record of %s: %w", key, err)
	}
	return rec, nil
}

func (a *Agent) sync(ctx context.Context, key string, vmi *apiv1.VirtualMachineInstance, rec *state.VMI) (controller.Result, error) {
	if vmi != nil && rec != nil {
		if err := a.refreshRecord(rec, vmi); err != nil {
			return controller.Result{}, err
		}
	}
	var (
		e   *entry
		dom *launcherpb.DomainStatus
	)
	if rec != nil {
		var err error
		if e, err = a.ensureLauncher(ctx, vmi, rec); err == nil {
			dom, err = a.getDomain(ctx, e)
		}
		if err != nil {
			if unavailable(err) {
				return a.launcherUnreachable(ctx, key, vmi, e, err)
			}
			return controller.Result{}, err
		}
		a.markReachable(key)
	}

	phase := vmi.GetStatus().GetPhase()
	o := observation{
		VMIExists:          vmi != nil,
		VMIDeleting:        vmi.GetMetadata().GetDeletionTimestamp() != nil,
		VMIFinal:           apiv1.IsFinal(phase),
		VMIStarting:        phase == apiv1.PhaseScheduled && a.now().Sub(scheduledAt(vmi)) < a.opts.Timing.SlowStartWindow,
		DomainExists:       dom.GetExists(),
		DomainAlive:        domainAlive(dom),
		DomainNeverStarted: shutoffNeverStarted(dom),
	}
	act := decide(o)
	a.log.Debug("handling vmi", "vmi", key, "action", act, "phase", phase,
		"domain_state", dom.GetState(), "domain_reason", dom.GetReason())
	switch act {
	case actShutdown:
		return a.shutdown(ctx, vmi, rec, e, dom)
	case actDelete:
		return a.deleteAndCleanup(ctx, vmi, rec, e, dom)
	case actUpdate:
		return a.update(ctx, vmi, rec, e, dom)
	}
	return controller.Result{}, nil
}

// refreshRecord keeps what the record mirrors of the VMI current: the
// grace period may be shortened (a force stop) while the VMI exists, and
// must be known once it is gone.
func (a *Agent) refreshRecord(rec *state.VMI, vmi *apiv1.VirtualMachineInstance) error {
	if rec.UID != vmi.GetMetadata().GetUid() {
		return nil
	}
	grace := vmi.GetSpec().GracePeriodSeconds()
	if rec.GracePeriodSeconds == grace {
		return nil
	}
	next := *rec
	next.GracePeriodSeconds = grace
	if err := a.db.PutVMI(&next); err != nil {
		return fmt.Errorf("saving grace period of %s: %w", rec.Key(), err)
	}
	*rec = next
	return nil
}

// scheduledAt is when the VMI was placed here.
func scheduledAt(vmi *apiv1.VirtualMachineInstance) time.Time {
	if t := apiv1.PhaseSince(vmi.GetStatus().GetPhaseTransitionTimestamps(), apiv1.PhaseScheduled); !t.IsZero() {
		return t
	}
	return vmi.GetMetadata().GetCreationTimestamp().AsTime()
}

func (a *Agent) getDomain(ctx context.Context, e *entry) (*launcherpb.DomainStatus, error) {
	cctx, cancel := context.WithTimeout(ctx, a.opts.Timing.CallTimeout)
	defer cancel()
	d, err := e.client.GetDomain(cctx)
	if err != nil {
		if unavailable(err) {
			a.markDead(e, err)
		}
		return nil, fmt.Errorf("getting domain of %s: %w", e.key, err)
	}
	return d, nil
}

// launcherUnreachable handles a launcher that cannot be reached or
// started. The VMI keeps its phase for the launcher grace, because a
// launcher that is starting, or an agent that just restarted, is no
// reason to kill a guest (KubeVirt pain point #9); after it, the VMI
// fails.
func (a *Agent) launcherUnreachable(ctx context.Context, key string, vmi *apiv1.VirtualMachineInstance, e *entry, cause error) (controller.Result, error) {
	if e != nil {
		a.markDead(e, cause)
	}
	since := a.markUnreachable(key)
	down := a.now().Sub(since)
	retry := controller.Result{RequeueAfter: a.opts.Timing.LivenessInterval}
	if vmi == nil || apiv1.IsFinal(vmi.GetStatus().GetPhase()) || down < a.opts.Timing.LauncherGrace {
		a.log.Info("launcher unreachable; retrying", "vmi", key, "for", down.Round(time.Second), "err", cause)
		return retry, nil
	}
	msg := fmt.Sprintf("the launcher has not been reachable for %s: %s", down.Round(time.Second), errorMessage(cause))
	a.log.Warn("failing vmi: launcher unresponsive", "vmi", key, "err", cause)
	if _, err := a.writeStatus(ctx, vmi, finalStatus(apiv1.PhaseFailed, ReasonLauncherUnresponsive, msg)); err != nil && !errors.Is(err, errVMIGone) {
		return controller.Result{}, err
	}
	return retry, nil
}

// update converges the domain on a VMI that should run.
func (a *Agent) update(ctx context.Context, vmi *apiv1.VirtualMachineInstance, rec *state.VMI, e *entry, dom *launcherpb.DomainStatus) (controller.Result, error) {
	key := informer.Key(vmi)
	phase := vmi.GetStatus().GetPhase()
	if phase != apiv1.PhaseScheduled && phase != apiv1.PhaseRunning {
		return controller.Result{}, nil // not handed to the node yet
	}
	if rec == nil {
		var err error
		if rec, err = a.newRecord(vmi); err != nil {
			return controller.Result{}, fmt.Errorf("recording %s: %w", key, err)
		}
		// Recorded before anything is started, so a crash from here on
		// leaves a trace the next agent follows.
		if err := a.db.PutVMI(rec); err != nil {
			return controller.Result{}, fmt.Errorf("saving state record of %s: %w", key, err)
		}
	}
	if rec.NodeFailurePolicy == apiv1.NodeFailurePolicyRestartElsewhere && a.lease.remaining(a.now()) <= 0 {
		// Without a valid lease the guest could not be fenced, and the
		// control plane may be starting it elsewhere.
		a.log.Info("not starting a RestartElsewhere guest without a valid node lease", "vmi", key)
		return controller.Result{RequeueAfter: time.Second}, nil
	}

	if e == nil || !e.synced {
		opts, err := a.syncOptions(ctx, vmi, rec)
		if w := (*pullWait)(nil); errors.As(err, &w) {
			return a.pullWaiting(ctx, vmi, w)
		}
		if err != nil {
			return a.prepareFailed(ctx, vmi, err)
		}
		if e == nil {
			if e, err = a.ensureLauncher(ctx, vmi, rec); err != nil {
				if unavailable(err) {
					return a.launcherUnreachable(ctx, key, vmi, e, err)
				}
				return controller.Result{}, err
			}
		}
		sctx, cancel := context.WithTimeout(ctx, a.opts.Timing.SyncTimeout)
		dom, err = e.client.Sync(sctx, vmi, opts)
		cancel()
		if err != nil {
			if unavailable(err) {
				return a.launcherUnreachable(ctx, key, vmi, e, err)
			}
			return a.syncFailed(ctx, vmi, err)
		}
		e.synced = true
		a.markReachable(key)
		if rec.IncomingMigration != "" {
			// A migrated-in domain adopted: the instance is this node's.
			next := *rec
			next.IncomingMigration, next.IncomingPrepared = "", ""
			if err := a.db.PutVMI(&next); err != nil {
				return controller.Result{}, fmt.Errorf("saving state record of %s: %w", key, err)
			}
			*rec = next
		}
		// Once per launcher: the first Sync defines and starts the domain,
		// or adopts it (after an agent restart or a launcher crash).
		a.log.Info("domain synced", "vmi", key, "launcher_pid", e.handle.Pid,
			"state", dom.GetState(), "reason", dom.GetReason(), "qemu_pid", dom.GetQemuPid())
		if rec.NodeFailurePolicy == apiv1.NodeFailurePolicyRestartElsewhere {
			// Armed now, not at the next heartbeat: a launcher renewed
			// before its first Sync (in adopt) may have refused because
			// the domain did not record its policy yet.
			if err := a.renewLease(ctx, e); err != nil {
				a.log.Warn("arming launcher lease failed", "vmi", key, "err", err)
			}
		}
	}
	// Nomad's rule: the handle is on disk before the VMI is reported
	// Running, or a restart could not find this launcher again.
	if err := a.persistHandle(rec, e); err != nil {
		return controller.Result{}, err
	}

	if !dom.GetExists() {
		if phase == apiv1.PhaseRunning {
			return a.finish(ctx, vmi, apiv1.PhaseFailed, ReasonDomainNotFound, "the domain of the running VMI disappeared")
		}
		e.synced = false // define it again
		return controller.Result{RequeueAfter: time.Second}, nil
	}
	if !domainAlive(dom) {
		// Stopped meanwhile: the next pass records how it ended.
		return controller.Result{RequeueAfter: time.Second}, nil
	}
	dom, err := a.reflectPause(ctx, vmi, e, dom)
	if err != nil {
		if unavailable(err) {
			return a.launcherUnreachable(ctx, key, vmi, e, err)
		}
		return controller.Result{}, err
	}
	running := runningStatus(dom, a.host.KVMUsable)
	migratable := apiv1.LiveMigratable(vmi.GetSpec())
	if _, err := a.writeStatus(ctx, vmi, func(st *apiv1.VirtualMachineInstanceStatus, now time.Time) {
		running(st, now)
		st.Conditions = apiv1.SetCondition(st.Conditions, migratable, now)
		st.Interfaces = interfaceStatuses(vmi.GetSpec(), dom, st.Interfaces)
	}); err != nil && !errors.Is(err, errVMIGone) {
		return controller.Result{}, err
	}
	return controller.Result{}, nil
}

// newRecord is the state record of vmi, which admissible accepted.
func (a *Agent) newRecord(vmi *apiv1.VirtualMachineInstance) (*state.VMI, error) {
	md := vmi.GetMetadata()
	dir, err := a.layout.VMIDir(md.GetUid())
	if err != nil {
		return nil, err
	}
	policy := md.GetAnnotations()[apiv1.AnnotationNodeFailurePolicy]
	if policy == "" {
		policy = apiv1.NodeFailurePolicyWait
	}
	return &state.VMI{
		UID: md.GetUid(), Namespace: md.GetNamespace(), Name: md.GetName(),
		DomainName:         apiv1.DomainName(md.GetNamespace(), md.GetName()),
		GracePeriodSeconds: vmi.GetSpec().GracePeriodSeconds(),
		NodeFailurePolicy:  policy,
		Dir:                dir,
		CreatedAt:          a.now().Round(0),
		VMUID:              apiv1.ControllingVMUID(vmi),
	}, nil
}

// reflectPause applies the VMI's desired pause state to the domain.
func (a *Agent) reflectPause(ctx context.Context, vmi *apiv1.VirtualMachineInstance, e *entry, dom *launcherpb.DomainStatus) (*launcherpb.DomainStatus, error) {
	want := vmi.GetSpec().GetPaused()
	cctx, cancel := context.WithTimeout(ctx, a.opts.Timing.CallTimeout)
	defer cancel()
	switch {
	case want && dom.GetState() == stateRunning:
		d, err := e.client.Pause(cctx)
		if err != nil {
			return nil, fmt.Errorf("pausing %s: %w", e.key, err)
		}
		return d, nil
	case !want && dom.GetState() == statePaused && dom.GetPausedByUser():
		d, err := e.client.Unpause(cctx)
		if err != nil {
			return nil, fmt.Errorf("unpausing %s: %w", e.key, err)
		}
		return d, nil
	}
	return dom, nil
}

// syncFailed reports an error libvirt answered Sync with. A VMI that never
// ran fails with libvirt's message (a missing kernel must not leave it
// Scheduled forever); a running one keeps running and only shows the
// condition, since the guest is fine.
func (a *Agent) syncFailed(ctx context.Context, vmi *apiv1.VirtualMachineInstance, err error) (controller.Result, error) {
	msg := errorMessage(err)
	fail := vmi.GetStatus().GetPhase() != apiv1.PhaseRunning
	a.log.Warn("syncing the domain failed", "vmi", informer.Key(vmi), "err", err, "failing_vmi", fail)
	if _, werr := a.writeStatus(ctx, vmi, syncFailedStatus(ReasonSyncFailed, msg, fail)); werr != nil && !errors.Is(werr, errVMIGone) {
		return controller.Result{}, werr
	}
	if fail {
		return controller.Result{}, nil // final now: the next pass removes the domain
	}
	return controller.Result{}, fmt.Errorf("syncing %s: %w", informer.Key(vmi), err)
}

// prepareFailed reports a VMI whose files cannot be prepared.
func (a *Agent) prepareFailed(ctx context.Context, vmi *apiv1.VirtualMachineInstance, err error) (controller.Result, error) {
	var pe *disks.Error
	if !errors.As(err, &pe) {
		return controller.Result{}, fmt.Errorf("preparing %s: %w", informer.Key(vmi), err)
	}
	// A volume that could not be provisioned yet keeps the VMI waiting
	// (the image may still be imported); anything else fails it unless
	// it already runs.
	fail := vmi.GetStatus().GetPhase() != apiv1.PhaseRunning && !pe.Retry
	a.log.Warn("preparing the VMI failed", "vmi", informer.Key(vmi), "err", err, "failing_vmi", fail)
	if _, werr := a.writeStatus(ctx, vmi, syncFailedStatus(pe.Reason, err.Error(), fail)); werr != nil && !errors.Is(werr, errVMIGone) {
		return controller.Result{}, werr
	}
	if fail {
		return controller.Result{}, nil
	}
	return controller.Result{}, fmt.Errorf("preparing %s: %w", informer.Key(vmi), err)
}

// finish writes a final phase.
func (a *Agent) finish(ctx context.Context, vmi *apiv1.VirtualMachineInstance, phase, reason, msg string) (controller.Result, error) {
	if _, err := a.writeStatus(ctx, vmi, finalStatus(phase, reason, msg)); err != nil && !errors.Is(err, errVMIGone) {
		return controller.Result{}, err
	}
	return controller.Result{}, nil
}

// stillHere reads the instance of rec from the API: whether it exists,
// is that uid, runs on this node and is not being deleted (the caches
// have not caught up).
func (a *Agent) stillHere(ctx context.Context, key string, rec *state.VMI) (bool, error) {
	cctx, cancel := context.WithTimeout(ctx, a.opts.Timing.CallTimeout)
	defer cancel()
	v, err := a.status.Get(cctx, &apiv1.GetVirtualMachineInstanceRequest{Key: &apiv1.ObjectKey{Namespace: rec.Namespace, Name: rec.Name}})
	switch status.Code(err) {
	case codes.OK:
	case codes.NotFound, codes.PermissionDenied:
		// Gone, or not this node's to read: it does not run here.
		return false, nil
	default:
		return false, fmt.Errorf("reading %s before removing it: %w", key, err)
	}
	return v.GetMetadata().GetUid() == rec.UID && v.GetStatus().GetNodeName() == a.opts.NodeName &&
		v.GetMetadata().GetDeletionTimestamp() == nil && !apiv1.IsFinal(v.GetStatus().GetPhase()), nil
}
