package apiserver

import (
	"context"

	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// snapshotContentService is KubeVirt's VirtualMachineSnapshotContent API.
// There is no Create: the snapshot controller makes contents in the store.
// The node named by a content's virtplane.io/node-name label reads it and
// writes its status (authz.go), and drops FinalizerSnapshotData once the
// data is gone.
type snapshotContentService struct {
	apiv1.UnimplementedSnapshotContentsServer
	objects[*apiv1.VirtualMachineSnapshotContent, *apiv1.ListSnapshotContentsResponse, apiv1.SnapshotContentEvent]
}

func newSnapshotContentService(s *Server) apiv1.SnapshotContentsServer {
	return &snapshotContentService{objects: objects[*apiv1.VirtualMachineSnapshotContent, *apiv1.ListSnapshotContentsResponse, apiv1.SnapshotContentEvent]{
		st: s.stores.SnapshotContents, log: s.log, kind: apiv1.KindSnapshotContent, noun: "snapshot content", attr: "content",
		listResponse: func(p store.Page[*apiv1.VirtualMachineSnapshotContent]) *apiv1.ListSnapshotContentsResponse {
			return &apiv1.ListSnapshotContentsResponse{Items: p.Items, ResourceVersion: p.Revision, Continue: p.Continue}
		},
		event: func(t apiv1.EventType, o *apiv1.VirtualMachineSnapshotContent, rev int64) *apiv1.SnapshotContentEvent {
			return &apiv1.SnapshotContentEvent{Type: t, Object: o, ResourceVersion: rev}
		},
	}}
}

func (v *snapshotContentService) Get(ctx context.Context, req *apiv1.GetSnapshotContentRequest) (*apiv1.VirtualMachineSnapshotContent, error) {
	return v.get(ctx, req.GetKey())
}

func (v *snapshotContentService) List(ctx context.Context, req *apiv1.ListSnapshotContentsRequest) (*apiv1.ListSnapshotContentsResponse, error) {
	return v.list(ctx, req.GetOptions())
}

func (v *snapshotContentService) UpdateStatus(ctx context.Context, req *apiv1.UpdateSnapshotContentStatusRequest) (*apiv1.VirtualMachineSnapshotContent, error) {
	return v.updateStatus(ctx, req.GetContent(), statusRule[*apiv1.VirtualMachineSnapshotContent]{
		validate: func(in *apiv1.VirtualMachineSnapshotContent) field.ErrorList {
			return validation.ValidateSnapshotContentStatus(in.GetStatus(), field.NewPath("status"))
		},
		setStatus:     func(next, in *apiv1.VirtualMachineSnapshotContent) { next.Status = in.GetStatus() },
		dataFinalizer: apiv1.FinalizerSnapshotData,
	})
}

func (v *snapshotContentService) Delete(ctx context.Context, req *apiv1.DeleteSnapshotContentRequest) (*apiv1.VirtualMachineSnapshotContent, error) {
	return v.delete(ctx, req.GetKey(), req.GetOptions())
}

func (v *snapshotContentService) Watch(req *apiv1.WatchSnapshotContentsRequest, stream apiv1.SnapshotContents_WatchServer) error {
	return v.watch(req.GetOptions(), stream)
}
