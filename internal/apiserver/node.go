package apiserver

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

type nodeService struct {
	apiv1.UnimplementedNodesServer
	s *Server
	// imagePolicy is the server's image policy as every heartbeat's
	// answer carries it, built once: the options do not change.
	imagePolicy *apiv1.ImagePullPolicy
}

func newNodeService(s *Server) apiv1.NodesServer {
	return &nodeService{s: s, imagePolicy: s.opts.ImagePolicy.Proto()}
}

func (n *nodeService) Get(ctx context.Context, req *apiv1.GetNodeRequest) (*apiv1.Node, error) {
	if errs := validation.ValidateNodeName(req.GetName(), field.NewPath("name")); len(errs) > 0 {
		return nil, validation.ToStatusError("Node", req.GetName(), errs)
	}
	out, err := n.s.stores.Nodes.Get(ctx, "", req.GetName())
	return out, toStatus(err)
}

func (n *nodeService) List(ctx context.Context, req *apiv1.ListNodesRequest) (*apiv1.ListNodesResponse, error) {
	if err := validation.ToStatusError("LabelSelector", "", validation.ValidateLabelSelector(req.GetLabelSelector(), field.NewPath("label_selector"))); err != nil {
		return nil, err
	}
	items, rev, err := n.s.stores.Nodes.List(ctx, store.ListOptions{LabelSelector: req.GetLabelSelector()})
	if err != nil {
		return nil, toStatus(err)
	}
	return &apiv1.ListNodesResponse{Items: items, ResourceVersion: rev}, nil
}

func (n *nodeService) Watch(req *apiv1.WatchNodesRequest, stream apiv1.Nodes_WatchServer) error {
	return clusterWatch(stream.Context(), n.s.stores.Nodes, req.GetOptions(), func(t apiv1.EventType, obj *apiv1.Node, rev int64) error {
		return stream.Send(&apiv1.NodeEvent{Type: t, Object: obj, ResourceVersion: rev})
	})
}

// Register creates the node or refreshes what its agent reports. Spec
// (unschedulable) and the admins' labels belong to operators and are
// kept: a node sends only its own labels (ValidateNode refuses any other),
// which replace those it registered before.
func (n *nodeService) Register(ctx context.Context, req *apiv1.RegisterNodeRequest) (*apiv1.Node, error) {
	in, _ := proto.Clone(req.GetNode()).(*apiv1.Node)
	// What the schema does not know is not stored (node_info and images
	// are kept as sent).
	validation.DiscardUnknown(in)
	if errs := validation.ValidateNode(in); len(errs) > 0 {
		return nil, validation.ToStatusError("Node", in.GetMetadata().GetName(), errs)
	}
	// The check that no other node holds the migration address and the
	// write that claims it are one step here; across servers the
	// migration controller checks again at every handoff.
	n.s.registerMu.Lock()
	defer n.s.registerMu.Unlock()
	if err := n.checkMigrationAddress(ctx, in); err != nil {
		return nil, err
	}
	now := n.s.opts.Clock()
	name := in.Metadata.Name
	refresh := func(node *apiv1.Node) *apiv1.Node {
		node.Metadata.Labels = withNodeOwnLabels(node.Metadata.Labels, in.Metadata.Labels)
		// Every node carries its own name as a label, so a node selector
		// can pin a VM to one node (a VM with persistent volumes is
		// pinned to the node that holds them).
		node.Metadata.Labels[apiv1.LabelNodeName] = name
		st := node.Status
		if st == nil {
			st = &apiv1.NodeStatus{}
			node.Status = st
		}
		st.Capacity = in.GetStatus().GetCapacity()
		st.Allocatable = in.GetStatus().GetAllocatable()
		st.NodeInfo = in.GetStatus().GetNodeInfo()
		st.Address = in.GetStatus().GetAddress()
		st.MigrationAddress = in.GetStatus().GetMigrationAddress()
		st.ExportAddress = in.GetStatus().GetExportAddress()
		st.ExportCertificate = in.GetStatus().GetExportCertificate()
		st.Schedulable = in.GetStatus().GetSchedulable()
		// The agent lists its image directory at start, so registering
		// replaces the list, an empty one included.
		st.Images = in.GetStatus().GetImages()
		// So is its network inventory (heartbeats carry later changes).
		st.Bridges, st.Networks = sortedNames(in.GetStatus().GetBridges()), sortedNames(in.GetStatus().GetNetworks())
		// A fenced node re-joining has restarted its agent, which destroys
		// the domains of the instances the fence failed; it may take new
		// ones again (see fence.go).
		st.Conditions = apiv1.RemoveCondition(st.Conditions, apiv1.ConditionNodeFenced)
		// Counted for the storage fences (storage.proto), which the same
		// restart lifts.
		st.Registrations++
		n.beat(st, now)
		return node
	}
	for {
		out, err := n.s.stores.Nodes.GuaranteedUpdate(ctx, "", name, func(cur *apiv1.Node) (*apiv1.Node, error) {
			return refresh(cur), nil
		})
		if errors.Is(err, store.ErrNotFound) {
			fresh := &apiv1.Node{Metadata: &apiv1.ObjectMeta{Name: name}, Spec: &apiv1.NodeSpec{}}
			out, err = n.s.stores.Nodes.Create(ctx, refresh(fresh))
			if errors.Is(err, store.ErrAlreadyExists) {
				continue // raced with ourselves on another server
			}
		}
		if err != nil {
			return nil, toStatus(err)
		}
		n.s.log.Info("node registered", "node", name, "migration_address", out.GetStatus().GetMigrationAddress())
		return out, nil
	}
}

// checkMigrationAddress refuses a migration address the operator's
// networks do not hold (--migration-networks) or that another node
// registered: every migration to this node goes to it, so a node claiming
// another host's address would have sources send guests there.
func (n *nodeService) checkMigrationAddress(ctx context.Context, in *apiv1.Node) error {
	a, name := in.GetStatus().GetMigrationAddress(), in.GetMetadata().GetName()
	if a == "" {
		return nil
	}
	invalid := func(why string) error {
		return validation.ToStatusError("Node", name, field.ErrorList{field.Invalid(field.NewPath("status", "migration_address"), a, why)})
	}
	if err := n.s.opts.MigrationDestinations.CheckAddress(a); err != nil {
		return invalid(err.Error())
	}
	// A node keeps the address it holds: agents register at every start
	// with the same one, and listing every Node for each (O(nodes), under
	// registerMu) made a fleet restarting at once O(nodes²). Only a claim
	// of a new address reads the others. Two nodes that both hold one (two
	// servers raced) still start; no migration goes to either (the
	// controller's handoff check).
	cur, err := n.s.stores.Nodes.Get(ctx, "", name)
	switch {
	case err == nil && cur.GetStatus().GetMigrationAddress() == a:
		return nil
	case err != nil && !errors.Is(err, store.ErrNotFound):
		return toStatus(err)
	}
	nodes, _, err := n.s.stores.Nodes.List(ctx, store.ListOptions{})
	if err != nil {
		return toStatus(err)
	}
	for _, o := range nodes {
		if o.GetMetadata().GetName() != name && o.GetStatus().GetMigrationAddress() == a {
			return invalid(fmt.Sprintf("node %s registered it: a node may not claim another host's address", o.GetMetadata().GetName()))
		}
	}
	return nil
}

// withNodeOwnLabels is labels with the node's own (validation.NodeOwnedLabel)
// replaced by own, so that a node can drop one it set before; the others
// (the admins', the server's) stay as they are. A legacy key is stored
// under the key that replaced it, unless own has that key too.
func withNodeOwnLabels(labels, own map[string]string) map[string]string {
	if labels == nil {
		labels = map[string]string{}
	}
	maps.DeleteFunc(labels, func(k, _ string) bool { return validation.NodeOwnedLabel(k) })
	for k, v := range own {
		if !validation.NodeOwnedLabel(k) { // ValidateNode refused it
			continue
		}
		key := validation.NodeLabelKey(k)
		if _, newer := own[key]; key != k && newer {
			continue
		}
		labels[key] = v
	}
	return labels
}

// beat records a heartbeat and extends the fencing lease.
func (n *nodeService) beat(st *apiv1.NodeStatus, now time.Time) {
	st.Heartbeat = timestamppb.New(now)
	st.LeaseExpiry = timestamppb.New(now.Add(n.s.opts.NodeLease))
	st.Conditions = apiv1.SetCondition(st.Conditions, &apiv1.Condition{
		Type: "Ready", Status: apiv1.ConditionTrue, Reason: "NodeAgentHeartbeat",
		Message: "node agent is posting heartbeats",
	}, now)
}

func (n *nodeService) Heartbeat(ctx context.Context, req *apiv1.HeartbeatRequest) (*apiv1.HeartbeatResponse, error) {
	if errs := validation.ValidateHeartbeat(req.GetName(), req.GetAllocatable(), nil); len(errs) > 0 {
		return nil, validation.ToStatusError("Node", req.GetName(), errs)
	}
	imgs, _ := proto.Clone(req.GetImages()).(*apiv1.NodeImageList)
	validation.DiscardUnknown(imgs)
	if errs := validation.ValidateNodeImages(imgs.GetItems(), field.NewPath("images", "items")); len(errs) > 0 {
		// Refusing the heartbeat would let the lease run out over an
		// inventory; the stored list stays instead.
		n.s.log.Warn("heartbeat carries an invalid image list; keeping the stored one", "node", req.GetName(), "err", errs.ToAggregate())
		imgs = nil
	}
	nets := req.GetNetworkInventory()
	if errs := validation.ValidateNodeNetworks(nets.GetBridges(), nets.GetNetworks(),
		field.NewPath("network_inventory", "bridges"), field.NewPath("network_inventory", "networks")); len(errs) > 0 {
		// As with images: the lease matters more than the inventory.
		n.s.log.Warn("heartbeat carries an invalid network inventory; keeping the stored one", "node", req.GetName(), "err", errs.ToAggregate())
		nets = nil
	}
	storage, err := n.checkNodeStorage(ctx, req.GetName(), req.GetStorage())
	if err != nil {
		return nil, err
	}
	now := n.s.opts.Clock()
	_, err = n.s.stores.Nodes.GuaranteedUpdate(ctx, "", req.GetName(), func(node *apiv1.Node) (*apiv1.Node, error) {
		if node.Status == nil {
			node.Status = &apiv1.NodeStatus{}
		}
		node.Status.Schedulable = req.GetSchedulable()
		if len(req.GetAllocatable()) > 0 {
			// What a node can give is part of what it registered.
			if errs := validation.ValidateAllocatable(req.GetAllocatable(), node.Status.GetCapacity(), field.NewPath("allocatable")); len(errs) > 0 {
				return nil, validation.ToStatusError("Node", req.GetName(), errs)
			}
			node.Status.Allocatable = req.GetAllocatable()
		}
		// Sent only when the list changed; it rides on the write the
		// heartbeat makes anyway.
		if imgs != nil {
			node.Status.Images = imgs.GetItems()
		}
		if nets != nil {
			node.Status.Bridges, node.Status.Networks = sortedNames(nets.GetBridges()), sortedNames(nets.GetNetworks())
		}
		if storage != nil {
			node.Status.Storage = storage.GetItems()
		}
		n.beat(node.Status, now)
		return node, nil
	})
	if err != nil {
		return nil, toStatus(err)
	}
	return &apiv1.HeartbeatResponse{
		LeaseDurationSeconds:     int64(n.s.opts.NodeLease.Seconds()),
		HeartbeatIntervalSeconds: int64(n.s.opts.HeartbeatInterval.Seconds()),
		// On every beat: a node that restarted, or a server whose flags
		// changed, is in step within one interval.
		ImagePullPolicy: n.imagePolicy,
	}, nil
}

// sortedNames returns names sorted, as NodeStatus promises its bridges and
// networks are (placement and tables read them in that order), in a copy:
// the request's slice is not the server's to reorder.
func sortedNames(names []string) []string {
	if len(names) == 0 {
		return nil
	}
	return slices.Sorted(slices.Values(names))
}
