package apiserver

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// Cordon keeps new instances off a node: the scheduler and the migration
// target choice skip nodes with spec.unschedulable (KubeVirt's cordon is
// the Kubernetes node's). Instances running there stay; Drain moves them.
func (n *nodeService) Cordon(ctx context.Context, req *apiv1.CordonNodeRequest) (*apiv1.Node, error) {
	return n.setNodeSpec(ctx, req.GetName(), "cordoned", func(node *apiv1.Node) { node.Spec.Unschedulable = true })
}

// Uncordon lets new instances on a node again and cancels its drain: the
// evacuation controller clears the marks and cancels the migrations it
// made for it.
func (n *nodeService) Uncordon(ctx context.Context, req *apiv1.CordonNodeRequest) (*apiv1.Node, error) {
	return n.setNodeSpec(ctx, req.GetName(), "uncordoned", func(node *apiv1.Node) { node.Spec.Unschedulable, node.Spec.Drain = false, false })
}

// Drain cordons a node and has the evacuation controller move every
// instance off it by its eviction strategy.
func (n *nodeService) Drain(ctx context.Context, req *apiv1.CordonNodeRequest) (*apiv1.Node, error) {
	return n.setNodeSpec(ctx, req.GetName(), "draining", func(node *apiv1.Node) {
		if !node.Spec.Drain && node.Status != nil {
			// A new drain: the record of an earlier one (drained, say)
			// must not answer for it.
			node.Status.Evacuation = nil
		}
		node.Spec.Unschedulable, node.Spec.Drain = true, true
	})
}

// setNodeSpec changes the operators' spec fields; the node agent's
// registrations keep them. Setting them to what they are writes nothing
// (GuaranteedUpdate skips an unchanged object).
func (n *nodeService) setNodeSpec(ctx context.Context, name, verb string, set func(*apiv1.Node)) (*apiv1.Node, error) {
	if name == "" {
		return nil, status.Error(codes.InvalidArgument, "name: Required value")
	}
	node, err := n.s.stores.Nodes.GuaranteedUpdate(ctx, "", name, func(node *apiv1.Node) (*apiv1.Node, error) {
		if node.Spec == nil {
			node.Spec = &apiv1.NodeSpec{}
		}
		set(node)
		return node, nil
	})
	if err != nil {
		return nil, toStatus(err)
	}
	n.s.log.Info("node "+verb, "node", name)
	return node, nil
}
