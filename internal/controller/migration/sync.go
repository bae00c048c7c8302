package migration

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/virtplane/terraform-provider-virtplane/internal/api/migrationdest"
	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller"
	"github.com/virtplane/terraform-provider-virtplane/internal/informer"
)

// Reasons the controller writes on migrations.
const (
	ReasonVMIMissing    = "InstanceMissing"
	ReasonVMIReplaced   = "InstanceReplaced"
	ReasonVMIEnded      = "InstanceEnded"
	ReasonNotRunning    = "InstanceNotRunning"
	ReasonNotMigratable = "NotLiveMigratable"
	ReasonInProgress    = "MigrationInProgress"
	ReasonCanceled      = "Canceled"
	ReasonWaiting       = "WaitingForSlot"
	ReasonUnschedulable = "Unschedulable"
	ReasonTargetTimeout = "TargetNotReady"
	ReasonTargetDown    = "TargetNodeDown"
	ReasonStateLost     = "StateLost"
	ReasonSourceFailed  = "MigrationFailed"
	ReasonNoDestination = "NoMigrationDestination"
)

// retryPending is how often a migration waiting for a slot or a target is
// looked at again without an event.
const retryPending = 10 * time.Second

// Reconcile converges one migration. Like the VMI controller, every write
// is a compare-and-swap of what the cache holds: a conflict means the
// cache is behind and requeues, so no decision is made twice from one
// stale view.
func (c *Controller) Reconcile(ctx context.Context, key string) (controller.Result, error) {
	m, ok := c.migInf.GetByKey(key)
	if !ok {
		c.migWrites.Forget(key)
		return controller.Result{}, nil
	}
	vmi, ok := c.vmiInf.Get(m.GetMetadata().GetNamespace(), m.GetSpec().GetVmiName())
	if c.migWrites.Stale(key, m.GetMetadata().GetResourceVersion()) ||
		(ok && c.vmiWrites.Stale(informer.Key(vmi), vmi.GetMetadata().GetResourceVersion())) {
		// The cache has not caught up with our own write; its event
		// brings us back.
		return controller.Result{}, nil
	}
	if apiv1.IsMigrationFinal(m.GetStatus().GetPhase()) {
		return controller.Result{}, c.finalize(ctx, m)
	}
	if reason, msg := c.lost(m, vmi, ok); reason != "" {
		return controller.Result{}, c.fail(ctx, m, vmi, reason, msg)
	}
	phase := m.GetStatus().GetPhase()
	handedOff := phase != "" && phase != apiv1.MigrationPending && phase != apiv1.MigrationScheduling && phase != apiv1.MigrationScheduled
	if m.GetMetadata().GetDeletionTimestamp() != nil {
		if !handedOff {
			// Nothing runs on the nodes yet: canceling is failing.
			return controller.Result{}, c.fail(ctx, m, vmi, ReasonCanceled, "Migration failed due to being canceled")
		}
		var err error
		if m, vmi, err = c.requestAbort(ctx, m, vmi); err != nil {
			return controller.Result{}, err
		}
	}
	switch phase {
	case "":
		return controller.Result{}, c.admitNew(ctx, m, vmi)
	case apiv1.MigrationPending:
		return c.admit(ctx, m, vmi)
	case apiv1.MigrationScheduling:
		return c.schedule(ctx, m, vmi)
	case apiv1.MigrationScheduled:
		return controller.Result{}, c.handoff(ctx, m, vmi)
	}
	return c.follow(ctx, m, vmi)
}

// lost says why a migration cannot go on whatever its phase: its instance
// is gone, replaced or ended.
func (c *Controller) lost(m *apiv1.VirtualMachineInstanceMigration, vmi *apiv1.VirtualMachineInstance, ok bool) (reason, msg string) {
	switch {
	case !ok:
		return ReasonVMIMissing, "Migration failed because the instance does not exist"
	case m.GetStatus().GetVmiUid() != "" && m.GetStatus().GetVmiUid() != vmi.GetMetadata().GetUid():
		return ReasonVMIReplaced, "Migration failed because the instance it was created for was replaced"
	case apiv1.IsFinal(vmi.GetStatus().GetPhase()):
		return ReasonVMIEnded, "Migration failed because the instance shut down during the migration"
	}
	return "", ""
}

// admitNew checks that the instance can migrate now (KubeVirt's create
// admitter and canMigrateVMI) and moves the migration to Pending.
func (c *Controller) admitNew(ctx context.Context, m *apiv1.VirtualMachineInstanceMigration, vmi *apiv1.VirtualMachineInstance) error {
	if p := vmi.GetStatus().GetPhase(); p != apiv1.PhaseRunning {
		return c.fail(ctx, m, vmi, ReasonNotRunning, fmt.Sprintf("instance %s is %s, not Running", vmi.GetMetadata().GetName(), orNone(p)))
	}
	if cond := apiv1.FindCondition(vmi.GetStatus().GetConditions(), apiv1.ConditionLiveMigratable); cond.GetStatus() == apiv1.ConditionFalse {
		return c.fail(ctx, m, vmi, ReasonNotMigratable, fmt.Sprintf("Cannot migrate instance, reason: %s, message: %s", cond.GetReason(), cond.GetMessage()))
	}
	if other := c.otherActive(m); other != nil {
		return c.fail(ctx, m, vmi, ReasonInProgress, fmt.Sprintf("migration %s is already in progress for instance %s", other.GetMetadata().GetName(), vmi.GetMetadata().GetName()))
	}
	if st := vmi.GetStatus().GetMigrationState(); st != nil && !st.GetCompleted() && st.GetMigrationUid() != m.GetMetadata().GetUid() {
		return c.fail(ctx, m, vmi, ReasonInProgress, fmt.Sprintf("instance %s is still migrating (migration uid %s)", vmi.GetMetadata().GetName(), st.GetMigrationUid()))
	}
	return c.update(ctx, m, func(st *apiv1.VirtualMachineInstanceMigrationStatus, now time.Time) {
		st.VmiUid = vmi.GetMetadata().GetUid()
		st.SetPhase(apiv1.MigrationPending, now)
	})
}

// otherActive returns an older migration of the same instance that has
// not ended: one migration per instance at a time, first come first.
func (c *Controller) otherActive(m *apiv1.VirtualMachineInstanceMigration) *apiv1.VirtualMachineInstanceMigration {
	var first *apiv1.VirtualMachineInstanceMigration
	for _, o := range c.migInf.ByIndex(controller.MigrationVMIIndex, controller.MigrationVMIKey(m)) {
		if o.GetMetadata().GetUid() == m.GetMetadata().GetUid() || apiv1.IsMigrationFinal(o.GetStatus().GetPhase()) {
			continue
		}
		// Admitted ones win; among the rest, the older.
		if o.GetStatus().GetPhase() != "" || older(o, m) {
			if first == nil || older(o, first) {
				first = o
			}
		}
	}
	return first
}

func older(a, b *apiv1.VirtualMachineInstanceMigration) bool {
	ta, tb := a.GetMetadata().GetCreationTimestamp().AsTime(), b.GetMetadata().GetCreationTimestamp().AsTime()
	if !ta.Equal(tb) {
		return ta.Before(tb)
	}
	return a.GetMetadata().GetName() < b.GetMetadata().GetName()
}

// admit lets a Pending migration start when the cluster and its source
// node are below their limits.
func (c *Controller) admit(ctx context.Context, m *apiv1.VirtualMachineInstanceMigration, vmi *apiv1.VirtualMachineInstance) (controller.Result, error) {
	source := vmi.GetStatus().GetNodeName()
	c.admitMu.Lock()
	total, outbound := c.running(source)
	var waiting string
	switch {
	case c.lockedBy(vmi) != "":
		waiting = fmt.Sprintf("%s holds the VM", c.lockedBy(vmi))
	case total >= c.opts.ParallelMigrationsPerCluster:
		waiting = fmt.Sprintf("%d migrations are running in the cluster (at most %d at once)", total, c.opts.ParallelMigrationsPerCluster)
	case outbound >= c.opts.ParallelOutboundMigrationsPerNode:
		waiting = fmt.Sprintf("%d migrations are leaving node %s (at most %d at once)", outbound, source, c.opts.ParallelOutboundMigrationsPerNode)
	default:
		c.promoted[m.GetMetadata().GetUid()] = source
	}
	c.admitMu.Unlock()
	// Why a migration started or waits is what an operator asks when
	// migrations queue up behind the limits.
	c.log.Debug("admission", "migration", informer.Key(m), "source", source, "running", total, "leaving_source", outbound, "waiting", waiting)

	if waiting != "" {
		return controller.Result{RequeueAfter: retryPending}, c.update(ctx, m, func(st *apiv1.VirtualMachineInstanceMigrationStatus, _ time.Time) {
			st.Reason, st.Message = ReasonWaiting, waiting
		})
	}
	err := c.update(ctx, m, func(st *apiv1.VirtualMachineInstanceMigrationStatus, now time.Time) {
		st.Reason, st.Message = "", ""
		st.SetPhase(apiv1.MigrationScheduling, now)
	})
	if err != nil {
		c.admitMu.Lock()
		delete(c.promoted, m.GetMetadata().GetUid())
		c.admitMu.Unlock()
	}
	return controller.Result{}, err
}

// running counts the migrations past Pending in the cluster and those
// leaving source; the caller holds admitMu.
func (c *Controller) running(source string) (total, outbound int) {
	for _, m := range c.migInf.List() {
		uid := m.GetMetadata().GetUid()
		switch m.GetStatus().GetPhase() {
		case "", apiv1.MigrationPending:
			continue // promoted ones are counted below until the cache shows them
		case apiv1.MigrationSucceeded, apiv1.MigrationFailed:
			delete(c.promoted, uid)
			continue
		}
		delete(c.promoted, uid)
		total++
		if sourceNode(m, c.vmiInf) == source {
			outbound++
		}
	}
	for _, node := range c.promoted {
		total++
		if node == source {
			outbound++
		}
	}
	return total, outbound
}

// sourceNode is the node a migration leaves: from the handoff once made,
// else where its instance runs. The instance's own migration state counts
// as the handoff too: when a server dies between writing it and writing
// the migration's phase, the nodes migrate the instance while the
// migration still reads Scheduled, and the instance may already run on
// the target when the next leader looks. Counting it from the target
// would let another migration leave the source before this one ended.
func sourceNode(m *apiv1.VirtualMachineInstanceMigration, vmis informer.Lister[*apiv1.VirtualMachineInstance]) string {
	if n := m.GetStatus().GetMigrationState().GetSourceNode(); n != "" {
		return n
	}
	v, ok := vmis.Get(m.GetMetadata().GetNamespace(), m.GetSpec().GetVmiName())
	if !ok {
		return ""
	}
	if st := v.GetStatus().GetMigrationState(); st.GetMigrationUid() == m.GetMetadata().GetUid() && st.GetSourceNode() != "" {
		return st.GetSourceNode()
	}
	return v.GetStatus().GetNodeName()
}

// schedule picks the target node.
func (c *Controller) schedule(ctx context.Context, m *apiv1.VirtualMachineInstanceMigration, vmi *apiv1.VirtualMachineInstance) (controller.Result, error) {
	node, why := c.placer.PlaceMigrationTarget(vmi, m.GetSpec().GetAddedNodeSelector())
	now := c.opts.Clock()
	if node == "" {
		since := apiv1.PhaseSince(m.GetStatus().GetPhaseTransitionTimestamps(), apiv1.MigrationScheduling)
		if !since.IsZero() && now.Sub(since) >= c.opts.UnschedulableTimeout {
			return controller.Result{}, c.fail(ctx, m, vmi, ReasonUnschedulable,
				fmt.Sprintf("no node could take the migration target for %s: %s", c.opts.UnschedulableTimeout, why))
		}
		return controller.Result{RequeueAfter: retryPending}, c.update(ctx, m, func(st *apiv1.VirtualMachineInstanceMigrationStatus, _ time.Time) {
			st.Reason, st.Message = ReasonUnschedulable, why
		})
	}
	return controller.Result{}, c.update(ctx, m, func(st *apiv1.VirtualMachineInstanceMigrationStatus, now time.Time) {
		st.TargetNode = node
		st.Reason, st.Message = "", ""
		st.SetPhase(apiv1.MigrationScheduled, now)
	})
}

// handoff gives the migration to the nodes: the instance's migration
// state names the source and target, where the target receives and the
// configuration, and a label lets the target's agent see the instance.
func (c *Controller) handoff(ctx context.Context, m *apiv1.VirtualMachineInstanceMigration, vmi *apiv1.VirtualMachineInstance) error {
	uid := m.GetMetadata().GetUid()
	if vmi.GetStatus().GetMigrationState().GetMigrationUid() != uid {
		dest, err := c.destination(m.GetStatus().GetTargetNode())
		if err != nil {
			return c.fail(ctx, m, vmi, ReasonNoDestination, err.Error())
		}
		now := c.opts.Clock()
		out := proto.Clone(vmi).(*apiv1.VirtualMachineInstance)
		if out.Metadata.Labels == nil {
			out.Metadata.Labels = map[string]string{}
		}
		out.Metadata.Labels[apiv1.LabelMigrationTargetNode] = m.GetStatus().GetTargetNode()
		out.Status.MigrationState = &apiv1.MigrationState{
			MigrationUid:  uid,
			SourceNode:    vmi.GetStatus().GetNodeName(),
			TargetNode:    m.GetStatus().GetTargetNode(),
			Mode:          apiv1.MigrationModePreCopy,
			Method:        apiv1.MigrationMethodFor(vmi.GetSpec()),
			Configuration: c.opts.configuration(),

			TargetLibvirtUri:  dest.LibvirtURI,
			TargetNodeAddress: dest.Address,
		}
		if _, err := c.updateVMI(ctx, out); err != nil {
			return fmt.Errorf("handing migration %s to the nodes: %w", informer.Key(m), err)
		}
		c.log.Info("handed off", "migration", informer.Key(m), "vmi", vmi.GetMetadata().GetName(),
			"source", out.Status.MigrationState.SourceNode, "target", out.Status.MigrationState.TargetNode, "at", now)
	}
	return c.update(ctx, m, func(st *apiv1.VirtualMachineInstanceMigrationStatus, now time.Time) {
		st.SetPhase(apiv1.MigrationPreparingTarget, now)
	})
}

// destination is where a migration to node goes: built from the
// node's registered migration address by the cluster's policy, never
// from anything a node writes on an instance. An address another node
// registered too (two servers' Register calls raced) is refused: the
// migration would go to whichever host answers there.
func (c *Controller) destination(node string) (migrationdest.Destination, error) {
	n, ok := c.nodeInf.Get("", node)
	if !ok {
		return migrationdest.Destination{}, fmt.Errorf("target node %s is not registered", node)
	}
	addr := n.GetStatus().GetMigrationAddress()
	if addr == "" {
		return migrationdest.Destination{}, fmt.Errorf("target node %s takes no migrations: its agent registered no --migration-address", node)
	}
	for _, o := range c.nodeInf.List() {
		if o.GetMetadata().GetName() != node && o.GetStatus().GetMigrationAddress() == addr {
			return migrationdest.Destination{}, fmt.Errorf("target node %s's migration address %s is registered by node %s too", node, addr, o.GetMetadata().GetName())
		}
	}
	d, err := c.opts.Destinations.Build(addr)
	if err != nil {
		return migrationdest.Destination{}, fmt.Errorf("target node %s: %w", node, err)
	}
	return d, nil
}

func orNone(s string) string {
	if s == "" {
		return "not started"
	}
	return s
}

// lockedBy names what holds the VM of vmi (a snapshot or restore, see
// Options.LockedBy), or "" for an instance of no VM or a free one.
func (c *Controller) lockedBy(vmi *apiv1.VirtualMachineInstance) string {
	if c.opts.LockedBy == nil {
		return ""
	}
	for _, o := range vmi.GetMetadata().GetOwnerReferences() {
		if o.GetKind() == apiv1.KindVirtualMachine && o.GetController() {
			return c.opts.LockedBy(vmi.GetMetadata().GetNamespace(), o.GetName())
		}
	}
	return ""
}
