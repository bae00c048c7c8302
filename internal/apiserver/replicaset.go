package apiserver

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
)

// replicaSetService is KubeVirt's VirtualMachineInstanceReplicaSet API;
// the replica set controller makes and removes the instances.
type replicaSetService struct {
	apiv1.UnimplementedReplicaSetsServer
	s *Server
}

func (r *replicaSetService) Create(ctx context.Context, req *apiv1.CreateReplicaSetRequest) (*apiv1.VirtualMachineInstanceReplicaSet, error) {
	rs, _ := proto.Clone(req.GetReplicaSet()).(*apiv1.VirtualMachineInstanceReplicaSet)
	if rs == nil {
		rs = &apiv1.VirtualMachineInstanceReplicaSet{}
	}
	validation.DefaultReplicaSet(rs)
	// No MAC addresses are assigned here, unlike a VM's: validation
	// refuses them in a template, and each instance gets its own when the
	// controller makes it.
	if errs := validation.ValidateReplicaSet(rs, r.s.opts.Validation); len(errs) > 0 {
		return nil, validation.ToStatusError(apiv1.KindReplicaSet, rs.GetMetadata().GetName(), errs)
	}
	rs.Metadata = userMeta(rs.Metadata)
	// The selector cannot change, so its text is known for good.
	rs.Status = &apiv1.VirtualMachineInstanceReplicaSetStatus{LabelSelector: apiv1.SelectorString(rs.Spec.Selector)}
	out, err := r.s.stores.ReplicaSets.Create(ctx, rs)
	if err != nil {
		return nil, toStatus(err)
	}
	r.s.log.Info("replica set created", "replicaset", apiv1.Ref(rs.Metadata.Namespace, rs.Metadata.Name),
		"uid", out.Metadata.Uid, "replicas", rs.Spec.DesiredReplicas())
	return out, nil
}

func (r *replicaSetService) Get(ctx context.Context, req *apiv1.GetReplicaSetRequest) (*apiv1.VirtualMachineInstanceReplicaSet, error) {
	return getByKey(ctx, r.s.stores.ReplicaSets, req.GetKey())
}

func (r *replicaSetService) List(ctx context.Context, req *apiv1.ListReplicaSetsRequest) (*apiv1.ListReplicaSetsResponse, error) {
	items, rev, cont, err := listNamespaced(ctx, r.s.stores.ReplicaSets, req.GetOptions())
	if err != nil {
		return nil, err
	}
	return &apiv1.ListReplicaSetsResponse{Items: items, ResourceVersion: rev, Continue: cont}, nil
}

// Update replaces spec, labels and annotations with compare-and-swap on
// metadata.resource_version, as vmService.Update does; the status stays
// the stored one.
func (r *replicaSetService) Update(ctx context.Context, req *apiv1.UpdateReplicaSetRequest) (*apiv1.VirtualMachineInstanceReplicaSet, error) {
	in, _ := proto.Clone(req.GetReplicaSet()).(*apiv1.VirtualMachineInstanceReplicaSet)
	if in == nil {
		in = &apiv1.VirtualMachineInstanceReplicaSet{}
	}
	validation.DefaultReplicaSet(in)
	rv := in.Metadata.ResourceVersion
	if rv == 0 {
		return nil, errNoResourceVersion
	}
	ref := apiv1.Ref(in.Metadata.Namespace, in.Metadata.Name)
	old, err := getByKey(ctx, r.s.stores.ReplicaSets, &apiv1.ObjectKey{Namespace: in.Metadata.Namespace, Name: in.Metadata.Name})
	if err != nil {
		return nil, err
	}
	if in.Metadata.Uid == "" {
		in.Metadata.Uid = old.Metadata.Uid // not given: this object; a different uid is refused below
	}
	if errs := validation.ValidateReplicaSetUpdate(in, old, r.s.opts.Validation); len(errs) > 0 {
		return nil, validation.ToStatusError(apiv1.KindReplicaSet, in.Metadata.Name, errs)
	}
	if old.Metadata.ResourceVersion != rv {
		return nil, status.Errorf(codes.Aborted, "virtualmachineinstancereplicaset %q: %s", ref, conflictMessage)
	}
	next, changed := withUserChanges(old, in, !proto.Equal(old.Spec, in.Spec),
		func(n *apiv1.VirtualMachineInstanceReplicaSet) { n.Spec = in.Spec })
	if !changed {
		return old, nil
	}
	out, err := r.s.stores.ReplicaSets.Update(ctx, next)
	if err != nil {
		return nil, toStatus(err)
	}
	r.s.log.Info("replica set updated", "replicaset", ref, "generation", out.Metadata.Generation)
	return out, nil
}

func (r *replicaSetService) Delete(ctx context.Context, req *apiv1.DeleteReplicaSetRequest) (*apiv1.VirtualMachineInstanceReplicaSet, error) {
	out, err := deleteByKey(ctx, r.s.stores.ReplicaSets, apiv1.KindReplicaSet, req.GetKey(), req.GetOptions())
	if err != nil {
		return nil, err
	}
	r.s.log.Info("replica set deletion requested", "replicaset", apiv1.Ref(out.GetMetadata().GetNamespace(), out.GetMetadata().GetName()))
	return out, nil
}

func (r *replicaSetService) Watch(req *apiv1.WatchReplicaSetsRequest, stream apiv1.ReplicaSets_WatchServer) error {
	return streamWatch(stream.Context(), r.s.stores.ReplicaSets, req.GetOptions(), func(t apiv1.EventType, o *apiv1.VirtualMachineInstanceReplicaSet, rev int64) error {
		return stream.Send(&apiv1.ReplicaSetEvent{Type: t, Object: o, ResourceVersion: rev})
	})
}

// Scale sets spec.replicas alone (Kubernetes' scale subresource).
func (r *replicaSetService) Scale(ctx context.Context, req *apiv1.ScaleRequest) (*apiv1.VirtualMachineInstanceReplicaSet, error) {
	out, err := scaleObject(ctx, r.s.stores.ReplicaSets, apiv1.KindReplicaSet, req, func(cur *apiv1.VirtualMachineInstanceReplicaSet, n int32) bool {
		if cur.Spec == nil {
			cur.Spec = &apiv1.VirtualMachineInstanceReplicaSetSpec{}
		}
		if cur.Spec.Replicas != nil && *cur.Spec.Replicas == n {
			return false
		}
		cur.Spec.Replicas = &n
		return true
	})
	if err != nil {
		return nil, err
	}
	r.s.log.Info("replica set scaled", "replicaset", apiv1.Ref(out.GetMetadata().GetNamespace(), out.GetMetadata().GetName()), "replicas", req.GetReplicas())
	return out, nil
}
