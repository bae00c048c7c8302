package apiserver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

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
	if err := n.deletable(ctx, req.GetName()); err != nil {
		return nil, err
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

// deletable is the disruption gate of a node's deletion: deleting a node
// fails its instances, which is a voluntary shutdown, so a node that
// still runs one that may not be shut down (LiveMigrate, External) is
// kept until it is drained, or fenced if it is down (fencing says the
// guests are gone already; it is not gated, nor is Revoke, which answers
// a compromised node).
func (n *nodeService) deletable(ctx context.Context, node string) error {
	vmis, _, err := n.s.stores.VMIs.List(ctx, store.ListOptions{})
	if err != nil {
		return toStatus(err)
	}
	var held []string
	for _, v := range vmis {
		if v.GetStatus().GetNodeName() != node {
			continue
		}
		switch action, strategy, _ := apiv1.Eviction(v, n.s.opts.DefaultEvictionStrategy); action {
		case apiv1.EvictMigrate, apiv1.EvictExternal, apiv1.EvictRefuse:
			held = append(held, fmt.Sprintf("%s (%s)", apiv1.Ref(v.GetMetadata().GetNamespace(), v.GetMetadata().GetName()), strategy))
		}
	}
	if len(held) == 0 {
		return nil
	}
	return evictionRefused(apiv1.ReasonDisruptionBudget, fmt.Sprintf(
		"node %s still runs instances that may not be shut down: %s; drain it first (node drain), or fence it if it is down",
		node, strings.Join(held, ", ")))
}
