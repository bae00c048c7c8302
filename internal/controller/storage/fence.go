package storage

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"google.golang.org/protobuf/types/known/timestamppb"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// Fence cuts node off the rbd classes among classes before instances with
// volumes there run on another node: the node's address (as it reports
// it towards each class) is blocklisted, so that a QEMU still running on
// an isolated host can no longer write (exclusive-lock alone does not
// stop it; docs/storage.md). The fence is recorded in the class's status
// first, so that it is lifted whatever happens next, and placement keeps
// instances of the class off the node until it is. Shared filesystems
// need nothing here. An error means the node is not fenced: its instances
// must not run elsewhere yet.
func (c *Controller) Fence(ctx context.Context, node *apiv1.Node, classes []string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	name := node.GetMetadata().GetName()
	var errs []error
	for _, class := range classes {
		sc, ok := c.classes.Get("", class)
		if !ok {
			errs = append(errs, fmt.Errorf("storage class %s does not exist", class))
			continue
		}
		if sc.GetSpec().GetRbd() == nil {
			continue
		}
		addr := reportedAddress(node, class)
		if !addr.IsValid() {
			errs = append(errs, fmt.Errorf("storage class %s: node %s reported no address towards it, so it cannot be fenced there; fence the host and run `virtplane-agent node fence %s`", class, name, name))
			continue
		}
		if err := c.fenceOne(ctx, sc, node, addr); err != nil {
			errs = append(errs, fmt.Errorf("storage class %s: %w", class, err))
		}
	}
	return errors.Join(errs...)
}

// reportedAddress is node's address towards class, as it last reported it.
func reportedAddress(node *apiv1.Node, class string) netip.Addr {
	for _, s := range node.GetStatus().GetStorage() {
		if s.GetClass() == class {
			a, _ := netip.ParseAddr(s.GetAddress())
			return a
		}
	}
	return netip.Addr{}
}

func (c *Controller) fenceOne(ctx context.Context, sc *apiv1.StorageClass, node *apiv1.Node, addr netip.Addr) error {
	name := node.GetMetadata().GetName()
	now := c.opts.Clock()
	// Recorded before the blocklist: a fence that exists in Ceph but not
	// here would never be lifted.
	_, err := c.store.GuaranteedUpdate(ctx, "", sc.GetMetadata().GetName(), func(cur *apiv1.StorageClass) (*apiv1.StorageClass, error) {
		if cur.Status == nil {
			cur.Status = &apiv1.StorageClassStatus{}
		}
		for _, f := range cur.Status.Fences {
			if f.GetNode() == name && f.GetAddress() == addr.String() {
				return cur, nil
			}
		}
		cur.Status.Fences = append(cur.Status.Fences, &apiv1.StorageFence{
			Node: name, Address: addr.String(), Since: timestamppb.New(now), Registrations: node.GetStatus().GetRegistrations(),
		})
		return cur, nil
	})
	if err != nil {
		return fmt.Errorf("recording the fence: %w", err)
	}
	conn, err := c.conn(sc)
	if err != nil {
		return err
	}
	if err := conn.BlocklistAdd(ctx, addr, c.opts.FenceExpiry); err != nil {
		return fmt.Errorf("blocklisting %s: %w", addr, err)
	}
	c.log.Warn("node fenced from storage", "class", sc.GetMetadata().GetName(), "node", name, "address", addr)
	return nil
}
