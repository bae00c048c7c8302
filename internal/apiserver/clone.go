package apiserver

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// cloneService is KubeVirt's VirtualMachineClone API; the clone
// controller takes the snapshot, restores it into the target and cleans
// up.
type cloneService struct {
	apiv1.UnimplementedClonesServer
	objects[*apiv1.VirtualMachineClone, *apiv1.ListClonesResponse, apiv1.CloneEvent]
	s *Server
}

func newCloneService(s *Server) apiv1.ClonesServer {
	return &cloneService{s: s, objects: objects[*apiv1.VirtualMachineClone, *apiv1.ListClonesResponse, apiv1.CloneEvent]{
		st: s.stores.Clones, log: s.log, kind: apiv1.KindClone, noun: "clone", attr: "clone",
		listResponse: func(p store.Page[*apiv1.VirtualMachineClone]) *apiv1.ListClonesResponse {
			return &apiv1.ListClonesResponse{Items: p.Items, ResourceVersion: p.Revision, Continue: p.Continue}
		},
		event: func(t apiv1.EventType, o *apiv1.VirtualMachineClone, rev int64) *apiv1.CloneEvent {
			return &apiv1.CloneEvent{Type: t, Object: o, ResourceVersion: rev}
		},
	}}
}

func (v *cloneService) Create(ctx context.Context, req *apiv1.CreateCloneRequest) (*apiv1.VirtualMachineClone, error) {
	c := requestCopy(req.GetClone())
	validation.DefaultClone(c)
	if errs := validation.ValidateClone(c); len(errs) > 0 {
		return nil, validation.ToStatusError(apiv1.KindClone, c.GetMetadata().GetName(), errs)
	}
	// A clone makes a new VM: refused at once when the name is taken,
	// rather than after a snapshot was taken for nothing. A VM made
	// under that name later fails the clone in its controller.
	_, err := v.s.stores.VMs.Get(ctx, c.Metadata.Namespace, c.Spec.Target)
	switch {
	case err == nil:
		return nil, status.Errorf(codes.FailedPrecondition, "target VM %q already exists", c.Spec.Target)
	case !errors.Is(err, store.ErrNotFound):
		return nil, toStatus(err)
	}
	c.Metadata = userMeta(c.Metadata)
	c.Status = &apiv1.VirtualMachineCloneStatus{}
	return v.create(ctx, c, "source_kind", c.Spec.SourceKind, "source", c.Spec.SourceName, "target", c.Spec.Target)
}

func (v *cloneService) Get(ctx context.Context, req *apiv1.GetCloneRequest) (*apiv1.VirtualMachineClone, error) {
	return v.get(ctx, req.GetKey())
}

func (v *cloneService) List(ctx context.Context, req *apiv1.ListClonesRequest) (*apiv1.ListClonesResponse, error) {
	return v.list(ctx, req.GetOptions())
}

func (v *cloneService) UpdateStatus(ctx context.Context, req *apiv1.UpdateCloneStatusRequest) (*apiv1.VirtualMachineClone, error) {
	return v.updateStatus(ctx, req.GetClone(), statusRule[*apiv1.VirtualMachineClone]{
		validate: func(in *apiv1.VirtualMachineClone) field.ErrorList {
			return validation.ValidateCloneStatus(in.GetStatus(), field.NewPath("status"))
		},
		setStatus: func(next, in *apiv1.VirtualMachineClone) { next.Status = in.GetStatus() },
	})
}

func (v *cloneService) Delete(ctx context.Context, req *apiv1.DeleteCloneRequest) (*apiv1.VirtualMachineClone, error) {
	return v.delete(ctx, req.GetKey(), req.GetOptions())
}

func (v *cloneService) Watch(req *apiv1.WatchClonesRequest, stream apiv1.Clones_WatchServer) error {
	return v.watch(req.GetOptions(), stream)
}
