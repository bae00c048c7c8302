package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/utils/clock"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller"
	"github.com/virtplane/terraform-provider-virtplane/internal/informer"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/launchers"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/migration"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/nodedir"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/state"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/vmistatus"
)

// handler is the node's VMI handler (KubeVirt's virt-handler VM
// controller): for one VMI key it looks at the VMI as cached, the state
// record and the domain as the launcher reports it, and acts as decide
// says — shutdown (shutdown.go), delete (shutdown.go) or update
// (update.go). The migration roles hand back to it (migration.Handler);
// it owns the launcher grace (how long a launcher may be unreachable).
type handler struct {
	node   string
	timing *Timing
	clock  clock.PassiveClock
	log    *slog.Logger

	db        state.StateDB
	launchers *launchers.Set
	status    *vmistatus.Writer
	// api reads an instance afresh before its guest is stopped.
	api  vmistatus.API
	vmis vmiCache
	// lease is the node's fencing lease: a RestartElsewhere guest starts
	// only while it is valid, and arm hands its launcher the time left.
	lease   *leaseTracker
	arm     func(ctx context.Context, e *launchers.Conn) error
	layout  nodedir.Layout
	disks   diskRoom
	pulls   imagePuller // nil: no Images are pulled
	console logKeeper
	// host is what registration reported; the agent fills it in before
	// the handler runs.
	host *HostFacts
	// vmEnded asks for an early look at VM directories: an instance's VM
	// may be going too.
	vmEnded func()
	// adopt takes adopted domains over (adoptions.go); nil adopts none.
	adopt adoptionClaims

	mu sync.Mutex
	// unreachable records, per VMI key, since when its launcher could not
	// be reached, for the launcher grace.
	unreachable map[string]time.Time
}

var (
	_ migration.Handler = (*handler)(nil)
	_ migration.Records = (*handler)(nil)
)

// vmiCache is the node's VMI informer as the handler reads it.
type vmiCache interface {
	GetByKey(key string) (*apiv1.VirtualMachineInstance, bool)
}

// imagePuller is what the handler needs of the Images (package
// imagepull): an error is an *imagepull.Wait while a pull runs.
type imagePuller interface {
	PullFor(ctx context.Context, vmi *apiv1.VirtualMachineInstance) error
}

// logKeeper keeps an ended instance's console log (package console).
type logKeeper interface {
	Keep(rec *state.VMI) error
}

func (h *handler) now() time.Time { return h.clock.Now() }

// cached is key's VMI as the informer has it, nil when there is none or
// it is not admissible.
func (h *handler) cached(key string) *apiv1.VirtualMachineInstance {
	vmi, ok := h.vmis.GetByKey(key)
	if !ok || !h.Admissible(vmi) {
		// As if it were not here: it never runs on this node, and a
		// record of this key (another VMI's) is finished as usual.
		return nil
	}
	return vmi
}

// handle is one handler pass over key, whose instance is vmi (nil when
// it is gone from the node's view).
func (h *handler) handle(ctx context.Context, key string, vmi *apiv1.VirtualMachineInstance) (controller.Result, error) {
	rec, err := h.Record(key)
	if err != nil {
		return controller.Result{}, err
	}
	if vmi == nil && rec != nil {
		// Gone from both views: ask the API before a guest is stopped for
		// it. An instance that just migrated here moves from the target
		// view to the node view when the controller relabels it, and may
		// briefly be in neither.
		if here, err := h.stillHere(ctx, key, rec); err != nil || here {
			return controller.Result{RequeueAfter: h.timing.MigrationPoll}, err
		}
	}
	if vmi != nil && rec != nil && rec.UID != vmi.GetMetadata().GetUid() {
		// A new VMI took the name of one whose domain is still here
		// (domain names are per name): the old one is gone, so finish it
		// first.
		res, err := h.sync(ctx, key, nil, rec)
		if err != nil || res.RequeueAfter > 0 {
			return res, err
		}
		rec = nil
	}
	return h.sync(ctx, key, vmi, rec)
}

// Admissible reports whether the node may act on vmi at all: its uid,
// its VM's uid, namespace and name become directory and domain names
// here, so a VMI whose identity the API would never have written (one put
// straight into etcd) is refused and logged, and no file is made for it.
func (h *handler) Admissible(vmi *apiv1.VirtualMachineInstance) bool {
	errs := validation.ValidateInstanceIdentity(vmi)
	if len(errs) == 0 {
		return true
	}
	h.log.Error("refusing a VMI whose identity is invalid; it was not written through the API",
		"vmi", informer.Key(vmi), "err", errs.ToAggregate())
	return false
}

// Record returns the state record of key, or nil.
func (h *handler) Record(key string) (*state.VMI, error) {
	rec, err := h.db.GetVMIByKey(key)
	if errors.Is(err, state.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the state record of %s: %w", key, err)
	}
	return rec, nil
}

// PutVMI saves a state record.
func (h *handler) PutVMI(rec *state.VMI) error { return h.db.PutVMI(rec) }

// NewRecord is the state record of vmi, which Admissible accepted.
func (h *handler) NewRecord(vmi *apiv1.VirtualMachineInstance) (*state.VMI, error) {
	md := vmi.GetMetadata()
	dir, err := h.layout.VMIDir(md.GetUid())
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
		CreatedAt:          h.now().Round(0),
		VMUID:              apiv1.ControllingVMUID(vmi),
	}, nil
}

// sync observes the domain of rec (if any) and acts on what decide says.
func (h *handler) sync(ctx context.Context, key string, vmi *apiv1.VirtualMachineInstance, rec *state.VMI) (controller.Result, error) {
	if vmi != nil && rec != nil {
		if err := h.refreshRecord(rec, vmi); err != nil {
			return controller.Result{}, err
		}
	}
	var (
		e   *launchers.Conn
		dom *launcherpb.DomainStatus
	)
	if rec != nil {
		var err error
		if e, err = h.launchers.Ensure(ctx, vmi, rec); err == nil {
			dom, err = h.launchers.GetDomain(ctx, e)
			dom = notTakenOver(rec, dom)
		}
		if err != nil {
			if launchers.Unavailable(err) {
				return h.Unreachable(ctx, key, vmi, e, err)
			}
			return controller.Result{}, err
		}
		h.markReachable(key)
	}

	phase := vmi.GetStatus().GetPhase()
	o := observation{
		VMIExists:          vmi != nil,
		VMIDeleting:        vmi.GetMetadata().GetDeletionTimestamp() != nil,
		VMIFinal:           apiv1.IsFinal(phase),
		VMIStarting:        phase == apiv1.PhaseScheduled && h.now().Sub(scheduledAt(vmi)) < h.timing.SlowStartWindow,
		DomainExists:       dom.GetExists(),
		DomainAlive:        domainAlive(dom),
		DomainNeverStarted: shutoffNeverStarted(dom),
	}
	act := decide(o)
	h.log.Debug("handling vmi", "vmi", key, "action", act, "phase", phase,
		"domain_state", dom.GetState(), "domain_reason", dom.GetReason())
	switch act {
	case actShutdown:
		return h.shutdown(ctx, vmi, rec, e, dom)
	case actDelete:
		return h.deleteAndCleanup(ctx, vmi, rec, e, dom)
	case actUpdate:
		return h.update(ctx, vmi, rec, e, dom)
	}
	return controller.Result{}, nil
}

// refreshRecord keeps what the record mirrors of the VMI current: the
// grace period may be shortened (a force stop) while the VMI exists, and
// must be known once it is gone.
func (h *handler) refreshRecord(rec *state.VMI, vmi *apiv1.VirtualMachineInstance) error {
	if rec.UID != vmi.GetMetadata().GetUid() {
		return nil
	}
	grace := vmi.GetSpec().GracePeriodSeconds()
	if rec.GracePeriodSeconds == grace {
		return nil
	}
	next := *rec
	next.GracePeriodSeconds = grace
	if err := h.db.PutVMI(&next); err != nil {
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

// Unreachable handles a launcher that cannot be reached or started. The
// VMI keeps its phase for the launcher grace, because a launcher that is
// starting, or an agent that just restarted, is no reason to kill a guest
// (KubeVirt pain point #9); after it, the VMI fails.
func (h *handler) Unreachable(ctx context.Context, key string, vmi *apiv1.VirtualMachineInstance, e *launchers.Conn, cause error) (controller.Result, error) {
	if e != nil {
		h.launchers.MarkDead(e, cause)
	}
	since := h.markUnreachable(key)
	down := h.now().Sub(since)
	retry := controller.Result{RequeueAfter: h.timing.LivenessInterval}
	if vmi == nil || apiv1.IsFinal(vmi.GetStatus().GetPhase()) || down < h.timing.LauncherGrace {
		h.log.Info("launcher unreachable; retrying", "vmi", key, "for", down.Round(time.Second), "err", cause)
		return retry, nil
	}
	msg := fmt.Sprintf("the launcher has not been reachable for %s: %s", down.Round(time.Second), launchers.ErrorMessage(cause))
	h.log.Warn("failing vmi: launcher unresponsive", "vmi", key, "err", cause)
	if err := h.status.Report(ctx, vmi, vmistatus.Final(apiv1.PhaseFailed, ReasonLauncherUnresponsive, msg)); err != nil {
		return controller.Result{}, err
	}
	return retry, nil
}

// markUnreachable records the first time key's launcher could not be
// reached and returns it.
func (h *handler) markUnreachable(key string) time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	since, ok := h.unreachable[key]
	if !ok {
		since = h.now()
		h.unreachable[key] = since
	}
	return since
}

func (h *handler) markReachable(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.unreachable, key)
}

// stillHere reads the instance of rec from the API: whether it exists,
// is that uid, runs on this node and is not being deleted (the caches
// have not caught up).
func (h *handler) stillHere(ctx context.Context, key string, rec *state.VMI) (bool, error) {
	cctx, cancel := context.WithTimeout(ctx, h.timing.CallTimeout)
	defer cancel()
	v, err := h.api.Get(cctx, &apiv1.GetVirtualMachineInstanceRequest{Key: &apiv1.ObjectKey{Namespace: rec.Namespace, Name: rec.Name}})
	switch status.Code(err) {
	case codes.OK:
	case codes.NotFound, codes.PermissionDenied:
		// Gone, or not this node's to read: it does not run here.
		return false, nil
	default:
		return false, fmt.Errorf("reading %s before removing it: %w", key, err)
	}
	return v.GetMetadata().GetUid() == rec.UID && v.GetStatus().GetNodeName() == h.node &&
		v.GetMetadata().GetDeletionTimestamp() == nil && !apiv1.IsFinal(v.GetStatus().GetPhase()), nil
}

// RunningDomain returns the launcher of the running (or paused) domain
// of VM vmUID on this node and its instance as cached, or a nil launcher
// when none runs (snapshots and restores). A launcher the agent cannot
// reach yet is an error: whether the guest writes to the volumes is
// unknown.
func (h *handler) RunningDomain(ctx context.Context, vmUID string) (launcher.Snapshots, *apiv1.VirtualMachineInstance, error) {
	recs, err := h.db.ListVMIs()
	if err != nil {
		return nil, nil, err
	}
	for _, r := range recs {
		if r.VMUID != vmUID || !r.HasLauncher() {
			continue
		}
		e := h.launchers.Get(r.Key())
		if e == nil || e.Dead() {
			return nil, nil, fmt.Errorf("%w: instance %s of the VM", launchers.ErrUnavailable, r.Key())
		}
		cctx, cancel := context.WithTimeout(ctx, h.timing.CallTimeout)
		st, err := e.Client.GetDomain(cctx)
		cancel()
		if err != nil {
			return nil, nil, err
		}
		switch st.GetState() {
		case stateRunning, statePaused, stateBlocked:
			vmi, _ := h.vmis.GetByKey(r.Key())
			return e.Client, vmi, nil
		}
	}
	return nil, nil, nil
}
