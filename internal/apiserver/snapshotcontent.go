package apiserver

import (
	"context"

	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
)

// snapshotContentService is KubeVirt's VirtualMachineSnapshotContent API.
// There is no Create: the snapshot controller makes contents in the store.
// The node named by a content's virtplane.io/node-name label reads it and
// writes its status (authz.go), and drops FinalizerSnapshotData once the
// data is gone.
type snapshotContentService struct {
	apiv1.UnimplementedSnapshotContentsServer
	s *Server
}

func (v *snapshotContentService) Get(ctx context.Context, req *apiv1.GetSnapshotContentRequest) (*apiv1.VirtualMachineSnapshotContent, error) {
	return getByKey(ctx, v.s.stores.SnapshotContents, req.GetKey())
}

func (v *snapshotContentService) List(ctx context.Context, req *apiv1.ListSnapshotContentsRequest) (*apiv1.ListSnapshotContentsResponse, error) {
	items, rev, cont, err := listNamespaced(ctx, v.s.stores.SnapshotContents, req.GetOptions())
	if err != nil {
		return nil, err
	}
	return &apiv1.ListSnapshotContentsResponse{Items: items, ResourceVersion: rev, Continue: cont}, nil
}

func (v *snapshotContentService) UpdateStatus(ctx context.Context, req *apiv1.UpdateSnapshotContentStatusRequest) (*apiv1.VirtualMachineSnapshotContent, error) {
	return statusWrite[*apiv1.VirtualMachineSnapshotContent]{
		kind: apiv1.KindSnapshotContent, st: v.s.stores.SnapshotContents, log: v.s.log,
		validate: func(in *apiv1.VirtualMachineSnapshotContent) field.ErrorList {
			return validation.ValidateSnapshotContentStatus(in.GetStatus(), field.NewPath("status"))
		},
		setStatus:     func(next, in *apiv1.VirtualMachineSnapshotContent) { next.Status = in.GetStatus() },
		dataFinalizer: apiv1.FinalizerSnapshotData,
	}.update(ctx, req.GetContent())
}

func (v *snapshotContentService) Delete(ctx context.Context, req *apiv1.DeleteSnapshotContentRequest) (*apiv1.VirtualMachineSnapshotContent, error) {
	out, err := deleteByKey(ctx, v.s.stores.SnapshotContents, apiv1.KindSnapshotContent, req.GetKey(), req.GetOptions())
	if err != nil {
		return nil, err
	}
	v.s.log.Info("snapshot content deletion requested", "content", apiv1.Ref(out.GetMetadata().GetNamespace(), out.GetMetadata().GetName()))
	return out, nil
}

func (v *snapshotContentService) Watch(req *apiv1.WatchSnapshotContentsRequest, stream apiv1.SnapshotContents_WatchServer) error {
	return streamWatch(stream.Context(), v.s.stores.SnapshotContents, req.GetOptions(), func(t apiv1.EventType, o *apiv1.VirtualMachineSnapshotContent, rev int64) error {
		return stream.Send(&apiv1.SnapshotContentEvent{Type: t, Object: o, ResourceVersion: rev})
	})
}
