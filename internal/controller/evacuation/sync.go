package evacuation

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller"
	"github.com/virtplane/terraform-provider-virtplane/internal/eviction"
	"github.com/virtplane/terraform-provider-virtplane/internal/informer"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// Evacuee states (apiv1.Evacuee.state).
const (
	StateMigrating = "Migrating"
	StateWaiting   = "Waiting"
	StateStopping  = "Stopping"
	StateBlocked   = "Blocked"
	StateExternal  = "External"
)

// Reconcile converges one node: marks, migrations and shutdowns for what
// has to leave it, and the progress on its status.
func (c *Controller) Reconcile(ctx context.Context, name string) (controller.Result, error) {
	node, ok := c.nodeInf.GetByKey(name)
	draining := ok && node.GetSpec().GetDrain()
	if err := c.unmarkDeparted(ctx, name); err != nil {
		return controller.Result{}, err
	}
	if !draining && (!ok || node.GetStatus().GetEvacuation() != nil) {
		// Uncordoned (or gone) while draining: what has not left stays.
		return controller.Result{}, c.cancel(ctx, name, ok)
	}
	if !c.exp.Satisfied(name) {
		return controller.Result{RequeueAfter: 5 * time.Second}, nil // the migrations' events bring it back sooner
	}
	now := c.opts.Clock()
	var remaining []*apiv1.Evacuee
	var retry time.Duration
	var errs []error
	for _, v := range c.candidates(name, draining) {
		e, after, err := c.evacuate(ctx, name, v, draining, now)
		if err != nil {
			errs = append(errs, err)
		}
		if e != nil {
			remaining = append(remaining, e)
		}
		if after > 0 && (retry == 0 || after < retry) {
			retry = after
		}
	}
	if draining {
		if err := c.record(ctx, name, &apiv1.NodeEvacuation{Drained: len(remaining) == 0, Remaining: remaining}); err != nil {
			errs = append(errs, err)
		}
	}
	return controller.Result{RequeueAfter: retry}, errors.Join(errs...)
}

// candidates are the instances that have to leave node: all those on it
// while it drains, else those marked to leave it. Ended ones have left.
func (c *Controller) candidates(node string, draining bool) []*apiv1.VirtualMachineInstance {
	var from []*apiv1.VirtualMachineInstance
	if draining {
		from = c.vmiInf.ByIndex(controller.VMINodeIndex, node)
	} else {
		from = c.vmiInf.ByIndex(markIndex, node)
	}
	var out []*apiv1.VirtualMachineInstance
	for _, v := range from {
		if v.GetStatus().GetNodeName() == node && !apiv1.IsFinal(v.GetStatus().GetPhase()) {
			out = append(out, v)
		}
	}
	return out
}

// evacuate takes the next step for one instance and says where it stands;
// a nil Evacuee means it does not hold the node up. after > 0 asks to be
// looked at again then (a retry's time).
func (c *Controller) evacuate(ctx context.Context, node string, v *apiv1.VirtualMachineInstance, draining bool, now time.Time) (*apiv1.Evacuee, time.Duration, error) {
	action, strategy, why := apiv1.Eviction(v, c.opts.DefaultEvictionStrategy)
	e := &apiv1.Evacuee{Namespace: v.GetMetadata().GetNamespace(), Name: v.GetMetadata().GetName(), EvictionStrategy: strategy}
	key := informer.Key(v)
	switch action {
	case apiv1.EvictNothing: // being deleted
		e.State, e.Message = StateStopping, "shutting down"
		return e, 0, nil
	case apiv1.EvictRefuse:
		e.State, e.Message = StateBlocked, "eviction strategy LiveMigrate forbids shutting it down, and "+why
		return e, 0, nil
	case apiv1.EvictShutdown:
		if !draining {
			// Marked by an Evict call, and its strategy changed since to
			// one that would have shut it down: the caller asks again.
			_, err := eviction.Unmark(ctx, c.vmis, v)
			return nil, 0, err
		}
		e.State, e.Message = StateStopping, "shutting down (eviction strategy "+strategy+")"
		if err := eviction.Shutdown(ctx, c.vmis, v); err != nil {
			return e, 0, err
		}
		c.log.Info("instance evicted", "vmi", key, "node", node, "eviction_strategy", strategy)
		return e, 0, nil
	case apiv1.EvictExternal:
		e.State, e.Message = StateExternal, "marked for evacuation; an outside actor has to move or stop it"
		_, err := eviction.Mark(ctx, c.vmis, v)
		return e, 0, err
	}
	// EvictMigrate.
	if _, err := eviction.Mark(ctx, c.vmis, v); err != nil {
		return e, 0, err
	}
	migs := c.migInf.ByIndex(controller.MigrationVMIIndex, key)
	if m := active(migs); m != nil {
		e.State, e.Message = migrationState(m), describe(m)
		return e, 0, nil
	}
	if p := v.GetStatus().GetPhase(); p != apiv1.PhaseRunning {
		e.State, e.Message = StateWaiting, fmt.Sprintf("waiting for it to run before it can migrate (phase %s)", orNew(p))
		return e, 0, nil
	}
	if last, failures := lastFailures(migs, node, v.GetMetadata().GetUid()); failures > 0 {
		at := apiv1.PhaseSince(last.GetStatus().GetPhaseTransitionTimestamps(), apiv1.MigrationFailed).Add(c.backoff(failures))
		if wait := at.Sub(now); wait > 0 {
			e.State = StateWaiting
			e.Message = fmt.Sprintf("migration %s failed (%s); retrying at %s", last.GetMetadata().GetName(),
				reasonOf(last), at.UTC().Format(time.RFC3339))
			return e, wait, nil
		}
	}
	m := apiv1.NewMigration(e.Namespace, e.Name, "evacuation", map[string]string{apiv1.LabelEvacuationNode: node})
	c.exp.ExpectCreations(node, 1)
	out, err := c.migs.Create(ctx, m)
	if err != nil {
		c.exp.CreationFailed(node)
		return e, 0, fmt.Errorf("creating evacuation migration of %s: %w", key, err)
	}
	c.log.Info("evacuation migration created", "migration", informer.Key(out), "vmi", key, "node", node)
	e.State, e.Message = migrationState(out), describe(out)
	return e, 0, nil
}

// migrationState is Waiting for a migration that waits for a slot or a
// target, Migrating once it has one.
func migrationState(m *apiv1.VirtualMachineInstanceMigration) string {
	switch m.GetStatus().GetPhase() {
	case "", apiv1.MigrationPending, apiv1.MigrationScheduling:
		return StateWaiting
	}
	return StateMigrating
}

// backoff is the wait after the n-th consecutive failure.
func (c *Controller) backoff(n int) time.Duration {
	d := c.opts.RetryBase
	for i := 1; i < n && d < c.opts.RetryMax; i++ {
		d *= 2
	}
	return min(d, c.opts.RetryMax)
}

// active is an instance's migration that has not ended, if any.
func active(migs []*apiv1.VirtualMachineInstanceMigration) *apiv1.VirtualMachineInstanceMigration {
	for _, m := range migs {
		if !apiv1.IsMigrationFinal(m.GetStatus().GetPhase()) {
			return m
		}
	}
	return nil
}

// lastFailures counts the evacuation migrations from node of the instance
// uid that failed since the last one that did not, and returns the newest.
// The migration controller keeps the newest few per instance; that bounds
// the count, and the delay is at its maximum by then anyway.
func lastFailures(migs []*apiv1.VirtualMachineInstanceMigration, node, uid string) (*apiv1.VirtualMachineInstanceMigration, int) {
	var ours []*apiv1.VirtualMachineInstanceMigration
	for _, m := range migs {
		if evacuates(m) == node && m.GetStatus().GetVmiUid() == uid {
			ours = append(ours, m)
		}
	}
	slices.SortFunc(ours, func(a, b *apiv1.VirtualMachineInstanceMigration) int {
		return a.GetMetadata().GetCreationTimestamp().AsTime().Compare(b.GetMetadata().GetCreationTimestamp().AsTime())
	})
	n := 0
	for i := len(ours) - 1; i >= 0 && ours[i].GetStatus().GetPhase() == apiv1.MigrationFailed; i-- {
		n++
	}
	if n == 0 {
		return nil, 0
	}
	return ours[len(ours)-1], n
}

// describe says where a migration stands, in words.
func describe(m *apiv1.VirtualMachineInstanceMigration) string {
	st := m.GetStatus()
	s := fmt.Sprintf("migration %s %s", m.GetMetadata().GetName(), orNew(st.GetPhase()))
	if t := st.GetTargetNode(); t != "" {
		s += " to " + t
	}
	if st.GetReason() != "" {
		s += ": " + reasonOf(m)
	}
	return s
}

func reasonOf(m *apiv1.VirtualMachineInstanceMigration) string {
	if msg := m.GetStatus().GetMessage(); msg != "" {
		return m.GetStatus().GetReason() + ": " + msg
	}
	return m.GetStatus().GetReason()
}

func orNew(phase string) string {
	if phase == "" {
		return "new"
	}
	return phase
}

// unmarkDeparted clears the marks of instances that left node.
func (c *Controller) unmarkDeparted(ctx context.Context, node string) error {
	return c.unmark(ctx, node, func(v *apiv1.VirtualMachineInstance) bool { return v.GetStatus().GetNodeName() != node })
}

// unmark clears the marks for node of the instances which, alive and not
// being deleted (those go with their mark), also satisfy which.
func (c *Controller) unmark(ctx context.Context, node string, which func(*apiv1.VirtualMachineInstance) bool) error {
	var errs []error
	for _, v := range c.vmiInf.ByIndex(markIndex, node) {
		if apiv1.IsFinal(v.GetStatus().GetPhase()) || v.GetMetadata().GetDeletionTimestamp() != nil || !which(v) {
			continue
		}
		if _, err := eviction.Unmark(ctx, c.vmis, v); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// cancel undoes a drain that was called off: marks are cleared and the
// evacuation migrations that have not ended are deleted (the migration
// controller aborts a running one; the guest stays where it is). The
// record on the node goes last, so that a failed step is retried.
func (c *Controller) cancel(ctx context.Context, node string, exists bool) error {
	var errs []error
	if err := c.unmark(ctx, node, func(*apiv1.VirtualMachineInstance) bool { return true }); err != nil {
		errs = append(errs, err)
	}
	for _, m := range c.migInf.ByIndex(evacuationIndex, node) {
		if apiv1.IsMigrationFinal(m.GetStatus().GetPhase()) || m.GetMetadata().GetDeletionTimestamp() != nil {
			continue
		}
		_, _, err := c.migs.Delete(ctx, m.GetMetadata().GetNamespace(), m.GetMetadata().GetName(),
			store.DeleteOptions{UID: m.GetMetadata().GetUid()})
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			errs = append(errs, fmt.Errorf("canceling evacuation migration %s: %w", informer.Key(m), err))
		}
	}
	if len(errs) > 0 || !exists {
		return errors.Join(errs...)
	}
	c.log.Info("drain canceled", "node", node)
	return c.record(ctx, node, nil)
}

// record writes the drain's progress on the node when it changed.
func (c *Controller) record(ctx context.Context, node string, ev *apiv1.NodeEvacuation) error {
	_, err := c.nodes.GuaranteedUpdate(ctx, "", node, func(n *apiv1.Node) (*apiv1.Node, error) {
		if ev != nil && !n.GetSpec().GetDrain() {
			return n, nil // canceled since the cache showed it; the next pass clears
		}
		if proto.Equal(n.GetStatus().GetEvacuation(), ev) {
			return n, nil
		}
		if n.Status == nil {
			n.Status = &apiv1.NodeStatus{}
		}
		n.Status.Evacuation = ev
		return n, nil
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("recording the drain of %s: %w", node, err)
	}
	return nil
}
