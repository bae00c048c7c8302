package migration

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller"
	"github.com/virtplane/terraform-provider-virtplane/internal/informer"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// follow mirrors what the nodes report in the instance's migration state
// after the handoff: the target got ready, the source started, the
// migration ended. It fails a target that never gets ready or whose node
// went down before the source started.
func (c *Controller) follow(ctx context.Context, m *apiv1.VirtualMachineInstanceMigration, vmi *apiv1.VirtualMachineInstance) (controller.Result, error) {
	st := vmi.GetStatus().GetMigrationState()
	switch {
	case st == nil:
		return controller.Result{}, c.fail(ctx, m, vmi, ReasonStateLost, "the instance's migration state was cleared during the migration")
	case st.GetMigrationUid() != m.GetMetadata().GetUid():
		return controller.Result{}, c.fail(ctx, m, vmi, ReasonStateLost, "the instance's migration state was taken over by another migration")
	case st.GetCompleted() && st.GetFailed():
		return controller.Result{}, c.fail(ctx, m, vmi, ReasonSourceFailed, st.GetFailureReason())
	case st.GetCompleted() && vmi.GetStatus().GetNodeName() == st.GetTargetNode():
		return controller.Result{}, c.update(ctx, m, func(ms *apiv1.VirtualMachineInstanceMigrationStatus, now time.Time) {
			ms.MigrationState = mirror(st)
			ms.SetPhase(apiv1.MigrationSucceeded, now)
		})
	}

	now := c.opts.Clock()
	if st.GetStartTimestamp() == nil {
		// Before the source started, the controller may still fail the
		// migration itself: the nodes clean up when they see it failed.
		since := apiv1.PhaseSince(m.GetStatus().GetPhaseTransitionTimestamps(), apiv1.MigrationPreparingTarget)
		if target, ok := c.nodeInf.Get("", st.GetTargetNode()); !ok || nodeDown(target) {
			return controller.Result{}, c.failOnVMI(ctx, m, vmi, ReasonTargetDown, fmt.Sprintf("target node %s is down", st.GetTargetNode()))
		}
		if !since.IsZero() && now.Sub(since) >= c.opts.TargetTimeout {
			return controller.Result{}, c.failOnVMI(ctx, m, vmi, ReasonTargetTimeout,
				fmt.Sprintf("the target on node %s was not ready within %s", st.GetTargetNode(), c.opts.TargetTimeout))
		}
	}
	err := c.update(ctx, m, func(ms *apiv1.VirtualMachineInstanceMigrationStatus, now time.Time) {
		ms.MigrationState = mirror(st)
		if ms.Phase == apiv1.MigrationPreparingTarget && st.GetTargetReadyTimestamp() != nil && st.GetTargetDomainXml() != "" {
			ms.SetPhase(apiv1.MigrationTargetReady, now)
		}
		if ms.Phase == apiv1.MigrationTargetReady && st.GetStartTimestamp() != nil {
			ms.SetPhase(apiv1.MigrationRunning, now)
		}
	})
	if err != nil {
		return controller.Result{}, err
	}
	if st.GetStartTimestamp() == nil {
		// The target timeout needs a clock tick, not only events.
		return controller.Result{RequeueAfter: retryPending}, nil
	}
	return controller.Result{}, nil
}

// mirror is the instance's state as the migration shows it: without the
// domain XML, which only the source needs.
func mirror(st *apiv1.MigrationState) *apiv1.MigrationState {
	out := proto.Clone(st).(*apiv1.MigrationState)
	out.TargetDomainXml = ""
	return out
}

// requestAbort asks the source to abort (KubeVirt: abortRequested); the
// finalizer holds the deleted migration until the source reported.
// It returns the migration and instance as written.
func (c *Controller) requestAbort(ctx context.Context, m *apiv1.VirtualMachineInstanceMigration, vmi *apiv1.VirtualMachineInstance) (*apiv1.VirtualMachineInstanceMigration, *apiv1.VirtualMachineInstance, error) {
	st := vmi.GetStatus().GetMigrationState()
	if st.GetMigrationUid() == m.GetMetadata().GetUid() && !st.GetAbortRequested() && !st.GetCompleted() {
		out := proto.Clone(vmi).(*apiv1.VirtualMachineInstance)
		out.Status.MigrationState.AbortRequested = true
		written, err := c.updateVMI(ctx, out)
		if err != nil {
			return nil, nil, fmt.Errorf("requesting the abort of migration %s: %w", informer.Key(m), err)
		}
		vmi = written
		c.log.Info("abort requested", "migration", informer.Key(m))
	}
	m, err := c.updated(ctx, m, func(ms *apiv1.VirtualMachineInstanceMigrationStatus, now time.Time) {
		ms.Conditions = apiv1.SetCondition(ms.Conditions, &apiv1.Condition{
			Type: apiv1.ConditionMigrationAbortRequested, Status: apiv1.ConditionTrue, Reason: ReasonCanceled,
			Message: "the migration was deleted while it ran",
		}, now)
	})
	return m, vmi, err
}

// failOnVMI ends a migration the source has not started: the instance's
// state says failed, which the target's agent sees to clean up (and the
// source's, not to start). KubeVirt's handleMarkMigrationFailedOnVMI.
func (c *Controller) failOnVMI(ctx context.Context, m *apiv1.VirtualMachineInstanceMigration, vmi *apiv1.VirtualMachineInstance, reason, msg string) error {
	now := c.opts.Clock()
	out := proto.Clone(vmi).(*apiv1.VirtualMachineInstance)
	st := out.GetStatus().GetMigrationState()
	st.Completed, st.Failed, st.FailureReason = true, true, msg
	st.EndTimestamp = apiv1.Timestamp(now)
	st.TargetDomainXml = ""
	if _, err := c.updateVMI(ctx, out); err != nil {
		return fmt.Errorf("failing migration %s on its instance: %w", informer.Key(m), err)
	}
	return c.fail(ctx, m, out, reason, msg)
}

// fail ends the migration as Failed with why.
func (c *Controller) fail(ctx context.Context, m *apiv1.VirtualMachineInstanceMigration, vmi *apiv1.VirtualMachineInstance, reason, msg string) error {
	err := c.update(ctx, m, func(ms *apiv1.VirtualMachineInstanceMigrationStatus, now time.Time) {
		ms.Reason, ms.Message = reason, msg
		if ms.VmiUid == "" && vmi != nil {
			ms.VmiUid = vmi.GetMetadata().GetUid()
		}
		if st := vmi.GetStatus().GetMigrationState(); st.GetMigrationUid() == m.GetMetadata().GetUid() {
			ms.MigrationState = mirror(st)
		}
		if m.GetMetadata().GetDeletionTimestamp() != nil {
			ms.Conditions = apiv1.SetCondition(ms.Conditions, &apiv1.Condition{
				Type: apiv1.ConditionMigrationAbortRequested, Status: apiv1.ConditionTrue, Reason: ReasonCanceled,
				Message: "the migration was deleted before it ended",
			}, now)
		}
		ms.SetPhase(apiv1.MigrationFailed, now)
	})
	if err == nil {
		c.log.Info("migration failed", "migration", informer.Key(m), "reason", reason, "message", msg)
	}
	return err
}

// update writes the migration's status as fn changes it, if it changed.
func (c *Controller) update(ctx context.Context, m *apiv1.VirtualMachineInstanceMigration, fn func(*apiv1.VirtualMachineInstanceMigrationStatus, time.Time)) error {
	_, err := c.updated(ctx, m, fn)
	return err
}

// updated is update returning the migration as written.
func (c *Controller) updated(ctx context.Context, m *apiv1.VirtualMachineInstanceMigration, fn func(*apiv1.VirtualMachineInstanceMigrationStatus, time.Time)) (*apiv1.VirtualMachineInstanceMigration, error) {
	out := proto.Clone(m).(*apiv1.VirtualMachineInstanceMigration)
	if out.Status == nil {
		out.Status = &apiv1.VirtualMachineInstanceMigrationStatus{}
	}
	fn(out.Status, c.opts.Clock())
	if proto.Equal(out, m) {
		return m, nil
	}
	written, err := c.migs.Update(ctx, out)
	if err != nil {
		return nil, fmt.Errorf("updating migration %s: %w", informer.Key(m), err)
	}
	c.migWrites.Wrote(informer.Key(written), written.GetMetadata().GetResourceVersion())
	return written, nil
}

// updateVMI writes the instance and remembers the version written.
func (c *Controller) updateVMI(ctx context.Context, vmi *apiv1.VirtualMachineInstance) (*apiv1.VirtualMachineInstance, error) {
	written, err := c.vmis.Update(ctx, vmi)
	if err != nil {
		return nil, err
	}
	c.vmiWrites.Wrote(informer.Key(written), written.GetMetadata().GetResourceVersion())
	return written, nil
}

// finalize lets a deleted ended migration go (drops the finalizer), drops
// migrations of instances that are gone, and keeps only the newest
// KeepFinalized ended migrations per instance.
func (c *Controller) finalize(ctx context.Context, m *apiv1.VirtualMachineInstanceMigration) error {
	if err := c.settleInstance(ctx, m); err != nil {
		return err
	}
	if slices.Contains(m.GetMetadata().GetFinalizers(), apiv1.FinalizerMigration) {
		out := proto.Clone(m).(*apiv1.VirtualMachineInstanceMigration)
		out.Metadata.Finalizers = slices.DeleteFunc(out.Metadata.Finalizers, func(f string) bool { return f == apiv1.FinalizerMigration })
		if _, err := c.migs.Update(ctx, out); err != nil {
			return fmt.Errorf("releasing migration %s: %w", informer.Key(m), err)
		}
		return nil
	}
	if _, ok := c.vmiInf.Get(m.GetMetadata().GetNamespace(), m.GetSpec().GetVmiName()); !ok {
		return c.delete(ctx, m)
	}
	var ended []*apiv1.VirtualMachineInstanceMigration
	for _, o := range c.migInf.ByIndex(controller.MigrationVMIIndex, controller.MigrationVMIKey(m)) {
		if apiv1.IsMigrationFinal(o.GetStatus().GetPhase()) {
			ended = append(ended, o)
		}
	}
	if len(ended) <= c.opts.KeepFinalized {
		return nil
	}
	slices.SortFunc(ended, func(a, b *apiv1.VirtualMachineInstanceMigration) int {
		if older(a, b) {
			return 1
		}
		return -1
	})
	for _, o := range ended[c.opts.KeepFinalized:] {
		if err := c.delete(ctx, o); err != nil {
			return err
		}
	}
	return nil
}

// settleInstance labels the instance of an ended migration for where it
// runs now: the node label follows a successful move (the nodes' watches
// select by it: the target's starts showing the instance, the source's
// stops), the target label goes, and so does the domain XML.
func (c *Controller) settleInstance(ctx context.Context, m *apiv1.VirtualMachineInstanceMigration) error {
	vmi, ok := c.vmiInf.Get(m.GetMetadata().GetNamespace(), m.GetSpec().GetVmiName())
	if !ok || vmi.GetStatus().GetMigrationState().GetMigrationUid() != m.GetMetadata().GetUid() {
		return nil
	}
	out := proto.Clone(vmi).(*apiv1.VirtualMachineInstance)
	delete(out.Metadata.Labels, apiv1.LabelMigrationTargetNode)
	st := out.Status.MigrationState
	if st.GetCompleted() && !st.GetFailed() && out.Status.NodeName == st.GetTargetNode() && out.Metadata.Labels != nil {
		out.Metadata.Labels[apiv1.LabelNodeName] = st.GetTargetNode()
	}
	st.TargetDomainXml = ""
	if proto.Equal(out, vmi) {
		return nil
	}
	if _, err := c.updateVMI(ctx, out); err != nil {
		return fmt.Errorf("settling the instance of migration %s: %w", informer.Key(m), err)
	}
	return nil
}

func (c *Controller) delete(ctx context.Context, m *apiv1.VirtualMachineInstanceMigration) error {
	_, _, err := c.migs.Delete(ctx, m.GetMetadata().GetNamespace(), m.GetMetadata().GetName(),
		store.DeleteOptions{UID: m.GetMetadata().GetUid(), ResourceVersion: m.GetMetadata().GetResourceVersion()})
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("deleting ended migration %s: %w", informer.Key(m), err)
	}
	return nil
}
