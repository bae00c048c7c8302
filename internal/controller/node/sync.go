package node

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller"
	"github.com/virtplane/terraform-provider-virtplane/internal/informer"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// ReasonNodeUnresponsive is KubeVirt's reason, on the node's Ready
// condition and on the VMIs failed because of it.
const ReasonNodeUnresponsive = "NodeUnresponsive"

// Reconcile checks one node's heartbeat against this controller's clock.
func (c *Controller) Reconcile(ctx context.Context, key string) (controller.Result, error) {
	node, ok := c.nodes.GetByKey(key)
	if !ok {
		// Its VMIs are the VMI controller's (NodeDeleted).
		c.forget(key)
		return controller.Result{}, nil
	}
	now := c.opts.Clock()
	obs := c.observe(node, now)
	if silent := now.Sub(obs.at); silent < c.opts.Lease {
		// Look again exactly when the lease runs out; a heartbeat
		// before that enqueues the node anyway.
		return controller.Result{RequeueAfter: c.opts.Lease - silent}, nil
	}
	waiting, due := c.classify(node)
	if !isMarkedUnresponsive(node) {
		beat, err := c.markNotReady(ctx, node, obs, now)
		if err != nil || beat {
			return controller.Result{RequeueAfter: c.opts.Lease}, err
		}
		c.log.Warn("node unresponsive", "node", key, "silentFor", now.Sub(obs.at),
			"restartElsewhere", len(due), "waiting", len(waiting))
		for _, v := range waiting {
			c.log.Info("vmi waits for its node to return or to be fenced (node_failure_policy Wait)",
				"vmi", informer.Key(v), "node", key)
		}
	}
	return c.failRestartElsewhere(ctx, key, obs, due, now)
}

// classify splits the node's non-final VMIs by their VM's policy.
func (c *Controller) classify(node *apiv1.Node) (waiting, restart []*apiv1.VirtualMachineInstance) {
	for _, v := range c.vmis.ByIndex(controller.VMINodeIndex, node.GetMetadata().GetName()) {
		switch {
		case apiv1.IsFinal(v.GetStatus().GetPhase()):
		case c.policyOf(v) == apiv1.NodeFailurePolicyRestartElsewhere:
			restart = append(restart, v)
		default:
			waiting = append(waiting, v)
		}
	}
	return waiting, restart
}

// policyOf is the node_failure_policy of v's VM: the VM of the same
// namespace and name that v names as its owner. A VMI without one waits:
// nothing vouches that anything would restart it or that it may be killed.
func (c *Controller) policyOf(v *apiv1.VirtualMachineInstance) string {
	m := v.GetMetadata()
	vm, ok := c.vms.Get(m.GetNamespace(), m.GetName())
	if !ok {
		return apiv1.NodeFailurePolicyWait
	}
	if apiv1.IsControlledBy(v, vm) && vm.GetSpec().GetNodeFailurePolicy() == apiv1.NodeFailurePolicyRestartElsewhere {
		return apiv1.NodeFailurePolicyRestartElsewhere
	}
	return apiv1.NodeFailurePolicyWait
}

func isMarkedUnresponsive(node *apiv1.Node) bool {
	ready := apiv1.FindCondition(node.GetStatus().GetConditions(), apiv1.ConditionReady)
	return ready.GetStatus() == apiv1.ConditionFalse && ready.GetReason() == ReasonNodeUnresponsive &&
		!node.GetStatus().GetSchedulable()
}

// markNotReady writes Ready=False and schedulable=false, unless the stored
// node shows a heartbeat this controller has not observed: then the API has
// set Ready=True with it and the two writers must not fight. beat reports
// that case.
func (c *Controller) markNotReady(ctx context.Context, node *apiv1.Node, obs observation, now time.Time) (beat bool, err error) {
	name := node.GetMetadata().GetName()
	cur, err := c.nodeStore.GuaranteedUpdate(ctx, "", name, func(n *apiv1.Node) (*apiv1.Node, error) {
		if !proto.Equal(n.GetStatus().GetHeartbeat(), obs.heartbeat) {
			return n, nil
		}
		n.SetUnschedulable(&apiv1.Condition{
			Type: apiv1.ConditionReady, Status: apiv1.ConditionFalse, Reason: ReasonNodeUnresponsive,
			Message: fmt.Sprintf("no heartbeat from the node agent for longer than the node lease (%s)", c.opts.Lease),
		}, now)
		return n, nil
	})
	if errors.Is(err, store.ErrNotFound) {
		return true, nil // deleted meanwhile; the delete event ends it
	}
	if err != nil {
		return false, fmt.Errorf("marking node %s not ready: %w", name, err)
	}
	return c.observe(cur, now).at != obs.at, nil
}

// failRestartElsewhere fails the RestartElsewhere VMIs once Lease +
// FenceMargin have passed, on this controller's clock, since it saw the
// node's heartbeat change: by then the node agent, whose lease ran from
// before that heartbeat reached the store, has destroyed their domains.
func (c *Controller) failRestartElsewhere(ctx context.Context, name string, obs observation,
	due []*apiv1.VirtualMachineInstance, now time.Time) (controller.Result, error) {
	if len(due) == 0 {
		return controller.Result{}, nil
	}
	deadline := obs.at.Add(c.opts.Lease + c.opts.FenceMargin)
	if now.Before(deadline) {
		return controller.Result{RequeueAfter: deadline.Sub(now)}, nil
	}
	// The cache may lag (a broken watch); a heartbeat the node got
	// through before its lease ran out is in the store, and a node that
	// renewed in time has not fenced itself. A linearizable read settles it.
	cur, err := c.nodeStore.Get(ctx, "", name)
	if errors.Is(err, store.ErrNotFound) {
		return controller.Result{}, nil
	}
	if err != nil {
		return controller.Result{}, fmt.Errorf("confirming node %s is silent: %w", name, err)
	}
	if c.observe(cur, now).at != obs.at {
		c.log.Info("node heartbeat seen in the store but not yet in the cache; not failing its VMIs", "node", name)
		return controller.Result{RequeueAfter: c.opts.Lease}, nil
	}
	due, retry := c.fenceStorage(ctx, cur, due)
	// One write per VMI, one after the other, as KubeVirt does to avoid
	// update storms.
	for _, v := range due {
		if err := c.failVMI(ctx, v, name, now.Sub(obs.at), now); err != nil {
			return controller.Result{}, err
		}
	}
	if retry {
		return controller.Result{RequeueAfter: c.opts.FenceRetry}, nil
	}
	return controller.Result{}, nil
}

// fenceStorage cuts the node off the storage classes of the instances
// about to run elsewhere, and returns those that may: all of them once
// the fence holds, else only those with no volume on a class (their
// disks die with the node). An instance whose volumes another host can
// reach must never run twice: while its node's QEMU may still write
// there, it waits, and retry says to try again.
func (c *Controller) fenceStorage(ctx context.Context, node *apiv1.Node, due []*apiv1.VirtualMachineInstance) (ok []*apiv1.VirtualMachineInstance, retry bool) {
	var classes []string
	for _, v := range due {
		for _, class := range validation.StorageClassRefs(v.GetSpec()) {
			if !slices.Contains(classes, class) {
				classes = append(classes, class)
			}
		}
	}
	if len(classes) == 0 {
		return due, false
	}
	err := errors.New("no storage fencer")
	if c.opts.Fencer != nil {
		err = c.opts.Fencer.Fence(ctx, node, classes)
	}
	if err == nil {
		return due, false
	}
	for _, v := range due {
		if len(validation.StorageClassRefs(v.GetSpec())) == 0 {
			ok = append(ok, v)
		} else {
			c.log.Warn("not failing over an instance until its node is fenced from its storage", "vmi", informer.Key(v),
				"node", node.GetMetadata().GetName(), "err", err)
		}
	}
	return ok, true
}

func (c *Controller) failVMI(ctx context.Context, v *apiv1.VirtualMachineInstance, node string, silent time.Duration, now time.Time) error {
	m := v.GetMetadata()
	msg := fmt.Sprintf("node %s sent no heartbeat for %s; its agent destroyed the domain when its lease expired (node_failure_policy RestartElsewhere)",
		node, silent.Round(time.Second))
	var failed bool
	_, err := c.vmiStore.GuaranteedUpdate(ctx, m.GetNamespace(), m.GetName(), func(cur *apiv1.VirtualMachineInstance) (*apiv1.VirtualMachineInstance, error) {
		failed = cur.FailOnNode(m.GetUid(), node, ReasonNodeUnresponsive, msg, now)
		return cur, nil
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("failing vmi %s on unresponsive node %s: %w", informer.Key(v), node, err)
	}
	if failed { // else another instance now, or it ended meanwhile
		c.log.Warn("vmi failed: node unresponsive", "vmi", informer.Key(v), "node", node)
	}
	return nil
}
