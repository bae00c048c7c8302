package replicaset

import (
	"context"
	"errors"

	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// messagePaused is KubeVirt's ReplicaPaused message.
const messagePaused = "Controller got paused"

// updateStatus writes rs's status from its active instances and the
// pass's failure, if anything in it changed. A clean pass (one that
// scaled, or had nothing to do, without error) clears ReplicaFailure; one
// that did not get to scale leaves it as it was.
func (c *Controller) updateStatus(ctx context.Context, key string, rs *apiv1.VirtualMachineInstanceReplicaSet,
	active []*apiv1.VirtualMachineInstance, passErr error, clean bool) error {
	next := proto.Clone(rs).(*apiv1.VirtualMachineInstanceReplicaSet)
	if next.Status == nil {
		next.Status = &apiv1.VirtualMachineInstanceReplicaSetStatus{}
	}
	st := next.Status
	st.Replicas = int32(len(active))
	st.ReadyReplicas = 0
	for _, v := range active {
		if apiv1.IsConditionTrue(v.GetStatus().GetConditions(), apiv1.ConditionReady) {
			st.ReadyReplicas++
		}
	}
	st.LabelSelector = apiv1.SelectorString(rs.GetSpec().GetSelector())
	st.ObservedGeneration = rs.GetMetadata().GetGeneration()

	now := c.opts.Clock()
	if rs.GetSpec().GetPaused() {
		st.Conditions = apiv1.SetCondition(st.Conditions, &apiv1.Condition{
			Type: apiv1.ConditionReplicaPaused, Status: apiv1.ConditionTrue,
			Reason: apiv1.ReasonReplicaPaused, Message: messagePaused,
		}, now)
	} else {
		st.Conditions = apiv1.RemoveCondition(st.Conditions, apiv1.ConditionReplicaPaused)
	}
	var f *failure
	switch {
	case errors.As(passErr, &f):
		st.Conditions = apiv1.SetCondition(st.Conditions, &apiv1.Condition{
			Type: apiv1.ConditionReplicaFailure, Status: apiv1.ConditionTrue,
			Reason: f.reason, Message: f.err.Error(),
		}, now)
	case clean:
		st.Conditions = apiv1.RemoveCondition(st.Conditions, apiv1.ConditionReplicaFailure)
	}
	if proto.Equal(rs, next) {
		return nil
	}
	_, err := c.writeReplicaSet(ctx, key, next)
	return err
}
