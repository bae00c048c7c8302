package apiserver

import (
	"context"
	"maps"
	"slices"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
)

// Label sets and removes the admins' labels of a node (admins only:
// authz.go). Its agent's registrations keep them (Register replaces only
// the node's own), so a node selector on one reaches only the nodes an
// admin labelled. The change is one GuaranteedUpdate: it applies to the
// stored labels whatever else writes the node meanwhile (heartbeats,
// registrations), and setting what is set writes nothing.
func (n *nodeService) Label(ctx context.Context, req *apiv1.LabelNodeRequest) (*apiv1.Node, error) {
	if errs := validation.ValidateLabelNode(req); len(errs) > 0 {
		return nil, validation.ToStatusError("Node", req.GetName(), errs)
	}
	name := req.GetName()
	out, err := n.s.stores.Nodes.GuaranteedUpdate(ctx, "", name, func(node *apiv1.Node) (*apiv1.Node, error) {
		labels := node.Metadata.Labels
		if labels == nil {
			labels = map[string]string{}
		}
		// In key order, so that a refusal names the same key every time.
		for _, k := range slices.Sorted(maps.Keys(req.GetSet())) {
			v := req.GetSet()[k]
			if cur, ok := labels[k]; ok && cur != v && !req.GetOverwrite() {
				return nil, status.Errorf(codes.FailedPrecondition,
					"set[%s]: node %s has %s=%s already; overwrite to change it", k, name, k, cur)
			}
			labels[k] = v
		}
		for _, k := range req.GetRemove() {
			delete(labels, k)
		}
		if errs := validation.ValidateAdminNodeLabelCount(labels, field.NewPath("metadata", "labels")); len(errs) > 0 {
			return nil, validation.ToStatusError("Node", name, errs)
		}
		node.Metadata.Labels = labels
		return node, nil
	})
	if err != nil {
		return nil, toStatus(err)
	}
	n.s.log.Info("node labelled", "node", name, "set", req.GetSet(), "removed", req.GetRemove())
	return out, nil
}
