package apiserver

import (
	"context"

	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// poolService is KubeVirt's VirtualMachinePool API; the pool controller
// makes, updates and removes the VMs.
type poolService struct {
	apiv1.UnimplementedPoolsServer
	objects[*apiv1.VirtualMachinePool, *apiv1.ListPoolsResponse, apiv1.PoolEvent]
	s *Server
}

func newPoolService(s *Server) apiv1.PoolsServer {
	return &poolService{s: s, objects: objects[*apiv1.VirtualMachinePool, *apiv1.ListPoolsResponse, apiv1.PoolEvent]{
		st: s.stores.Pools, log: s.log, kind: apiv1.KindPool, noun: "pool", attr: "pool",
		listResponse: func(p store.Page[*apiv1.VirtualMachinePool]) *apiv1.ListPoolsResponse {
			return &apiv1.ListPoolsResponse{Items: p.Items, ResourceVersion: p.Revision, Continue: p.Continue}
		},
		event: func(t apiv1.EventType, o *apiv1.VirtualMachinePool, rev int64) *apiv1.PoolEvent {
			return &apiv1.PoolEvent{Type: t, Object: o, ResourceVersion: rev}
		},
	}}
}

func (p *poolService) Create(ctx context.Context, req *apiv1.CreatePoolRequest) (*apiv1.VirtualMachinePool, error) {
	pool := requestCopy(req.GetPool())
	validation.DefaultPool(pool)
	// No MAC addresses are assigned here, unlike a VM's: validation
	// refuses them in a template, and each VM gets its own when the
	// controller makes it.
	if errs := validation.ValidatePool(pool, p.s.opts.Validation); len(errs) > 0 {
		return nil, validation.ToStatusError(apiv1.KindPool, pool.GetMetadata().GetName(), errs)
	}
	if err := p.s.checkVolumes(ctx, apiv1.KindPool, pool.Metadata.Name, poolInstanceSpecPath, poolInstanceSpec(pool), nil); err != nil {
		return nil, err
	}
	if err := p.s.checkNamespaceAllowed(ctx, apiv1.KindPool, pool.Metadata.Namespace, pool.Metadata.Name, poolInstanceSpecPath, poolInstanceSpec(pool)); err != nil {
		return nil, err
	}
	pool.Metadata = userMeta(pool.Metadata)
	// The selector cannot change, so its text is known for good.
	pool.Status = &apiv1.VirtualMachinePoolStatus{LabelSelector: apiv1.SelectorString(pool.Spec.Selector)}
	return p.create(ctx, pool, "replicas", pool.Spec.DesiredReplicas())
}

// poolInstanceSpecPath is where a pool holds the instance spec of its VMs.
var poolInstanceSpecPath = field.NewPath("spec", "virtual_machine_template", "spec", "template", "spec")

// poolInstanceSpec is the instance spec of the pool's VMs. Nil-safe.
func poolInstanceSpec(pool *apiv1.VirtualMachinePool) *apiv1.VirtualMachineInstanceSpec {
	return pool.GetSpec().GetVirtualMachineTemplate().GetSpec().GetTemplate().GetSpec()
}

func (p *poolService) Get(ctx context.Context, req *apiv1.GetPoolRequest) (*apiv1.VirtualMachinePool, error) {
	return p.get(ctx, req.GetKey())
}

func (p *poolService) List(ctx context.Context, req *apiv1.ListPoolsRequest) (*apiv1.ListPoolsResponse, error) {
	return p.list(ctx, req.GetOptions())
}

// Update replaces spec, labels and annotations (objects.update); the
// instance spec's images are checked as on create.
func (p *poolService) Update(ctx context.Context, req *apiv1.UpdatePoolRequest) (*apiv1.VirtualMachinePool, error) {
	in := requestCopy(req.GetPool())
	validation.DefaultPool(in)
	return p.update(ctx, in, func(in, old *apiv1.VirtualMachinePool) error {
		if errs := validation.ValidatePoolUpdate(in, old, p.s.opts.Validation); len(errs) > 0 {
			return validation.ToStatusError(apiv1.KindPool, in.Metadata.Name, errs)
		}
		if err := p.s.checkVolumes(ctx, apiv1.KindPool, in.Metadata.Name, poolInstanceSpecPath, poolInstanceSpec(in), poolInstanceSpec(old)); err != nil {
			return err
		}
		return p.s.checkNamespaceAllowed(ctx, apiv1.KindPool, in.Metadata.Namespace, in.Metadata.Name, poolInstanceSpecPath, poolInstanceSpec(in))
	}, func(next, in *apiv1.VirtualMachinePool) bool { return replaceSpec(&next.Spec, in.Spec) })
}

func (p *poolService) Delete(ctx context.Context, req *apiv1.DeletePoolRequest) (*apiv1.VirtualMachinePool, error) {
	return p.delete(ctx, req.GetKey(), req.GetOptions())
}

func (p *poolService) Watch(req *apiv1.WatchPoolsRequest, stream apiv1.Pools_WatchServer) error {
	return p.watch(req.GetOptions(), stream)
}

// Scale sets spec.replicas alone (Kubernetes' scale subresource).
func (p *poolService) Scale(ctx context.Context, req *apiv1.ScaleRequest) (*apiv1.VirtualMachinePool, error) {
	return p.scale(ctx, req, func(cur *apiv1.VirtualMachinePool) **int32 {
		if cur.Spec == nil {
			cur.Spec = &apiv1.VirtualMachinePoolSpec{}
		}
		return &cur.Spec.Replicas
	})
}
