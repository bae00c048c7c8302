package apiserver

import (
	"context"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// vmiService is read-only: instances are created by the VM controller.
type vmiService struct {
	apiv1.UnimplementedVirtualMachineInstancesServer
	s *Server
}

func (v *vmiService) Get(ctx context.Context, req *apiv1.GetVirtualMachineInstanceRequest) (*apiv1.VirtualMachineInstance, error) {
	ns, name, err := keyOf(req.GetKey())
	if err != nil {
		return nil, err
	}
	out, err := v.s.stores.VMIs.Get(ctx, ns, name)
	return out, toStatus(err)
}

func (v *vmiService) List(ctx context.Context, req *apiv1.ListVirtualMachineInstancesRequest) (*apiv1.ListVirtualMachineInstancesResponse, error) {
	items, rev, err := v.s.stores.VMIs.List(ctx, listOptions(req.GetOptions()))
	if err != nil {
		return nil, toStatus(err)
	}
	return &apiv1.ListVirtualMachineInstancesResponse{Items: items, ResourceVersion: rev}, nil
}

func (v *vmiService) Watch(req *apiv1.WatchVirtualMachineInstancesRequest, stream apiv1.VirtualMachineInstances_WatchServer) error {
	return streamWatch(stream.Context(), v.s.stores.VMIs, req.GetOptions(), func(t apiv1.EventType, o *apiv1.VirtualMachineInstance, rev int64) error {
		return stream.Send(&apiv1.VirtualMachineInstanceEvent{Type: t, Object: o, ResourceVersion: rev})
	})
}
