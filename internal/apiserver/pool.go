package apiserver

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
)

// poolService is KubeVirt's VirtualMachinePool API; the pool controller
// makes, updates and removes the VMs.
type poolService struct {
	apiv1.UnimplementedPoolsServer
	s *Server
}

func (p *poolService) Create(ctx context.Context, req *apiv1.CreatePoolRequest) (*apiv1.VirtualMachinePool, error) {
	pool, _ := proto.Clone(req.GetPool()).(*apiv1.VirtualMachinePool)
	if pool == nil {
		pool = &apiv1.VirtualMachinePool{}
	}
	validation.DefaultPool(pool)
	// No MAC addresses are assigned here, unlike a VM's: validation
	// refuses them in a template, and each VM gets its own when the
	// controller makes it.
	if errs := validation.ValidatePool(pool, p.s.opts.Validation); len(errs) > 0 {
		return nil, validation.ToStatusError(apiv1.KindPool, pool.GetMetadata().GetName(), errs)
	}
	if err := p.s.checkImageSizes(ctx, apiv1.KindPool, pool.Metadata.Name, poolInstanceSpecPath, poolInstanceSpec(pool), nil); err != nil {
		return nil, err
	}
	pool.Metadata = userMeta(pool.Metadata)
	// The selector cannot change, so its text is known for good.
	pool.Status = &apiv1.VirtualMachinePoolStatus{LabelSelector: apiv1.SelectorString(pool.Spec.Selector)}
	out, err := p.s.stores.Pools.Create(ctx, pool)
	if err != nil {
		return nil, toStatus(err)
	}
	p.s.log.Info("pool created", "pool", apiv1.Ref(pool.Metadata.Namespace, pool.Metadata.Name),
		"uid", out.Metadata.Uid, "replicas", pool.Spec.DesiredReplicas())
	return out, nil
}

// poolInstanceSpecPath is where a pool holds the instance spec of its VMs.
var poolInstanceSpecPath = field.NewPath("spec", "virtual_machine_template", "spec", "template", "spec")

// poolInstanceSpec is the instance spec of the pool's VMs. Nil-safe.
func poolInstanceSpec(pool *apiv1.VirtualMachinePool) *apiv1.VirtualMachineInstanceSpec {
	return pool.GetSpec().GetVirtualMachineTemplate().GetSpec().GetTemplate().GetSpec()
}

func (p *poolService) Get(ctx context.Context, req *apiv1.GetPoolRequest) (*apiv1.VirtualMachinePool, error) {
	return getByKey(ctx, p.s.stores.Pools, req.GetKey())
}

func (p *poolService) List(ctx context.Context, req *apiv1.ListPoolsRequest) (*apiv1.ListPoolsResponse, error) {
	items, rev, cont, err := listNamespaced(ctx, p.s.stores.Pools, req.GetOptions())
	if err != nil {
		return nil, err
	}
	return &apiv1.ListPoolsResponse{Items: items, ResourceVersion: rev, Continue: cont}, nil
}

// Update replaces spec, labels and annotations with compare-and-swap on
// metadata.resource_version, as vmService.Update does; the status stays
// the stored one.
func (p *poolService) Update(ctx context.Context, req *apiv1.UpdatePoolRequest) (*apiv1.VirtualMachinePool, error) {
	in, _ := proto.Clone(req.GetPool()).(*apiv1.VirtualMachinePool)
	if in == nil {
		in = &apiv1.VirtualMachinePool{}
	}
	validation.DefaultPool(in)
	rv := in.Metadata.ResourceVersion
	if rv == 0 {
		return nil, errNoResourceVersion
	}
	ref := apiv1.Ref(in.Metadata.Namespace, in.Metadata.Name)
	old, err := getByKey(ctx, p.s.stores.Pools, &apiv1.ObjectKey{Namespace: in.Metadata.Namespace, Name: in.Metadata.Name})
	if err != nil {
		return nil, err
	}
	if in.Metadata.Uid == "" {
		in.Metadata.Uid = old.Metadata.Uid // not given: this object; a different uid is refused below
	}
	if errs := validation.ValidatePoolUpdate(in, old, p.s.opts.Validation); len(errs) > 0 {
		return nil, validation.ToStatusError(apiv1.KindPool, in.Metadata.Name, errs)
	}
	if err := p.s.checkImageSizes(ctx, apiv1.KindPool, in.Metadata.Name, poolInstanceSpecPath, poolInstanceSpec(in), poolInstanceSpec(old)); err != nil {
		return nil, err
	}
	if old.Metadata.ResourceVersion != rv {
		return nil, status.Errorf(codes.Aborted, "virtualmachinepool %q: %s", ref, conflictMessage)
	}
	next, changed := withUserChanges(old, in, !proto.Equal(old.Spec, in.Spec),
		func(n *apiv1.VirtualMachinePool) { n.Spec = in.Spec })
	if !changed {
		return old, nil
	}
	out, err := p.s.stores.Pools.Update(ctx, next)
	if err != nil {
		return nil, toStatus(err)
	}
	p.s.log.Info("pool updated", "pool", ref, "generation", out.Metadata.Generation)
	return out, nil
}

func (p *poolService) Delete(ctx context.Context, req *apiv1.DeletePoolRequest) (*apiv1.VirtualMachinePool, error) {
	out, err := deleteByKey(ctx, p.s.stores.Pools, apiv1.KindPool, req.GetKey(), req.GetOptions())
	if err != nil {
		return nil, err
	}
	p.s.log.Info("pool deletion requested", "pool", apiv1.Ref(out.GetMetadata().GetNamespace(), out.GetMetadata().GetName()))
	return out, nil
}

func (p *poolService) Watch(req *apiv1.WatchPoolsRequest, stream apiv1.Pools_WatchServer) error {
	return streamWatch(stream.Context(), p.s.stores.Pools, req.GetOptions(), func(t apiv1.EventType, o *apiv1.VirtualMachinePool, rev int64) error {
		return stream.Send(&apiv1.PoolEvent{Type: t, Object: o, ResourceVersion: rev})
	})
}

// Scale sets spec.replicas alone (Kubernetes' scale subresource).
func (p *poolService) Scale(ctx context.Context, req *apiv1.ScaleRequest) (*apiv1.VirtualMachinePool, error) {
	out, err := scaleObject(ctx, p.s.stores.Pools, apiv1.KindPool, req, func(cur *apiv1.VirtualMachinePool, n int32) bool {
		if cur.Spec == nil {
			cur.Spec = &apiv1.VirtualMachinePoolSpec{}
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
	p.s.log.Info("pool scaled", "pool", apiv1.Ref(out.GetMetadata().GetNamespace(), out.GetMetadata().GetName()), "replicas", req.GetReplicas())
	return out, nil
}
