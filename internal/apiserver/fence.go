package apiserver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// What a fence writes.
const (
	fenceReason = "FencedByOperator"
	// fenceVMIReason is KubeVirt's reason for instances failed because
	// their node is gone; the node controller uses it too.
	fenceVMIReason  = "NodeUnresponsive"
	fenceVMIMessage = "node fenced by operator"
)

// Fence records an operator's word that a node is down (powered off,
// isolated), which is what KubeVirt needs before it restarts a VM
// elsewhere: every instance still on the node is failed so that its run
// strategy starts a new one on another node. A node that is still
// heartbeating is refused; the operator is most likely pointing at the
// wrong host. Fencing again is harmless and answers the same, so a CLI
// retry after a timeout is safe. The node takes instances again once its
// agent re-registers.
func (n *nodeService) Fence(ctx context.Context, req *apiv1.FenceNodeRequest) (*apiv1.FenceNodeResponse, error) {
	name := req.GetName()
	if name == "" {
		return nil, status.Error(codes.InvalidArgument, "name: Required value")
	}
	now := n.s.opts.Clock()
	// The freshness check runs inside the compare-and-swap, against the
	// stored heartbeat, so a heartbeat that lands meanwhile is not missed.
	node, err := n.s.stores.Nodes.GuaranteedUpdate(ctx, "", name, func(node *apiv1.Node) (*apiv1.Node, error) {
		if err := n.checkDown(node, now); err != nil {
			return nil, err
		}
		node.SetUnschedulable(&apiv1.Condition{
			Type: apiv1.ConditionNodeFenced, Status: apiv1.ConditionTrue, Reason: fenceReason,
			Message: "an operator confirmed the node is down; its instances were failed",
		}, now)
		return node, nil
	})
	if err != nil {
		return nil, toStatus(err)
	}
	failed, err := n.failInstancesOn(ctx, name, now)
	if err != nil {
		// The node is marked already; fencing again finishes the job.
		return nil, toStatus(err)
	}
	n.s.log.Warn("node fenced by operator", "node", name, "failedInstances", len(failed))
	return &apiv1.FenceNodeResponse{Node: node, FailedInstances: failed}, nil
}

// checkDown refuses a node whose stored heartbeat is younger than the lease
// on this server's clock.
func (n *nodeService) checkDown(node *apiv1.Node, now time.Time) error {
	hb := node.GetStatus().GetHeartbeat()
	if hb == nil {
		return nil
	}
	if age := now.Sub(hb.AsTime()); age < n.s.opts.NodeLease {
		return status.Errorf(codes.FailedPrecondition, "node %s is Ready: last heartbeat %s ago; fence only a node that is down",
			node.GetMetadata().GetName(), age.Truncate(time.Second))
	}
	return nil
}

// failInstancesOn fails every non-final instance on node, one write each,
// and returns the instances a fence of this node has failed (by this call
// or an earlier one, so that a retry reports the same list).
func (n *nodeService) failInstancesOn(ctx context.Context, node string, now time.Time) ([]*apiv1.ObjectKey, error) {
	// All instances, not those with the node-name label: status.node_name
	// is what the node agent acts on, and a missing label must not leave a
	// copy running unnoticed.
	items, _, err := n.s.stores.VMIs.List(ctx, store.ListOptions{})
	if err != nil {
		return nil, err
	}
	var failed []*apiv1.ObjectKey
	for _, vmi := range items {
		st := vmi.GetStatus()
		if st.GetNodeName() != node {
			continue
		}
		if !apiv1.IsFinal(st.GetPhase()) {
			out, err := n.fenceInstance(ctx, vmi, node, now)
			if err != nil {
				return nil, err
			}
			if out == nil {
				continue
			}
			vmi = out
		}
		if fencedInstance(vmi) {
			m := vmi.GetMetadata()
			failed = append(failed, &apiv1.ObjectKey{Namespace: m.GetNamespace(), Name: m.GetName()})
		}
	}
	return failed, nil
}

func fencedInstance(vmi *apiv1.VirtualMachineInstance) bool {
	st := vmi.GetStatus()
	return st.GetPhase() == apiv1.PhaseFailed && st.GetReason() == fenceVMIReason && st.GetMessage() == fenceVMIMessage
}

// fenceInstance fails vmi if it is still the same instance on node and not
// final; it returns the stored state, or nil when the instance is gone.
func (n *nodeService) fenceInstance(ctx context.Context, vmi *apiv1.VirtualMachineInstance, node string, now time.Time) (*apiv1.VirtualMachineInstance, error) {
	m := vmi.GetMetadata()
	out, err := n.s.stores.VMIs.GuaranteedUpdate(ctx, m.GetNamespace(), m.GetName(), func(cur *apiv1.VirtualMachineInstance) (*apiv1.VirtualMachineInstance, error) {
		cur.FailOnNode(m.GetUid(), node, fenceVMIReason, fenceVMIMessage, now)
		return cur, nil
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("failing instance %s/%s on fenced node %s: %w", m.GetNamespace(), m.GetName(), node, err)
	}
	return out, nil
}
