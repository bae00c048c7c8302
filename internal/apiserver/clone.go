package apiserver

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
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
	s *Server
}

func (v *cloneService) Create(ctx context.Context, req *apiv1.CreateCloneRequest) (*apiv1.VirtualMachineClone, error) {
	c, _ := proto.Clone(req.GetClone()).(*apiv1.VirtualMachineClone)
	if c == nil {
		c = &apiv1.VirtualMachineClone{}
	}
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
	out, err := v.s.stores.Clones.Create(ctx, c)
	if err != nil {
		return nil, toStatus(err)
	}
	v.s.log.Info("clone created", "clone", apiv1.Ref(c.Metadata.Namespace, c.Metadata.Name), "uid", out.Metadata.Uid,
		"source_kind", c.Spec.SourceKind, "source", c.Spec.SourceName, "target", c.Spec.Target)
	return out, nil
}

func (v *cloneService) Get(ctx context.Context, req *apiv1.GetCloneRequest) (*apiv1.VirtualMachineClone, error) {
	return getByKey(ctx, v.s.stores.Clones, req.GetKey())
}

func (v *cloneService) List(ctx context.Context, req *apiv1.ListClonesRequest) (*apiv1.ListClonesResponse, error) {
	items, rev, cont, err := listNamespaced(ctx, v.s.stores.Clones, req.GetOptions())
	if err != nil {
		return nil, err
	}
	return &apiv1.ListClonesResponse{Items: items, ResourceVersion: rev, Continue: cont}, nil
}

func (v *cloneService) UpdateStatus(ctx context.Context, req *apiv1.UpdateCloneStatusRequest) (*apiv1.VirtualMachineClone, error) {
	return statusWrite[*apiv1.VirtualMachineClone]{
		kind: apiv1.KindClone, st: v.s.stores.Clones, log: v.s.log,
		validate: func(in *apiv1.VirtualMachineClone) field.ErrorList {
			return validation.ValidateCloneStatus(in.GetStatus(), field.NewPath("status"))
		},
		setStatus: func(next, in *apiv1.VirtualMachineClone) { next.Status = in.GetStatus() },
	}.update(ctx, req.GetClone())
}

func (v *cloneService) Delete(ctx context.Context, req *apiv1.DeleteCloneRequest) (*apiv1.VirtualMachineClone, error) {
	out, err := deleteByKey(ctx, v.s.stores.Clones, apiv1.KindClone, req.GetKey(), req.GetOptions())
	if err != nil {
		return nil, err
	}
	v.s.log.Info("clone deletion requested", "clone", apiv1.Ref(out.GetMetadata().GetNamespace(), out.GetMetadata().GetName()))
	return out, nil
}

func (v *cloneService) Watch(req *apiv1.WatchClonesRequest, stream apiv1.Clones_WatchServer) error {
	return streamWatch(stream.Context(), v.s.stores.Clones, req.GetOptions(), func(t apiv1.EventType, o *apiv1.VirtualMachineClone, rev int64) error {
		return stream.Send(&apiv1.CloneEvent{Type: t, Object: o, ResourceVersion: rev})
	})
}
