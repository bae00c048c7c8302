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

// vmiService is read-only: instances are created by the VM controller.
type vmiService struct {
	apiv1.UnimplementedVirtualMachineInstancesServer
	s *Server
}

func (v *vmiService) Get(ctx context.Context, req *apiv1.GetVirtualMachineInstanceRequest) (*apiv1.VirtualMachineInstance, error) {
	return getByKey(ctx, v.s.stores.VMIs, req.GetKey())
}

func (v *vmiService) List(ctx context.Context, req *apiv1.ListVirtualMachineInstancesRequest) (*apiv1.ListVirtualMachineInstancesResponse, error) {
	items, rev, cont, err := listNamespaced(ctx, v.s.stores.VMIs, req.GetOptions())
	if err != nil {
		return nil, err
	}
	return &apiv1.ListVirtualMachineInstancesResponse{Items: items, ResourceVersion: rev, Continue: cont}, nil
}

func (v *vmiService) Watch(req *apiv1.WatchVirtualMachineInstancesRequest, stream apiv1.VirtualMachineInstances_WatchServer) error {
	return streamWatch(stream.Context(), v.s.stores.VMIs, req.GetOptions(), func(t apiv1.EventType, o *apiv1.VirtualMachineInstance, rev int64) error {
		return stream.Send(&apiv1.VirtualMachineInstanceEvent{Type: t, Object: o, ResourceVersion: rev})
	})
}

// UpdateStatus replaces the status of a VMI, for node agents. The
// compare-and-swap on the version they read keeps them from overwriting a
// newer state (a deletion timestamp, a fence).
func (v *vmiService) UpdateStatus(ctx context.Context, req *apiv1.UpdateVirtualMachineInstanceStatusRequest) (*apiv1.VirtualMachineInstance, error) {
	in := proto.Clone(req.GetVmi()).(*apiv1.VirtualMachineInstance)
	validation.DiscardUnknown(in)
	ns, name, err := keyOf(&apiv1.ObjectKey{Namespace: in.GetMetadata().GetNamespace(), Name: in.GetMetadata().GetName()})
	if err != nil {
		return nil, err
	}
	rv := in.GetMetadata().GetResourceVersion()
	if rv == 0 {
		return nil, status.Error(codes.InvalidArgument, "metadata.resource_version: Required value: a status update must carry the version it read")
	}
	cur, err := v.s.stores.VMIs.Get(ctx, ns, name)
	if err != nil {
		return nil, toStatus(err)
	}
	if cur.Metadata.ResourceVersion != rv || (in.GetMetadata().GetUid() != "" && in.GetMetadata().GetUid() != cur.GetMetadata().GetUid()) {
		return nil, status.Errorf(codes.Aborted, "virtualmachineinstance %q: %s", ns+"/"+name, conflictMessage)
	}
	if errs := validation.ValidateVirtualMachineInstanceStatus(in.GetStatus(), field.NewPath("status")); len(errs) > 0 {
		return nil, validation.ToStatusError("VirtualMachineInstance", ns+"/"+name, errs)
	}
	// A node reports only on its own instances and cannot move one: where
	// an instance runs is the scheduler's, and a node that could claim
	// instances could read their secrets.
	if id := IdentityFrom(ctx); id.Kind == Node {
		if err := checkNodeStatusWrite(cur, in, id.Node); err != nil {
			return nil, err
		}
	}
	next := proto.Clone(cur).(*apiv1.VirtualMachineInstance)
	next.Status = in.GetStatus()
	if proto.Equal(next, cur) {
		return cur, nil
	}
	out, err := v.s.stores.VMIs.Update(ctx, next)
	return out, toStatus(err)
}
