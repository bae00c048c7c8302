package pool

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
	"github.com/virtplane/terraform-provider-virtplane/internal/vmlifecycle"
)

// step is what the rollout does to one VM.
type step int

const (
	stepNone step = iota
	// stepTemplate writes the template and nothing else: the VM has no
	// instance to restart, or one the VM controller stops anyway
	// (Halted), or the user's state-change requests are pending (the
	// restart follows once they are done, as stepRestart).
	stepTemplate
	// stepTemplateRestart writes the template and the restart in one
	// write, so no VM is ever left with one and not the other.
	stepTemplateRestart
	// stepRestart restarts a VM already on the template whose instance
	// is not: its restart was held back (pending requests), or the VM
	// controller started it from the old template just before the
	// update reached its cache.
	stepRestart
)

// plan is the rollout's step for m; strategy is the template's run
// strategy, which an outdated VM gets.
func (m member) plan(cur, strategy string) step {
	pending := len(m.vm.GetStatus().GetStateChangeRequests()) > 0
	switch {
	case !m.labelCurrent(cur) && (!m.live() || strategy == apiv1.RunStrategyHalted || pending):
		return stepTemplate
	case !m.labelCurrent(cur):
		return stepTemplateRestart
	case m.staleInstance(cur) && !pending:
		return stepRestart
	}
	return stepNone
}

// rollout brings outdated VMs to the current template (KubeVirt's
// opportunistic and proactive update in one). VMs without a running
// instance are updated at once; the others are updated and restarted,
// unavailable ones first and then by ordinal, at most
// max(1, maxUnavailable − unavailable) per pass. Only VMs that are
// unavailable already may use that minimum of one: a Ready VM is taken
// down only while fewer than max_unavailable are, so "1" never has two
// VMs down for the rollout at once. The pool is looked at again every
// rolloutInterval while VMs wait for their turn.
func (c *Controller) rollout(ctx context.Context, pool *apiv1.VirtualMachinePool, ms []member, cur string) (controller.Result, error) {
	for _, m := range ms {
		if c.vmWrit.Stale(m.key(), m.vm.GetMetadata().GetResourceVersion()) {
			// Deciding from a VM older than our own write of it would
			// restart it again, or count it as available.
			return controller.Result{RequeueAfter: staleRequeue}, nil
		}
	}
	spec := pool.GetSpec()
	maxUnavailable, err := apiv1.MaxUnavailableCount(spec.GetMaxUnavailable(), spec.DesiredReplicas())
	if err != nil {
		return controller.Result{}, &syncError{reason: apiv1.ReasonFailedUpdate, err: fmt.Errorf("max_unavailable: %w", err)}
	}
	strategy, err := spec.GetVirtualMachineTemplate().GetSpec().EffectiveRunStrategy()
	if err != nil {
		return controller.Result{}, &syncError{reason: apiv1.ReasonFailedUpdate, err: err}
	}

	var restarts []member
	unavailable, writes, outdated := 0, 0, false
	for _, m := range ms {
		if m.unavailable(cur) {
			unavailable++
		}
		if m.deleting() || !m.outdated(cur) {
			continue // a VM on its way out is replaced from the template
		}
		outdated = true
		switch m.plan(cur, strategy) {
		case stepTemplate:
			if writes == burstReplicas {
				continue
			}
			writes++
			if err := c.updateVM(ctx, pool, m, cur, false); err != nil {
				return controller.Result{}, err
			}
		case stepTemplateRestart, stepRestart:
			restarts = append(restarts, m)
		}
	}
	slices.SortStableFunc(restarts, func(a, b member) int {
		// Unavailable first; ms is by ordinal already.
		return -cmp.Compare(btoi(a.unavailable(cur)), btoi(b.unavailable(cur)))
	})
	room := maxUnavailable - unavailable
	budget := max(1, room)
	takenDown := 0 // available VMs restarted by this pass
	for _, m := range restarts {
		if budget == 0 || writes == burstReplicas {
			break
		}
		if !m.unavailable(cur) {
			if takenDown >= room {
				break // the rest are available too
			}
			takenDown++
		}
		budget--
		writes++
		var err error
		if m.plan(cur, strategy) == stepRestart {
			err = c.restart(ctx, m)
		} else {
			err = c.updateVM(ctx, pool, m, cur, true)
		}
		if err != nil {
			return controller.Result{}, err
		}
	}
	if outdated {
		return controller.Result{RequeueAfter: rolloutInterval}, nil
	}
	return controller.Result{}, nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// updateVM gives m's VM the pool's template and, with restart, queues the
// restart of its instance in the same write: [Stop(uid), Start], the
// restart verb's requests, on which the VM controller deletes that one
// instance and then starts a new one from the VM's (now new) template.
// The stop names the instance by uid, so a request that reaches the VM
// controller late never stops the new instance: each VM restarts once.
// A RunStrategy Once VM, which the verb refuses, gets the template only;
// stepRestart deletes its instance on a later pass.
func (c *Controller) updateVM(ctx context.Context, pool *apiv1.VirtualMachinePool, m member, cur string, restart bool) error {
	next := proto.Clone(m.vm).(*apiv1.VirtualMachine)
	applyTemplate(next, pool.GetSpec().GetVirtualMachineTemplate(), cur)
	if restart && m.vmi != nil {
		if _, err := vmlifecycle.Restart(next, m.vmi, nil); err != nil {
			var refused *vmlifecycle.RefusedError
			if !errors.As(err, &refused) {
				return &syncError{reason: apiv1.ReasonFailedUpdate, err: fmt.Errorf("restarting VM %s: %w", m.key(), err)}
			}
			// Once; restarted by stepRestart once its template is written.
			restart = false
		}
	}
	if err := c.writeVM(ctx, m, next); err != nil {
		return err
	}
	c.log.Info("VM updated to the pool's template", "vm", m.key(), "revision", cur, "restart", restart)
	return nil
}

// restart restarts a VM already on the current template whose instance
// is not. A RunStrategy Once VM's instance is deleted (uid precondition):
// the VM controller starts a Once VM that has none, from its template.
func (c *Controller) restart(ctx context.Context, m member) error {
	if m.strategy() == apiv1.RunStrategyOnce {
		md := m.vmi.GetMetadata()
		_, _, err := c.vmiSt.Delete(ctx, md.GetNamespace(), md.GetName(), store.DeleteOptions{UID: md.GetUid()})
		switch {
		case errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrConflict):
			return nil // gone or replaced already; the cache will show it
		case err != nil:
			return &syncError{reason: apiv1.ReasonFailedUpdate, err: fmt.Errorf("restarting VM %s: %w", m.key(), err)}
		}
		c.log.Info("deleted the instance of a Once VM to restart it on the pool's template", "vm", m.key())
		return nil
	}
	next := proto.Clone(m.vm).(*apiv1.VirtualMachine)
	if _, err := vmlifecycle.Restart(next, m.vmi, nil); err != nil {
		return &syncError{reason: apiv1.ReasonFailedUpdate, err: fmt.Errorf("restarting VM %s: %w", m.key(), err)}
	}
	if err := c.writeVM(ctx, m, next); err != nil {
		return err
	}
	c.log.Info("VM restarted on the pool's template", "vm", m.key())
	return nil
}

// writeVM writes next over m's cached VM with compare-and-swap. A
// conflict comes back as an error that requeues without a failure
// condition: the VM controller writes the same VM all the time.
func (c *Controller) writeVM(ctx context.Context, m member, next *apiv1.VirtualMachine) error {
	out, err := c.vmSt.Update(ctx, next)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil
	case errors.Is(err, store.ErrConflict):
		return err
	case err != nil:
		return &syncError{reason: apiv1.ReasonFailedUpdate, err: fmt.Errorf("updating VM %s: %w", m.key(), err)}
	}
	c.vmWrit.Wrote(m.key(), out.GetMetadata().GetResourceVersion())
	return nil
}
