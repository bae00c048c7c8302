package pool

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// messagePaused is ReplicaPaused's message (KubeVirt's).
const messagePaused = "Pool controller is paused"

// syncError is a failed step, reported in the pool's ReplicaFailure
// condition. Other errors (conflicts: the cache was behind) only requeue.
type syncError struct {
	reason string
	err    error
}

func (e *syncError) Error() string { return fmt.Sprintf("%s: %v", e.reason, e.err) }
func (e *syncError) Unwrap() error { return e.err }

// updateStatus writes the pool's status from what this pass saw, if it
// changed.
func (c *Controller) updateStatus(ctx context.Context, key string, pool *apiv1.VirtualMachinePool, ms []member, cur string, syncErr error) error {
	next := proto.Clone(pool).(*apiv1.VirtualMachinePool)
	if next.Status == nil {
		next.Status = &apiv1.VirtualMachinePoolStatus{}
	}
	st := next.Status
	st.Replicas, st.ReadyReplicas, st.UpdatedReplicas = 0, 0, 0
	for _, m := range ms {
		if m.deleting() {
			continue
		}
		st.Replicas++
		if m.ready() {
			st.ReadyReplicas++
		}
		if m.updated(cur) {
			st.UpdatedReplicas++
		}
	}
	st.LabelSelector = apiv1.SelectorString(pool.GetSpec().GetSelector())
	st.ObservedGeneration = pool.GetMetadata().GetGeneration()
	if st.Replicas == pool.GetSpec().DesiredReplicas() && st.UpdatedReplicas == st.Replicas {
		// Every VM there should be runs the current template: the
		// rollout of this generation is done.
		st.TemplateGeneration = pool.GetMetadata().GetGeneration()
	}

	now := c.opts.Clock()
	if pool.GetSpec().GetPaused() {
		st.Conditions = apiv1.SetCondition(st.Conditions, &apiv1.Condition{
			Type: apiv1.ConditionReplicaPaused, Status: apiv1.ConditionTrue, Reason: apiv1.ReasonReplicaPaused, Message: messagePaused,
		}, now)
	} else {
		st.Conditions = apiv1.RemoveCondition(st.Conditions, apiv1.ConditionReplicaPaused)
	}
	var se *syncError
	switch {
	case errors.As(syncErr, &se):
		st.Conditions = apiv1.SetCondition(st.Conditions, &apiv1.Condition{
			Type: apiv1.ConditionReplicaFailure, Status: apiv1.ConditionTrue, Reason: se.reason, Message: se.err.Error(),
		}, now)
	case syncErr == nil:
		st.Conditions = apiv1.RemoveCondition(st.Conditions, apiv1.ConditionReplicaFailure)
	}
	if proto.Equal(pool, next) {
		return nil
	}
	return c.writePool(ctx, key, next)
}
