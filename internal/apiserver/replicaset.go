package apiserver

import (
	"context"

	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// replicaSetService is KubeVirt's VirtualMachineInstanceReplicaSet API;
// the replica set controller makes and removes the instances.
type replicaSetService struct {
	apiv1.UnimplementedReplicaSetsServer
	objects[*apiv1.VirtualMachineInstanceReplicaSet, *apiv1.ListReplicaSetsResponse, apiv1.ReplicaSetEvent]
	s *Server
}

func newReplicaSetService(s *Server) apiv1.ReplicaSetsServer {
	return &replicaSetService{s: s, objects: objects[*apiv1.VirtualMachineInstanceReplicaSet, *apiv1.ListReplicaSetsResponse, apiv1.ReplicaSetEvent]{
		st: s.stores.ReplicaSets, log: s.log, kind: apiv1.KindReplicaSet, noun: "replica set", attr: "replicaset",
		listResponse: func(p store.Page[*apiv1.VirtualMachineInstanceReplicaSet]) *apiv1.ListReplicaSetsResponse {
			return &apiv1.ListReplicaSetsResponse{Items: p.Items, ResourceVersion: p.Revision, Continue: p.Continue}
		},
		event: func(t apiv1.EventType, o *apiv1.VirtualMachineInstanceReplicaSet, rev int64) *apiv1.ReplicaSetEvent {
			return &apiv1.ReplicaSetEvent{Type: t, Object: o, ResourceVersion: rev}
		},
	}}
}

func (r *replicaSetService) Create(ctx context.Context, req *apiv1.CreateReplicaSetRequest) (*apiv1.VirtualMachineInstanceReplicaSet, error) {
	rs := requestCopy(req.GetReplicaSet())
	validation.DefaultReplicaSet(rs)
	// No MAC addresses are assigned here, unlike a VM's: validation
	// refuses them in a template, and each instance gets its own when the
	// controller makes it.
	if errs := validation.ValidateReplicaSet(rs, r.s.opts.Validation); len(errs) > 0 {
		return nil, validation.ToStatusError(apiv1.KindReplicaSet, rs.GetMetadata().GetName(), errs)
	}
	if err := r.s.checkNamespaceAllowed(ctx, apiv1.KindReplicaSet, rs.Metadata.Namespace, rs.Metadata.Name, replicaSetInstanceSpecPath, rs.GetSpec().GetTemplate().GetSpec()); err != nil {
		return nil, err
	}
	rs.Metadata = userMeta(rs.Metadata)
	// The selector cannot change, so its text is known for good.
	rs.Status = &apiv1.VirtualMachineInstanceReplicaSetStatus{LabelSelector: apiv1.SelectorString(rs.Spec.Selector)}
	return r.create(ctx, rs, "replicas", rs.Spec.DesiredReplicas())
}

// replicaSetInstanceSpecPath is where a replica set holds its instances'
// spec.
var replicaSetInstanceSpecPath = field.NewPath("spec", "template", "spec")

func (r *replicaSetService) Get(ctx context.Context, req *apiv1.GetReplicaSetRequest) (*apiv1.VirtualMachineInstanceReplicaSet, error) {
	return r.get(ctx, req.GetKey())
}

func (r *replicaSetService) List(ctx context.Context, req *apiv1.ListReplicaSetsRequest) (*apiv1.ListReplicaSetsResponse, error) {
	return r.list(ctx, req.GetOptions())
}

// Update replaces spec, labels and annotations (objects.update).
func (r *replicaSetService) Update(ctx context.Context, req *apiv1.UpdateReplicaSetRequest) (*apiv1.VirtualMachineInstanceReplicaSet, error) {
	in := requestCopy(req.GetReplicaSet())
	validation.DefaultReplicaSet(in)
	return r.update(ctx, in, func(in, old *apiv1.VirtualMachineInstanceReplicaSet) error {
		if errs := validation.ValidateReplicaSetUpdate(in, old, r.s.opts.Validation); len(errs) > 0 {
			return validation.ToStatusError(apiv1.KindReplicaSet, in.Metadata.Name, errs)
		}
		return r.s.checkNamespaceAllowed(ctx, apiv1.KindReplicaSet, in.Metadata.Namespace, in.Metadata.Name, replicaSetInstanceSpecPath, in.GetSpec().GetTemplate().GetSpec())
	}, func(next, in *apiv1.VirtualMachineInstanceReplicaSet) bool { return replaceSpec(&next.Spec, in.Spec) })
}

func (r *replicaSetService) Delete(ctx context.Context, req *apiv1.DeleteReplicaSetRequest) (*apiv1.VirtualMachineInstanceReplicaSet, error) {
	return r.delete(ctx, req.GetKey(), req.GetOptions())
}

func (r *replicaSetService) Watch(req *apiv1.WatchReplicaSetsRequest, stream apiv1.ReplicaSets_WatchServer) error {
	return r.watch(req.GetOptions(), stream)
}

// Scale sets spec.replicas alone (Kubernetes' scale subresource).
func (r *replicaSetService) Scale(ctx context.Context, req *apiv1.ScaleRequest) (*apiv1.VirtualMachineInstanceReplicaSet, error) {
	return r.scale(ctx, req, func(cur *apiv1.VirtualMachineInstanceReplicaSet) **int32 {
		if cur.Spec == nil {
			cur.Spec = &apiv1.VirtualMachineInstanceReplicaSetSpec{}
		}
		return &cur.Spec.Replicas
	})
}
