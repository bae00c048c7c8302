package apiserver

import (
	"context"

	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// vmiService is read-only: instances are created by the VM controller.
type vmiService struct {
	apiv1.UnimplementedVirtualMachineInstancesServer
	objects[*apiv1.VirtualMachineInstance, *apiv1.ListVirtualMachineInstancesResponse, apiv1.VirtualMachineInstanceEvent]
	s *Server
}

func newVMIService(s *Server) apiv1.VirtualMachineInstancesServer {
	return &vmiService{s: s, objects: objects[*apiv1.VirtualMachineInstance, *apiv1.ListVirtualMachineInstancesResponse, apiv1.VirtualMachineInstanceEvent]{
		st: s.stores.VMIs, log: s.log, kind: store.VirtualMachineInstances.Kind,
		listResponse: func(p store.Page[*apiv1.VirtualMachineInstance]) *apiv1.ListVirtualMachineInstancesResponse {
			return &apiv1.ListVirtualMachineInstancesResponse{Items: p.Items, ResourceVersion: p.Revision, Continue: p.Continue}
		},
		event: func(t apiv1.EventType, o *apiv1.VirtualMachineInstance, rev int64) *apiv1.VirtualMachineInstanceEvent {
			return &apiv1.VirtualMachineInstanceEvent{Type: t, Object: o, ResourceVersion: rev}
		},
	}}
}

func (v *vmiService) Get(ctx context.Context, req *apiv1.GetVirtualMachineInstanceRequest) (*apiv1.VirtualMachineInstance, error) {
	return v.get(ctx, req.GetKey())
}

func (v *vmiService) List(ctx context.Context, req *apiv1.ListVirtualMachineInstancesRequest) (*apiv1.ListVirtualMachineInstancesResponse, error) {
	return v.list(ctx, req.GetOptions())
}

func (v *vmiService) Watch(req *apiv1.WatchVirtualMachineInstancesRequest, stream apiv1.VirtualMachineInstances_WatchServer) error {
	return v.watch(req.GetOptions(), stream)
}

// UpdateStatus replaces the status of a VMI, for node agents. The
// compare-and-swap on the version they read keeps them from overwriting a
// newer state (a deletion timestamp, a fence).
func (v *vmiService) UpdateStatus(ctx context.Context, req *apiv1.UpdateVirtualMachineInstanceStatusRequest) (*apiv1.VirtualMachineInstance, error) {
	in, cur, ref, err := v.statusRequest(ctx, req.GetVmi())
	if err != nil {
		return nil, err
	}
	// A node reports only on its own instances and cannot move one: where
	// an instance runs is the scheduler's, and a node that could claim
	// instances could read their secrets. Where a migration goes is the
	// controller's alone (it writes through the store), whoever asks.
	// Decided before the values are judged: what a caller may not write
	// at all is refused as that, not as an invalid value.
	if id := IdentityFrom(ctx); id.Kind == Node {
		if err := checkNodeStatusWrite(cur, in, id.Node); err != nil {
			return nil, err
		}
	} else if err := destinationKept(cur.GetStatus().GetMigrationState(), in.GetStatus().GetMigrationState(), id.String()); err != nil {
		return nil, err
	}
	if errs := validation.ValidateVirtualMachineInstanceStatus(in.GetStatus(), field.NewPath("status")); len(errs) > 0 {
		return nil, validation.ToStatusError(v.kind, ref, errs)
	}
	next := proto.Clone(cur).(*apiv1.VirtualMachineInstance)
	next.Status = in.GetStatus()
	return v.commitStatus(ctx, cur, next)
}
