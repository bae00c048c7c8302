package apiserver

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// restoreService is KubeVirt's VirtualMachineRestore API. The restore
// controller drives a restore; the node labelled on it stages and swaps
// the volumes, writes its status and drops FinalizerRestoreData once its
// staged copies are gone.
type restoreService struct {
	apiv1.UnimplementedRestoresServer
	objects[*apiv1.VirtualMachineRestore, *apiv1.ListRestoresResponse, apiv1.RestoreEvent]
}

func newRestoreService(s *Server) apiv1.RestoresServer {
	return &restoreService{objects: objects[*apiv1.VirtualMachineRestore, *apiv1.ListRestoresResponse, apiv1.RestoreEvent]{
		st: s.stores.Restores, log: s.log, kind: apiv1.KindRestore, noun: "restore", attr: "restore",
		listResponse: func(p store.Page[*apiv1.VirtualMachineRestore]) *apiv1.ListRestoresResponse {
			return &apiv1.ListRestoresResponse{Items: p.Items, ResourceVersion: p.Revision, Continue: p.Continue}
		},
		event: func(t apiv1.EventType, o *apiv1.VirtualMachineRestore, rev int64) *apiv1.RestoreEvent {
			return &apiv1.RestoreEvent{Type: t, Object: o, ResourceVersion: rev}
		},
	}}
}

func (v *restoreService) Create(ctx context.Context, req *apiv1.CreateRestoreRequest) (*apiv1.VirtualMachineRestore, error) {
	r := requestCopy(req.GetRestore())
	validation.DefaultRestore(r)
	if errs := validation.ValidateRestore(r); len(errs) > 0 {
		return nil, validation.ToStatusError(apiv1.KindRestore, r.GetMetadata().GetName(), errs)
	}
	if err := v.refuseConcurrent(ctx, r); err != nil {
		return nil, err
	}
	r.Metadata = userMeta(r.Metadata)
	r.Status = &apiv1.VirtualMachineRestoreStatus{}
	return v.create(ctx, r, "target", r.Spec.Target, "snapshot", r.Spec.Snapshot)
}

// refuseConcurrent is KubeVirt's admission rule: one restore at a time
// per target, or two would stage and swap the same volumes. A restore
// counts until it is complete or has failed. Two creates racing past this
// check both get in (as with KubeVirt's webhook); the target's
// restore_in_progress lock then holds the second back until the first
// is done.
func (v *restoreService) refuseConcurrent(ctx context.Context, r *apiv1.VirtualMachineRestore) error {
	others, _, err := v.st.List(ctx, store.ListOptions{Namespace: r.Metadata.Namespace})
	if err != nil {
		return toStatus(err)
	}
	for _, o := range others {
		if o.GetMetadata().GetName() == r.Metadata.Name {
			continue // the create itself answers AlreadyExists
		}
		if o.GetSpec().GetTarget() == r.Spec.Target && !o.GetStatus().GetComplete() && o.GetStatus().GetPhase() != apiv1.RestoreFailed {
			return status.Errorf(codes.FailedPrecondition, "VirtualMachineRestore %q in progress", o.GetMetadata().GetName())
		}
	}
	return nil
}

func (v *restoreService) Get(ctx context.Context, req *apiv1.GetRestoreRequest) (*apiv1.VirtualMachineRestore, error) {
	return v.get(ctx, req.GetKey())
}

func (v *restoreService) List(ctx context.Context, req *apiv1.ListRestoresRequest) (*apiv1.ListRestoresResponse, error) {
	return v.list(ctx, req.GetOptions())
}

func (v *restoreService) UpdateStatus(ctx context.Context, req *apiv1.UpdateRestoreStatusRequest) (*apiv1.VirtualMachineRestore, error) {
	return v.updateStatus(ctx, req.GetRestore(), statusRule[*apiv1.VirtualMachineRestore]{
		validate: func(in *apiv1.VirtualMachineRestore) field.ErrorList {
			return validation.ValidateRestoreStatus(in.GetStatus(), field.NewPath("status"))
		},
		setStatus:     func(next, in *apiv1.VirtualMachineRestore) { next.Status = in.GetStatus() },
		nodeStatus:    setNodeRestoreStatus,
		dataFinalizer: apiv1.FinalizerRestoreData,
	})
}

func (v *restoreService) Delete(ctx context.Context, req *apiv1.DeleteRestoreRequest) (*apiv1.VirtualMachineRestore, error) {
	return v.delete(ctx, req.GetKey(), req.GetOptions())
}

func (v *restoreService) Watch(req *apiv1.WatchRestoresRequest, stream apiv1.Restores_WatchServer) error {
	return v.watch(req.GetOptions(), stream)
}

// setNodeRestoreStatus takes from a node's write what the node reports
// (docs/snapshots.md): its copies staged, swapped, its error and what it
// does now. The phase, the commit point, completion and the rest are the
// restore controller's.
func setNodeRestoreStatus(next, in *apiv1.VirtualMachineRestore) {
	if next.Status == nil {
		next.Status = &apiv1.VirtualMachineRestoreStatus{}
	}
	st := in.GetStatus()
	next.Status.Staged, next.Status.Swapped = st.GetStaged(), st.GetSwapped()
	next.Status.Error, next.Status.Message = st.GetError(), st.GetMessage()
}
