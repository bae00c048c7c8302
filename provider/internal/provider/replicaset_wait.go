package provider

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
)

// Waiting for a replica set: its instances made and ready, or a reason
// they cannot get there. The judgement (judgeReplicaSet) is a pure
// function of what readReplicaSet read.

// replicaSetView is a replica set and its instances, as a wait reads them.
type replicaSetView struct {
	rs *apiv1.VirtualMachineInstanceReplicaSet
	// vmis are its instances, by name.
	vmis []*apiv1.VirtualMachineInstance
}

// readReplicaSet reads replica set ns/name and its instances.
func readReplicaSet(ctx context.Context, c *client.Client, ns, name string) (replicaSetView, error) {
	rs, err := c.ReplicaSets.Get(ctx, &apiv1.GetReplicaSetRequest{Key: &apiv1.ObjectKey{Namespace: ns, Name: name}})
	if err != nil {
		return replicaSetView{}, err
	}
	vmis, err := replicaSetInstances(ctx, c, rs)
	return replicaSetView{rs: rs, vmis: vmis}, err
}

// replicaSetInstances lists the instances rs controls, by name: those its
// selector matches in its namespace whose controller is rs (by uid).
func replicaSetInstances(ctx context.Context, c *client.Client, rs *apiv1.VirtualMachineInstanceReplicaSet) ([]*apiv1.VirtualMachineInstance, error) {
	md := rs.GetMetadata()
	list, _, err := client.ListAll(ctx, &apiv1.ListOptions{
		Namespace: md.GetNamespace(), LabelSelector: apiv1.SelectorString(rs.GetSpec().GetSelector()),
	}, func(ctx context.Context, o *apiv1.ListOptions) (*apiv1.ListVirtualMachineInstancesResponse, error) {
		return c.VMIs.List(ctx, &apiv1.ListVirtualMachineInstancesRequest{Options: o})
	})
	if err != nil {
		return nil, err
	}
	var out []*apiv1.VirtualMachineInstance
	for _, vmi := range list {
		if controlledBy(vmi.GetMetadata(), apiv1.KindReplicaSet, md.GetUid()) {
			out = append(out, vmi)
		}
	}
	slices.SortFunc(out, func(a, b *apiv1.VirtualMachineInstance) int {
		return strings.Compare(a.GetMetadata().GetName(), b.GetMetadata().GetName())
	})
	return out, nil
}

// judgeReplicaSet decides whether the replica set has reached t: the
// controller has acted on t.generation and the replica set has replicas
// instances, ready. It fails when the controller reports a failure
// (ReplicaFailure), or an instance failed or no node can take it: the
// controller would only replace it with another that fares the same. A
// paused replica set is done once the controller has seen the change.
func judgeReplicaSet(t replicaTarget, v replicaSetView) verdict {
	rs := v.rs
	st := rs.GetStatus()
	out := verdict{state: describeReplicaSet(v)}
	if st.GetObservedGeneration() < t.generation {
		return out
	}
	if f := apiv1.FindCondition(st.GetConditions(), apiv1.ConditionReplicaFailure); f.GetStatus() == apiv1.ConditionTrue {
		out.err = fmt.Errorf("the replica set controller reports %s: %s", f.GetReason(), f.GetMessage())
		return out
	}
	for _, vmi := range v.vmis {
		if err := instanceFailure(vmi); err != nil {
			out.err = err
			return out
		}
	}
	if rs.GetSpec().GetPaused() {
		out.done = true
		return out
	}
	want := rs.GetSpec().DesiredReplicas()
	out.done = st.GetReplicas() == want && (!t.ready || st.GetReadyReplicas() == want)
	return out
}

// instanceFailure says why an instance of a replica set cannot run, or
// nil.
func instanceFailure(vmi *apiv1.VirtualMachineInstance) error {
	name := vmi.GetMetadata().GetName()
	st := vmi.GetStatus()
	sched := apiv1.FindCondition(st.GetConditions(), apiv1.ConditionPodScheduled)
	switch {
	case st.GetPhase() == apiv1.PhaseFailed:
		return fmt.Errorf("instance %s failed (%s). Check the images, kernel and boot settings, and the node agent's log", name, instanceReason(vmi))
	case vmi.GetMetadata().GetDeletionTimestamp() == nil && !apiv1.IsFinal(st.GetPhase()) &&
		sched.GetStatus() == apiv1.ConditionFalse && sched.GetReason() == "Unschedulable":
		return fmt.Errorf("no node can run instance %s (Unschedulable): %s. Check node_selector, memory, cpu, "+
			"the images and the bridges and libvirt networks the template names against the nodes (data source "+
			"virtplane_nodes)", name, strings.TrimSuffix(cmp.Or(sched.GetMessage(), "the placement controller found no fitting node"), "."))
	}
	return nil
}

// describeReplicaSet renders what the replica set is doing: its counts
// and its instances' phases.
func describeReplicaSet(v replicaSetView) string {
	rs := v.rs
	st := rs.GetStatus()
	s := fmt.Sprintf("%d of %d instances, %d ready", st.GetReplicas(), rs.GetSpec().DesiredReplicas(), st.GetReadyReplicas())
	if rs.GetSpec().GetPaused() {
		s += ", paused"
	}
	return s + describeReplicas("instances", v.vmis, func(vmi *apiv1.VirtualMachineInstance) string {
		return vmi.GetMetadata().GetName() + " " + cmp.Or(vmi.GetStatus().GetPhase(), apiv1.PhasePending)
	}, st.GetConditions())
}

// replicaSetChanges signals whenever the replica set or one of the
// instances its selector matches changes, until ctx ends.
func replicaSetChanges(ctx context.Context, c *client.Client, rs *apiv1.VirtualMachineInstanceReplicaSet) <-chan struct{} {
	ch, notify := notifier()
	md := rs.GetMetadata()
	notifyOnEvents(ctx, notify, func(ctx context.Context) (apiv1.ReplicaSets_WatchClient, error) {
		return c.ReplicaSets.Watch(ctx, &apiv1.WatchReplicaSetsRequest{Options: &apiv1.WatchOptions{Namespace: md.GetNamespace(), Name: md.GetName()}})
	})
	notifyOnEvents(ctx, notify, func(ctx context.Context) (apiv1.VirtualMachineInstances_WatchClient, error) {
		return c.VMIs.Watch(ctx, &apiv1.WatchVirtualMachineInstancesRequest{Options: &apiv1.WatchOptions{
			Namespace: md.GetNamespace(), LabelSelector: apiv1.SelectorString(rs.GetSpec().GetSelector()),
		}})
	})
	return ch
}

// waitReplicaSet waits until judge says done or fails, or ctx ends
// (waitUntil), and returns what it read last. rs is the replica set as
// written.
func waitReplicaSet(ctx context.Context, c *client.Client, rs *apiv1.VirtualMachineInstanceReplicaSet, judge func(replicaSetView) verdict) (replicaSetView, error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ns, name := rs.GetMetadata().GetNamespace(), rs.GetMetadata().GetName()
	return waitUntil(ctx, "replica set "+apiv1.Ref(ns, name), replicaSetChanges(wctx, c, rs),
		func(ctx context.Context) (replicaSetView, error) { return readReplicaSet(ctx, c, ns, name) }, judge)
}

// replicaSetTargetDescription says in words what a wait for rs waits for.
func replicaSetTargetDescription(rs *apiv1.VirtualMachineInstanceReplicaSet) string {
	if rs.GetSpec().GetPaused() {
		return "to be seen by its controller (paused)"
	}
	return fmt.Sprintf("to have %d ready instances", rs.GetSpec().DesiredReplicas())
}
