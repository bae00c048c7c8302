package apiserver

import (
	"context"
	"errors"
	"slices"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// Revoke deletes the node's credential record. Every server's credential
// cache sees the deletion through its watch, refuses the node's next call
// and cancels its open ones (credentials.go).
func (n *nodeService) Revoke(ctx context.Context, req *apiv1.RevokeNodeRequest) (*apiv1.RevokeNodeResponse, error) {
	if req.GetName() == "" {
		return nil, status.Error(codes.InvalidArgument, "name: Required value")
	}
	serials, err := n.revoke(ctx, req.GetName())
	if err != nil {
		return nil, err
	}
	if serials == nil {
		return nil, status.Errorf(codes.NotFound, "node %s has no credential to revoke", req.GetName())
	}
	return &apiv1.RevokeNodeResponse{RevokedSerials: serials}, nil
}

// revoke returns the serials it revoked; nil when the node had none.
func (n *nodeService) revoke(ctx context.Context, name string) ([]string, error) {
	if n.s.stores.NodeCredentials == nil {
		return nil, nil
	}
	old, _, err := n.s.stores.NodeCredentials.Delete(ctx, "", name, store.DeleteOptions{})
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, toStatus(err)
	}
	serials := []string{}
	for _, c := range old.GetCertificates() {
		serials = append(serials, c.GetSerial())
	}
	n.s.log.Info("node credential revoked", "node", name, "serials", serials)
	return serials, nil
}

// Delete revokes the node and removes its Node object. Its instances are
// left to the node controller, as for a node whose lease ran out.
func (n *nodeService) Delete(ctx context.Context, req *apiv1.DeleteNodeRequest) (*apiv1.Node, error) {
	if req.GetName() == "" {
		return nil, status.Error(codes.InvalidArgument, "name: Required value")
	}
	if _, err := n.revoke(ctx, req.GetName()); err != nil {
		return nil, err
	}
	out, _, err := n.s.stores.Nodes.Delete(ctx, "", req.GetName(), store.DeleteOptions{})
	if err != nil {
		return nil, toStatus(err)
	}
	n.s.log.Info("node deleted", "node", req.GetName())
	n.forgetImagePulls(ctx, req.GetName())
	return out, nil
}

// forgetImagePulls drops a deleted node's entries from the Images'
// status: its copies went with it. Best effort; a failure is logged.
func (n *nodeService) forgetImagePulls(ctx context.Context, node string) {
	if n.s.stores.Images == nil {
		return
	}
	imgs, _, err := n.s.stores.Images.List(ctx, store.ListOptions{})
	if err != nil {
		n.s.log.Warn("listing images to forget a deleted node's pulls", "node", node, "err", err)
		return
	}
	for _, img := range imgs {
		if !slices.ContainsFunc(img.GetStatus().GetNodes(), func(e *apiv1.ImageNodeStatus) bool { return e.GetNode() == node }) {
			continue
		}
		_, err := n.s.stores.Images.GuaranteedUpdate(ctx, "", img.Metadata.Name, func(cur *apiv1.Image) (*apiv1.Image, error) {
			cur.Status.Nodes = slices.DeleteFunc(cur.GetStatus().GetNodes(), func(e *apiv1.ImageNodeStatus) bool { return e.GetNode() == node })
			return cur, nil
		})
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			n.s.log.Warn("forgetting a deleted node's pull", "node", node, "image", img.Metadata.Name, "err", err)
		}
	}
}
