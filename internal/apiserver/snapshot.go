package apiserver

import (
	"context"

	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// The snapshot kinds' services (snapshot.go, snapshotcontent.go,
// restore.go, clone.go; docs/snapshots.md). Users create snapshots,
// restores and clones, whose specs are immutable (there is no Update);
// the controllers and, for contents and restores, the node that holds the
// data write their status (statusRule). Controllers write spec,
// finalizers and the contents themselves through the store, not through
// these services.

// snapshotService is KubeVirt's VirtualMachineSnapshot API.
type snapshotService struct {
	apiv1.UnimplementedSnapshotsServer
	objects[*apiv1.VirtualMachineSnapshot, *apiv1.ListSnapshotsResponse, apiv1.SnapshotEvent]
}

func newSnapshotService(s *Server) apiv1.SnapshotsServer {
	return &snapshotService{objects: objects[*apiv1.VirtualMachineSnapshot, *apiv1.ListSnapshotsResponse, apiv1.SnapshotEvent]{
		st: s.stores.Snapshots, log: s.log, kind: apiv1.KindSnapshot, noun: "snapshot", attr: "snapshot",
		listResponse: func(p store.Page[*apiv1.VirtualMachineSnapshot]) *apiv1.ListSnapshotsResponse {
			return &apiv1.ListSnapshotsResponse{Items: p.Items, ResourceVersion: p.Revision, Continue: p.Continue}
		},
		event: func(t apiv1.EventType, o *apiv1.VirtualMachineSnapshot, rev int64) *apiv1.SnapshotEvent {
			return &apiv1.SnapshotEvent{Type: t, Object: o, ResourceVersion: rev}
		},
	}}
}

func (v *snapshotService) Create(ctx context.Context, req *apiv1.CreateSnapshotRequest) (*apiv1.VirtualMachineSnapshot, error) {
	snap := requestCopy(req.GetSnapshot())
	validation.DefaultSnapshot(snap)
	if errs := validation.ValidateSnapshot(snap); len(errs) > 0 {
		return nil, validation.ToStatusError(apiv1.KindSnapshot, snap.GetMetadata().GetName(), errs)
	}
	snap.Metadata = userMeta(snap.Metadata)
	snap.Status = &apiv1.VirtualMachineSnapshotStatus{}
	return v.create(ctx, snap, "vm", snap.Spec.Source)
}

func (v *snapshotService) Get(ctx context.Context, req *apiv1.GetSnapshotRequest) (*apiv1.VirtualMachineSnapshot, error) {
	return v.get(ctx, req.GetKey())
}

func (v *snapshotService) List(ctx context.Context, req *apiv1.ListSnapshotsRequest) (*apiv1.ListSnapshotsResponse, error) {
	return v.list(ctx, req.GetOptions())
}

func (v *snapshotService) UpdateStatus(ctx context.Context, req *apiv1.UpdateSnapshotStatusRequest) (*apiv1.VirtualMachineSnapshot, error) {
	return v.updateStatus(ctx, req.GetSnapshot(), statusRule[*apiv1.VirtualMachineSnapshot]{
		validate: func(in *apiv1.VirtualMachineSnapshot) field.ErrorList {
			return validation.ValidateSnapshotStatus(in.GetStatus(), field.NewPath("status"))
		},
		setStatus: func(next, in *apiv1.VirtualMachineSnapshot) { next.Status = in.GetStatus() },
	})
}

func (v *snapshotService) Delete(ctx context.Context, req *apiv1.DeleteSnapshotRequest) (*apiv1.VirtualMachineSnapshot, error) {
	return v.delete(ctx, req.GetKey(), req.GetOptions())
}

func (v *snapshotService) Watch(req *apiv1.WatchSnapshotsRequest, stream apiv1.Snapshots_WatchServer) error {
	return v.watch(req.GetOptions(), stream)
}
