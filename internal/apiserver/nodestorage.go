package apiserver

import (
	"context"
	"fmt"

	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// checkNodeStorage checks a heartbeat's view of the node's storage
// classes (nil: unchanged). An invalid list is dropped, keeping the
// stored one, as an invalid image list is: the lease matters more. The
// address of each class is what the server fences the node by when it
// fails over its VMs (docs/storage.md), so a node may not claim an
// address another node reports: such an entry loses its address and
// readiness, and the node cannot have its VMs failed over from it
// safely, which placement then sees. Other nodes are read only when an
// address is new to this node.
func (n *nodeService) checkNodeStorage(ctx context.Context, name string, in *apiv1.NodeStorageList) (*apiv1.NodeStorageList, error) {
	if in == nil {
		return nil, nil
	}
	list, _ := proto.Clone(in).(*apiv1.NodeStorageList)
	validation.DiscardUnknown(list)
	if errs := validation.ValidateNodeStorage(list.GetItems(), field.NewPath("storage", "items")); len(errs) > 0 {
		n.s.log.Warn("heartbeat carries an invalid storage list; keeping the stored one", "node", name, "err", errs.ToAggregate())
		return nil, nil
	}
	cur, err := n.s.stores.Nodes.Get(ctx, "", name)
	if err != nil {
		return nil, toStatus(err)
	}
	known := map[string]bool{}
	for _, e := range cur.GetStatus().GetStorage() {
		known[e.GetAddress()] = true
	}
	fresh := false
	for _, e := range list.GetItems() {
		if e.GetAddress() != "" && !known[e.GetAddress()] {
			fresh = true
		}
	}
	if !fresh {
		return list, nil
	}
	nodes, _, err := n.s.stores.Nodes.List(ctx, store.ListOptions{})
	if err != nil {
		return nil, toStatus(err)
	}
	held := map[string]string{}
	for _, o := range nodes {
		if o.GetMetadata().GetName() == name {
			continue
		}
		for _, e := range o.GetStatus().GetStorage() {
			if e.GetAddress() != "" {
				held[e.GetAddress()] = o.GetMetadata().GetName()
			}
		}
		if a := o.GetStatus().GetMigrationAddress(); a != "" {
			held[a] = o.GetMetadata().GetName()
		}
	}
	for _, e := range list.GetItems() {
		if other, ok := held[e.GetAddress()]; ok {
			n.s.log.Warn("node reports a storage address another node holds; entry not ready", "node", name, "class", e.GetClass(), "address", e.GetAddress(), "holder", other)
			e.Ready, e.Message = false, fmt.Sprintf("address %s is node %s's: a node is fenced by its address, so two nodes cannot share one", e.GetAddress(), other)
			e.Address = ""
		}
	}
	return list, nil
}
