package replicaset

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller"
	"github.com/virtplane/terraform-provider-virtplane/internal/informer"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// nameAttempts bounds the random names tried for one instance: a
// collision of five random characters twice running means something else
// is wrong.
const nameAttempts = 5

// failure is a failed create or delete, reported in the ReplicaFailure
// condition with its reason.
type failure struct {
	reason string
	err    error
}

func (f *failure) Error() string { return fmt.Sprintf("%s: %v", f.reason, f.err) }
func (f *failure) Unwrap() error { return f.err }

// scale creates or deletes instances, at most a burst of them, to bring
// the active ones to spec.replicas.
func (c *Controller) scale(ctx context.Context, key string, rs *apiv1.VirtualMachineInstanceReplicaSet, active []*apiv1.VirtualMachineInstance) (controller.Result, error) {
	diff := len(active) - int(rs.GetSpec().DesiredReplicas())
	var res controller.Result
	if abs(diff) > c.opts.BurstReplicas {
		res.RequeueAfter = burstRequeue
	}
	n := min(abs(diff), c.opts.BurstReplicas)
	switch {
	case diff < 0:
		return res, c.createInstances(ctx, key, rs, n)
	case diff > 0:
		return res, c.deleteInstances(ctx, key, deletionOrder(active)[:n], "scaling down")
	}
	return res, nil
}

// deleteFinished deletes final instances, which no longer count as
// replicas, a burst at a time.
func (c *Controller) deleteFinished(ctx context.Context, key string, finished []*apiv1.VirtualMachineInstance) error {
	if len(finished) == 0 {
		return nil
	}
	return c.deleteInstances(ctx, key, finished[:min(len(finished), c.opts.BurstReplicas)], "finished")
}

// createInstances creates n instances from rs's template in slow-start
// batches (1, 2, 4, ..., as Kubernetes' ReplicaSet does), so a create the
// store refuses, a quota say, costs a call or two rather than a burst.
func (c *Controller) createInstances(ctx context.Context, key string, rs *apiv1.VirtualMachineInstanceReplicaSet, n int) error {
	tmpl := c.instance(rs)
	c.exp.ExpectCreations(key, n)
	attempted, err := slowStart(n, c.opts.Parallelism, func() error {
		if err := c.createOne(ctx, rs, tmpl); err != nil {
			c.exp.CreationFailed(key)
			return err
		}
		return nil
	})
	for range n - attempted {
		c.exp.CreationFailed(key) // never asked for, never to be seen
	}
	if err != nil {
		return &failure{reason: apiv1.ReasonFailedCreate, err: err}
	}
	c.log.Info("created instances", "replicaset", key, "count", n)
	return nil
}

// createOne creates one instance like tmpl under a new random name,
// trying another name when that one is taken.
func (c *Controller) createOne(ctx context.Context, rs *apiv1.VirtualMachineInstanceReplicaSet, tmpl *apiv1.VirtualMachineInstance) error {
	for attempt := 1; ; attempt++ {
		v := proto.Clone(tmpl).(*apiv1.VirtualMachineInstance)
		v.Metadata.Name = c.newName(rs.GetMetadata().GetName())
		_, err := c.vmiSt.Create(ctx, v)
		if err == nil {
			return nil
		}
		if !errors.Is(err, store.ErrAlreadyExists) || attempt == nameAttempts {
			return fmt.Errorf("creating an instance of %s: %w", informer.Key(rs), err)
		}
	}
}

// instance is what each new instance of rs is, but for its name: the
// template's labels, annotations and spec, owned by rs, Pending.
func (c *Controller) instance(rs *apiv1.VirtualMachineInstanceReplicaSet) *apiv1.VirtualMachineInstance {
	tmpl := rs.GetSpec().GetTemplate()
	spec, _ := proto.Clone(tmpl.GetSpec()).(*apiv1.VirtualMachineInstanceSpec)
	if spec == nil {
		spec = &apiv1.VirtualMachineInstanceSpec{}
	}
	now := timestamppb.New(c.opts.Clock())
	return &apiv1.VirtualMachineInstance{
		Metadata: &apiv1.ObjectMeta{
			Namespace:       rs.GetMetadata().GetNamespace(),
			Labels:          maps.Clone(tmpl.GetMetadata().GetLabels()),
			Annotations:     maps.Clone(tmpl.GetMetadata().GetAnnotations()),
			OwnerReferences: []*apiv1.OwnerReference{ownerRef(rs)},
		},
		Spec: spec,
		Status: &apiv1.VirtualMachineInstanceStatus{
			Phase:                     apiv1.PhasePending,
			PhaseTransitionTimestamps: []*apiv1.PhaseTransitionTimestamp{{Phase: apiv1.PhasePending, Time: now}},
		},
	}
}

// deleteInstances deletes victims in parallel. Each is an expected
// deletion until the cache shows it going; one already gone is too (the
// cache still showed it, so its event is on the way).
func (c *Controller) deleteInstances(ctx context.Context, key string, victims []*apiv1.VirtualMachineInstance, why string) error {
	for _, v := range victims {
		c.dels.expect(key, informer.Key(v))
	}
	c.exp.ExpectDeletions(key, len(victims))
	err := parallel(len(victims), c.opts.Parallelism, func(i int) error {
		m := victims[i].GetMetadata()
		_, _, err := c.vmiSt.Delete(ctx, m.GetNamespace(), m.GetName(), store.DeleteOptions{UID: m.GetUid()})
		if err == nil || errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if c.dels.observed(key, informer.Key(victims[i])) {
			c.exp.DeletionFailed(key)
		}
		return fmt.Errorf("deleting %s: %w", informer.Key(victims[i]), err)
	})
	if err != nil {
		return &failure{reason: apiv1.ReasonFailedDelete, err: err}
	}
	c.log.Info("deleted instances", "replicaset", key, "count", len(victims), "why", why)
	return nil
}

// deletionOrder sorts instances by how little deleting them costs: those
// not running yet first, then those not ready, then the newest; the name
// breaks ties so the order is stable.
func deletionOrder(active []*apiv1.VirtualMachineInstance) []*apiv1.VirtualMachineInstance {
	rank := func(v *apiv1.VirtualMachineInstance) int {
		switch {
		case !running(v):
			return 0
		case !apiv1.IsConditionTrue(v.GetStatus().GetConditions(), apiv1.ConditionReady):
			return 1
		}
		return 2
	}
	out := slices.Clone(active)
	slices.SortStableFunc(out, func(a, b *apiv1.VirtualMachineInstance) int {
		return cmp.Or(
			cmp.Compare(rank(a), rank(b)),
			b.GetMetadata().GetCreationTimestamp().AsTime().Compare(a.GetMetadata().GetCreationTimestamp().AsTime()),
			cmp.Compare(a.GetMetadata().GetName(), b.GetMetadata().GetName()),
		)
	})
	return out
}

// running reports an instance placed on a node and past its start.
func running(v *apiv1.VirtualMachineInstance) bool {
	switch v.GetStatus().GetPhase() {
	case apiv1.PhaseUnset, apiv1.PhasePending, apiv1.PhaseScheduling, apiv1.PhaseScheduled:
		return false
	}
	return v.GetStatus().GetNodeName() != ""
}

// slowStart calls fn n times in batches that double from 1, each batch in
// parallel (at most limit at once), and stops after a batch in which a
// call failed. It returns how many calls it made and the batch's error.
func slowStart(n, limit int, fn func() error) (int, error) {
	done := 0
	for batch := 1; done < n; batch *= 2 {
		size := min(batch, n-done)
		err := parallel(size, limit, func(int) error { return fn() })
		done += size
		if err != nil {
			return done, err
		}
	}
	return done, nil
}

// parallel calls fn(0..n-1), at most limit at once, and returns the first
// error (by index) with a count of the others.
func parallel(n, limit int, fn func(i int) error) error {
	errs := make([]error, n)
	sem := make(chan struct{}, max(limit, 1))
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			errs[i] = fn(i)
		}()
	}
	wg.Wait()
	var first error
	failed := 0
	for _, err := range errs {
		if err != nil {
			if first == nil {
				first = err
			}
			failed++
		}
	}
	if failed > 1 {
		return fmt.Errorf("%w (and %d more failed)", first, failed-1)
	}
	return first
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
