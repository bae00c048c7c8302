package pool

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// Reconcile implements controller.Reconciler.
func (c *Controller) Reconcile(ctx context.Context, key string) (controller.Result, error) {
	pool, ok := c.pools.GetByKey(key)
	if !ok {
		c.exp.Delete(key)
		c.poolWrit.Forget(key)
		return controller.Result{}, nil
	}
	if c.poolWrit.Stale(key, pool.GetMetadata().GetResourceVersion()) {
		// The cache does not show our last write of this pool yet; its
		// event brings the key back.
		return controller.Result{RequeueAfter: staleRequeue}, nil
	}
	specErr := checkSpec(pool)
	ms := c.members(pool)
	if specErr == nil {
		var err error
		if ms, err = c.release(ctx, pool, ms); err != nil {
			return controller.Result{}, err
		}
	}
	if pool.GetMetadata().GetDeletionTimestamp() != nil {
		return c.finalize(ctx, key, pool, ms)
	}
	if specErr != nil {
		// Validation refuses such a pool; acting on one would make VMs it
		// does not select, or release every VM it has. Its next update
		// brings it back.
		return controller.Result{}, controller.TerminalError(fmt.Errorf("pool %s: %w", key, specErr))
	}
	if !slices.Contains(pool.GetMetadata().GetFinalizers(), apiv1.FinalizerPool) {
		// Before any VM exists: a pool deleted without its finalizer
		// would leave its VMs behind.
		return controller.Result{}, c.addFinalizer(ctx, key, pool)
	}
	cur := apiv1.PoolRevision(pool.GetSpec().GetVirtualMachineTemplate())
	res, syncErr := c.sync(ctx, key, pool, ms, cur)
	if err := c.updateStatus(ctx, key, pool, ms, cur, syncErr); err != nil {
		return controller.Result{}, err
	}
	return res, syncErr
}

// checkSpec refuses what validation refuses and this controller cannot
// act on safely.
func checkSpec(pool *apiv1.VirtualMachinePool) error {
	sel := pool.GetSpec().GetSelector()
	switch {
	case len(sel.GetMatchLabels()) == 0:
		return errors.New("empty selector")
	case !sel.Matches(pool.GetSpec().GetVirtualMachineTemplate().GetMetadata().GetLabels()):
		return fmt.Errorf("selector %q does not match the template's labels", apiv1.SelectorString(sel))
	}
	return nil
}

// sync scales the pool and, once its scale is stable, rolls its template
// out (KubeVirt's execute). Expectations not yet met or a paused pool
// skip both; the status is written either way.
func (c *Controller) sync(ctx context.Context, key string, pool *apiv1.VirtualMachinePool, ms []member, cur string) (controller.Result, error) {
	if !c.exp.Satisfied(key) {
		// The cache has not shown our last creates or deletes; their
		// events bring the key back.
		return controller.Result{RequeueAfter: expectationsRequeue}, nil
	}
	if pool.GetSpec().GetPaused() {
		return controller.Result{}, nil
	}
	res, stable, err := c.scale(ctx, key, pool, ms, cur)
	if err != nil || !stable {
		return res, err
	}
	return c.rollout(ctx, pool, ms, cur)
}

// release drops the pool's owner reference from VMs whose labels no
// longer match its selector (KubeVirt's ReleaseDetachedVirtualMachines)
// and returns the VMs it still controls. The pool never adopts: a VM it
// did not create stays someone else's, whatever its name and labels.
func (c *Controller) release(ctx context.Context, pool *apiv1.VirtualMachinePool, ms []member) ([]member, error) {
	sel := pool.GetSpec().GetSelector()
	out := ms[:0:0]
	for _, m := range ms {
		if m.deleting() || sel.Matches(m.vm.GetMetadata().GetLabels()) {
			out = append(out, m)
			continue
		}
		next := proto.Clone(m.vm).(*apiv1.VirtualMachine)
		next.Metadata.OwnerReferences = slices.DeleteFunc(next.Metadata.OwnerReferences, func(o *apiv1.OwnerReference) bool {
			return o.GetController() && o.GetKind() == apiv1.KindPool && o.GetUid() == pool.GetMetadata().GetUid()
		})
		written, err := c.vmSt.Update(ctx, next)
		switch {
		case errors.Is(err, store.ErrNotFound):
			continue
		case err != nil:
			return nil, fmt.Errorf("releasing VM %s: %w", m.key(), err)
		}
		c.vmWrit.Wrote(m.key(), written.GetMetadata().GetResourceVersion())
		c.log.Info("released VM whose labels left the selector", "pool", apiv1.Ref(pool.Metadata.Namespace, pool.Metadata.Name), "vm", m.key())
	}
	return out, nil
}

// addFinalizer puts FinalizerPool on a live pool.
func (c *Controller) addFinalizer(ctx context.Context, key string, pool *apiv1.VirtualMachinePool) error {
	next := proto.Clone(pool).(*apiv1.VirtualMachinePool)
	next.Metadata.Finalizers = append(next.Metadata.Finalizers, apiv1.FinalizerPool)
	return c.writePool(ctx, key, next)
}

// finalize deletes a deleted pool's VMs and drops its finalizer once the
// cache shows none left. Each VM goes the way a deleted VM does: the VM
// controller stops its instance, and its persistent volumes go with it.
func (c *Controller) finalize(ctx context.Context, key string, pool *apiv1.VirtualMachinePool, ms []member) (controller.Result, error) {
	if !slices.Contains(pool.GetMetadata().GetFinalizers(), apiv1.FinalizerPool) {
		return controller.Result{}, nil
	}
	if !c.exp.Satisfied(key) {
		// A delete the cache has not shown yet would be asked for again
		// and raise an expectation nothing lowers; a create it has not
		// shown would be left behind by dropping the finalizer.
		return controller.Result{RequeueAfter: expectationsRequeue}, nil
	}
	if len(ms) > 0 {
		n := 0
		for _, m := range ms {
			if m.deleting() {
				continue
			}
			if n == burstReplicas {
				break
			}
			n++
			if err := c.deleteVM(ctx, key, m); err != nil {
				return controller.Result{}, err
			}
		}
		// Their deletion events bring the pool back.
		return controller.Result{}, nil
	}
	next := proto.Clone(pool).(*apiv1.VirtualMachinePool)
	next.Metadata.Finalizers = slices.DeleteFunc(next.Metadata.Finalizers, func(f string) bool { return f == apiv1.FinalizerPool })
	if err := c.writePool(ctx, key, next); err != nil {
		return controller.Result{}, err
	}
	c.log.Info("pool's VMs are gone; finalizer removed", "pool", key)
	return controller.Result{}, nil
}

// writePool writes next with compare-and-swap. A conflict comes back as
// an error, which requeues: the cache will show the newer pool.
func (c *Controller) writePool(ctx context.Context, key string, next *apiv1.VirtualMachinePool) error {
	out, err := c.poolSt.Update(ctx, next)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil
	case err != nil:
		return fmt.Errorf("writing pool %s: %w", key, err)
	}
	c.poolWrit.Wrote(key, out.GetMetadata().GetResourceVersion())
	return nil
}
