package pool

import (
	"cmp"
	"context"
	"errors"
	"slices"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// scale creates or deletes VMs until the pool has spec.replicas of them
// (KubeVirt's scale). VMs being deleted still count, as in KubeVirt: a
// VM deleted from outside is recreated under its own name once it is
// gone, rather than under a new one at once. stable reports a pool
// already at its size, which lets the rollout go on.
func (c *Controller) scale(ctx context.Context, key string, pool *apiv1.VirtualMachinePool, ms []member, cur string) (res controller.Result, stable bool, err error) {
	diff := len(ms) - int(pool.GetSpec().DesiredReplicas())
	switch {
	case diff < 0:
		res, err = c.scaleOut(ctx, key, pool, min(-diff, burstReplicas), cur)
		return res, false, err
	case diff > 0:
		return controller.Result{}, false, c.scaleIn(ctx, key, pool, ms, diff)
	}
	return controller.Result{}, true, nil
}

// scaleOut creates n VMs under the lowest free names. A name is free
// when the cache has no VM of that name, the pool's or anyone's: an
// orphan named like a pool VM is never adopted, its ordinal is skipped.
func (c *Controller) scaleOut(ctx context.Context, key string, pool *apiv1.VirtualMachinePool, n int, cur string) (controller.Result, error) {
	ns, name := pool.GetMetadata().GetNamespace(), pool.GetMetadata().GetName()
	var res controller.Result
	for ordinal := 0; n > 0; ordinal++ {
		vmName := apiv1.PoolVMName(name, ordinal)
		if _, taken := c.vms.Get(ns, vmName); taken {
			continue
		}
		n--
		c.exp.ExpectCreations(key, 1)
		created, err := c.vmSt.Create(ctx, newVM(pool, vmName, cur))
		switch {
		case errors.Is(err, store.ErrAlreadyExists):
			// The cache is behind the store: the VM was made by an earlier
			// pass (one whose answer was lost, or an earlier leader's), or
			// by someone else. Names are fixed, so this is the one a
			// retry would make: count it as made, and look again soon.
			c.exp.CreationObserved(key)
			res.RequeueAfter = staleRequeue
			c.log.Debug("VM exists already; the cache is behind", "pool", key, "vm", apiv1.Ref(ns, vmName))
		case err != nil:
			c.exp.CreationFailed(key)
			return controller.Result{}, &syncError{reason: apiv1.ReasonFailedScaleOut, err: err}
		default:
			c.log.Info("created VM", "pool", key, "vm", apiv1.Ref(ns, vmName), "vm_uid", created.GetMetadata().GetUid())
		}
	}
	return res, nil
}

// scaleIn deletes diff VMs minus those already being deleted, in the
// pool's scale-in order.
func (c *Controller) scaleIn(ctx context.Context, key string, pool *apiv1.VirtualMachinePool, ms []member, diff int) error {
	var candidates []member
	for _, m := range ms {
		if m.deleting() {
			diff--
		} else {
			candidates = append(candidates, m)
		}
	}
	if diff <= 0 {
		return nil
	}
	sortForScaleIn(candidates, pool.GetSpec().GetScaleInOrder())
	for _, m := range candidates[:min(diff, len(candidates), burstReplicas)] {
		if err := c.deleteVM(ctx, key, m); err != nil {
			return err
		}
	}
	return nil
}

// sortForScaleIn puts the VMs to remove first, by order; creation-time
// ties go by ordinal, so the choice is the same on every pass.
func sortForScaleIn(ms []member, order string) {
	byOrdinal := func(a, b member) int { return cmp.Compare(a.ordinal, b.ordinal) }
	created := func(m member) int64 {
		t := m.vm.GetMetadata().GetCreationTimestamp()
		return t.GetSeconds()*1e9 + int64(t.GetNanos())
	}
	switch order {
	case apiv1.ScaleInAscendingOrder:
		slices.SortFunc(ms, byOrdinal)
	case apiv1.ScaleInNewest:
		slices.SortFunc(ms, func(a, b member) int { return cmp.Or(cmp.Compare(created(b), created(a)), byOrdinal(b, a)) })
	case apiv1.ScaleInOldest:
		slices.SortFunc(ms, func(a, b member) int { return cmp.Or(cmp.Compare(created(a), created(b)), byOrdinal(a, b)) })
	default: // DescendingOrder, and "" on a pool stored before defaulting
		slices.SortFunc(ms, func(a, b member) int { return byOrdinal(b, a) })
	}
}

// deleteVM deletes one of the pool's VMs, with a uid precondition so a
// VM of the same name made since the cache saw this one is not hit.
func (c *Controller) deleteVM(ctx context.Context, key string, m member) error {
	md := m.vm.GetMetadata()
	c.exp.ExpectDeletions(key, 1)
	_, _, err := c.vmSt.Delete(ctx, md.GetNamespace(), md.GetName(), store.DeleteOptions{UID: md.GetUid()})
	switch {
	case errors.Is(err, store.ErrNotFound):
		c.exp.DeletionFailed(key)
		return nil
	case errors.Is(err, store.ErrConflict):
		c.exp.DeletionFailed(key)
		return err // another VM has the name now; the cache will show it
	case err != nil:
		c.exp.DeletionFailed(key)
		return &syncError{reason: apiv1.ReasonFailedScaleIn, err: err}
	}
	c.log.Info("deleting VM", "pool", key, "vm", m.key(), "vm_uid", md.GetUid())
	return nil
}
