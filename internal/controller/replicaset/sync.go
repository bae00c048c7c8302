package replicaset

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

// Requeue delays when a pass cannot decide yet. The informer event that
// unblocks it usually comes first; these bound the wait if it never does.
const (
	staleRequeue       = time.Second     // the cache predates our own write of the replica set
	expectationRequeue = 5 * time.Second // the cache has not shown our creates or deletes
	burstRequeue       = time.Second     // more than one burst to go
)

// Reconcile implements controller.Reconciler.
func (c *Controller) Reconcile(ctx context.Context, key string) (controller.Result, error) {
	rs, ok := c.rss.GetByKey(key)
	if !ok {
		c.exp.Delete(key)
		c.dels.clear(key)
		c.writes.Forget(key)
		return controller.Result{}, c.collectLeftovers(ctx, key, nil)
	}
	if c.writes.Stale(key, rs.GetMetadata().GetResourceVersion()) {
		// The cache does not show our last write of this replica set yet
		// (a finalizer, say); its update event brings the key back.
		return controller.Result{RequeueAfter: staleRequeue}, nil
	}
	if err := c.collectLeftovers(ctx, key, rs); err != nil {
		return controller.Result{}, err
	}
	if rs.GetMetadata().GetDeletionTimestamp() != nil {
		return c.cascade(ctx, key, rs)
	}
	if !slices.Contains(rs.GetMetadata().GetFinalizers(), apiv1.FinalizerReplicaSet) {
		// The finalizer is stored before the first instance is made, so a
		// delete always leaves us the chance to cascade.
		next := proto.Clone(rs).(*apiv1.VirtualMachineInstanceReplicaSet)
		next.Metadata.Finalizers = append(next.Metadata.Finalizers, apiv1.FinalizerReplicaSet)
		out, err := c.writeReplicaSet(ctx, key, next)
		if err != nil || out == nil {
			return controller.Result{}, err
		}
		rs = out
	}
	if err := validSpec(rs.GetSpec()); err != nil {
		// The API refuses such a spec; one that got in anyway stays put
		// until it is edited, which brings the key back.
		return controller.Result{}, controller.TerminalError(fmt.Errorf("replica set %s: %w", key, err))
	}

	claimed, err := c.claim(ctx, rs)
	if err != nil {
		return controller.Result{}, err
	}
	active, finished := classify(claimed)
	var (
		res      controller.Result
		scaleErr error
		clean    bool
	)
	switch {
	case !c.exp.Satisfied(key):
		// The cache has not shown our last creates or deletes; scaling
		// from it would do them twice.
		res.RequeueAfter = expectationRequeue
	case rs.GetSpec().GetPaused():
	default:
		res, scaleErr = c.scale(ctx, key, rs, active)
		if scaleErr == nil {
			// Only now that their replacements are asked for do finished
			// instances go (KubeVirt's order).
			scaleErr = c.deleteFinished(ctx, key, finished)
		}
		clean = scaleErr == nil
	}
	if err := c.updateStatus(ctx, key, rs, active, scaleErr, clean); err != nil {
		return controller.Result{}, err
	}
	return res, scaleErr
}

// cascade deletes the instances of a replica set being deleted, and drops
// its finalizer once the cache shows none left and no create of ours is
// still unseen (it would outlive the replica set).
func (c *Controller) cascade(ctx context.Context, key string, rs *apiv1.VirtualMachineInstanceReplicaSet) (controller.Result, error) {
	var owned, live []*apiv1.VirtualMachineInstance
	for _, v := range c.vmis.ByIndex(ownerIndex, key) {
		if !controlledBy(v, rs) {
			continue
		}
		owned = append(owned, v)
		if v.GetMetadata().GetDeletionTimestamp() == nil {
			live = append(live, v)
		}
	}
	if len(owned) > 0 || !c.exp.Satisfied(key) {
		var delErr error
		if len(live) > 0 && c.exp.Satisfied(key) {
			// Gated like scaling: an instance deleted by the last pass
			// may still show, and must not be counted twice.
			delErr = c.deleteInstances(ctx, key, live, "replica set deleted")
		}
		active, _ := classify(owned)
		if err := c.updateStatus(ctx, key, rs, active, delErr, delErr == nil); err != nil {
			return controller.Result{}, err
		}
		if delErr != nil {
			return controller.Result{}, delErr
		}
		// The deletes' events bring the key back.
		return controller.Result{RequeueAfter: expectationRequeue}, nil
	}
	if !slices.Contains(rs.GetMetadata().GetFinalizers(), apiv1.FinalizerReplicaSet) {
		return controller.Result{}, nil // another finalizer holds it
	}
	next := proto.Clone(rs).(*apiv1.VirtualMachineInstanceReplicaSet)
	next.Metadata.Finalizers = slices.DeleteFunc(next.Metadata.Finalizers, func(f string) bool { return f == apiv1.FinalizerReplicaSet })
	if _, err := c.writeReplicaSet(ctx, key, next); err != nil {
		return controller.Result{}, err
	}
	c.log.Info("replica set's instances are gone; released it", "replicaset", key)
	return controller.Result{}, nil
}

// collectLeftovers deletes the instances whose controller reference names
// a replica set of this key that is gone: none of that uid exists any
// more. Kubernetes' garbage collector would; here nothing else does. It
// happens only when a replica set went without its finalizer being
// honoured, so the store, not the cache, is asked whether it is gone.
func (c *Controller) collectLeftovers(ctx context.Context, key string, rs *apiv1.VirtualMachineInstanceReplicaSet) error {
	var stale []*apiv1.VirtualMachineInstance
	for _, v := range c.vmis.ByIndex(ownerIndex, key) {
		if v.GetMetadata().GetDeletionTimestamp() == nil && (rs == nil || !controlledBy(v, rs)) {
			stale = append(stale, v)
		}
	}
	if len(stale) == 0 {
		return nil
	}
	ns, name := stale[0].GetMetadata().GetNamespace(), controllerRef(stale[0]).GetName()
	uid := ""
	cur, err := c.rsSt.Get(ctx, ns, name)
	switch {
	case err == nil:
		uid = cur.GetMetadata().GetUid()
	case !errors.Is(err, store.ErrNotFound):
		return fmt.Errorf("reading replica set %s: %w", key, err)
	}
	for _, v := range stale {
		if controllerRef(v).GetUid() == uid {
			continue // its replica set exists; the cache is behind
		}
		m := v.GetMetadata()
		if _, _, err := c.vmiSt.Delete(ctx, m.GetNamespace(), m.GetName(), store.DeleteOptions{UID: m.GetUid()}); err != nil && !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("deleting %s, left by a deleted replica set: %w", informer.Key(v), err)
		}
		c.log.Info("deleted instance of a replica set that is gone", "replicaset", key, "vmi", informer.Key(v))
	}
	return nil
}

// claim returns the instances rs owns and whose labels match its selector.
// On the way it adopts matching orphans and releases owned instances that
// stopped matching (Kubernetes' ClaimObject); those controlled by others
// are left alone.
func (c *Controller) claim(ctx context.Context, rs *apiv1.VirtualMachineInstanceReplicaSet) ([]*apiv1.VirtualMachineInstance, error) {
	sel := rs.GetSpec().GetSelector()
	checked := false
	var claimed []*apiv1.VirtualMachineInstance
	for _, v := range c.vmis.ByIndex(namespaceIndex, rs.GetMetadata().GetNamespace()) {
		m := v.GetMetadata()
		matches := sel.Matches(m.GetLabels())
		switch {
		case controlledBy(v, rs):
			if matches {
				claimed = append(claimed, v)
				continue
			}
			if m.GetDeletionTimestamp() != nil {
				continue // going anyway
			}
			if err := c.release(ctx, rs, v); err != nil {
				return nil, err
			}
		case controllerRef(v) != nil, !matches, m.GetDeletionTimestamp() != nil:
			// Someone else's, not ours to take, or going.
		case apiv1.IsFinal(v.GetStatus().GetPhase()):
			// A finished orphan would only be adopted to be deleted: it
			// is someone's record of a run, so it is left alone.
		default:
			if !checked {
				if err := c.recheck(ctx, rs); err != nil {
					return nil, err
				}
				checked = true
			}
			out, err := c.adopt(ctx, rs, v)
			if err != nil {
				return nil, err
			}
			if out != nil {
				claimed = append(claimed, out)
			}
		}
	}
	return claimed, nil
}

// recheck reads rs from the store before an adoption: the cache may still
// show a replica set that was deleted, or replaced by one of the same name
// (KubeVirt's RecheckDeletionTimestamp).
func (c *Controller) recheck(ctx context.Context, rs *apiv1.VirtualMachineInstanceReplicaSet) error {
	m := rs.GetMetadata()
	cur, err := c.rsSt.Get(ctx, m.GetNamespace(), m.GetName())
	if err != nil {
		return fmt.Errorf("reading replica set %s before adopting: %w", informer.Key(rs), err)
	}
	if cur.GetMetadata().GetUid() != m.GetUid() {
		return fmt.Errorf("replica set %s was replaced (uid %s, cached %s); not adopting", informer.Key(rs), cur.GetMetadata().GetUid(), m.GetUid())
	}
	if cur.GetMetadata().GetDeletionTimestamp() != nil {
		return fmt.Errorf("replica set %s is being deleted; not adopting", informer.Key(rs))
	}
	return nil
}

// adopt makes rs v's controller; nil when v is gone.
func (c *Controller) adopt(ctx context.Context, rs *apiv1.VirtualMachineInstanceReplicaSet, v *apiv1.VirtualMachineInstance) (*apiv1.VirtualMachineInstance, error) {
	next := proto.Clone(v).(*apiv1.VirtualMachineInstance)
	next.Metadata.OwnerReferences = append(next.Metadata.OwnerReferences, ownerRef(rs))
	out, err := c.vmiSt.Update(ctx, next)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, nil
	case err != nil:
		// A conflict too: the cache is behind, and its event requeues.
		return nil, fmt.Errorf("adopting %s: %w", informer.Key(v), err)
	}
	c.log.Info("adopted instance", "replicaset", informer.Key(rs), "vmi", informer.Key(v))
	return out, nil
}

// release drops rs's owner reference from v, whose labels no longer match.
func (c *Controller) release(ctx context.Context, rs *apiv1.VirtualMachineInstanceReplicaSet, v *apiv1.VirtualMachineInstance) error {
	next := proto.Clone(v).(*apiv1.VirtualMachineInstance)
	uid := rs.GetMetadata().GetUid()
	next.Metadata.OwnerReferences = slices.DeleteFunc(next.Metadata.OwnerReferences, func(o *apiv1.OwnerReference) bool { return o.GetUid() == uid })
	_, err := c.vmiSt.Update(ctx, next)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil
	case err != nil:
		return fmt.Errorf("releasing %s: %w", informer.Key(v), err)
	}
	c.log.Info("released instance whose labels no longer match", "replicaset", informer.Key(rs), "vmi", informer.Key(v))
	return nil
}

// ownerRef is the controller owner reference rs puts on its instances.
func ownerRef(rs *apiv1.VirtualMachineInstanceReplicaSet) *apiv1.OwnerReference {
	m := rs.GetMetadata()
	return &apiv1.OwnerReference{Kind: apiv1.KindReplicaSet, Name: m.GetName(), Uid: m.GetUid(), Controller: true}
}

// classify splits claimed instances: active ones count as replicas,
// finished ones are deleted once replaced; those being deleted are
// neither.
func classify(claimed []*apiv1.VirtualMachineInstance) (active, finished []*apiv1.VirtualMachineInstance) {
	for _, v := range claimed {
		switch {
		case v.GetMetadata().GetDeletionTimestamp() != nil:
		case apiv1.IsFinal(v.GetStatus().GetPhase()):
			finished = append(finished, v)
		default:
			active = append(active, v)
		}
	}
	return active, finished
}

// validSpec is what the controller needs of a spec; the API checks more.
func validSpec(s *apiv1.VirtualMachineInstanceReplicaSetSpec) error {
	switch {
	case s.GetTemplate() == nil:
		return errors.New("no template")
	case len(s.GetSelector().GetMatchLabels()) == 0:
		return errors.New("no selector")
	case len(s.GetTemplate().GetMetadata().GetLabels()) == 0:
		return errors.New("the template has no labels")
	case !s.GetSelector().Matches(s.GetTemplate().GetMetadata().GetLabels()):
		return fmt.Errorf("selector %q does not match the template's labels", apiv1.SelectorString(s.GetSelector()))
	}
	return nil
}

// writeReplicaSet writes next with compare-and-swap on the cached version
// it was cloned from; nil, nil when the replica set is gone. A conflict
// is returned: the cache is behind, and its event requeues the key.
func (c *Controller) writeReplicaSet(ctx context.Context, key string, next *apiv1.VirtualMachineInstanceReplicaSet) (*apiv1.VirtualMachineInstanceReplicaSet, error) {
	out, err := c.rsSt.Update(ctx, next)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("writing replica set %s: %w", key, err)
	}
	if out.GetMetadata().GetDeletionTimestamp() == nil || len(out.GetMetadata().GetFinalizers()) > 0 {
		c.writes.Wrote(key, out.GetMetadata().GetResourceVersion())
	}
	return out, nil
}
