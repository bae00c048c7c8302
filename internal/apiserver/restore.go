package apiserver

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
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
	s *Server
}

func (v *restoreService) Create(ctx context.Context, req *apiv1.CreateRestoreRequest) (*apiv1.VirtualMachineRestore, error) {
	r, _ := proto.Clone(req.GetRestore()).(*apiv1.VirtualMachineRestore)
	if r == nil {
		r = &apiv1.VirtualMachineRestore{}
	}
	validation.DefaultRestore(r)
	if errs := validation.ValidateRestore(r); len(errs) > 0 {
		return nil, validation.ToStatusError(apiv1.KindRestore, r.GetMetadata().GetName(), errs)
	}
	if err := v.refuseConcurrent(ctx, r); err != nil {
		return nil, err
	}
	r.Metadata = userMeta(r.Metadata)
	r.Status = &apiv1.VirtualMachineRestoreStatus{}
	out, err := v.s.stores.Restores.Create(ctx, r)
	if err != nil {
		return nil, toStatus(err)
	}
	v.s.log.Info("restore created", "restore", apiv1.Ref(r.Metadata.Namespace, r.Metadata.Name),
		"uid", out.Metadata.Uid, "target", r.Spec.Target, "snapshot", r.Spec.Snapshot)
	return out, nil
}

// refuseConcurrent is KubeVirt's admission rule: one restore at a time
// per target, or two would stage and swap the same volumes. A restore
// counts until it is complete or has failed. Two creates racing past this
// check both get in (as with KubeVirt's webhook); the target's
// restore_in_progress lock then holds the second back until the first
// is done.
func (v *restoreService) refuseConcurrent(ctx context.Context, r *apiv1.VirtualMachineRestore) error {
	others, _, err := v.s.stores.Restores.List(ctx, store.ListOptions{Namespace: r.Metadata.Namespace})
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
	return getByKey(ctx, v.s.stores.Restores, req.GetKey())
}

func (v *restoreService) List(ctx context.Context, req *apiv1.ListRestoresRequest) (*apiv1.ListRestoresResponse, error) {
	items, rev, cont, err := listNamespaced(ctx, v.s.stores.Restores, req.GetOptions())
	if err != nil {
		return nil, err
	}
	return &apiv1.ListRestoresResponse{Items: items, ResourceVersion: rev, Continue: cont}, nil
}

func (v *restoreService) UpdateStatus(ctx context.Context, req *apiv1.UpdateRestoreStatusRequest) (*apiv1.VirtualMachineRestore, error) {
	return statusWrite[*apiv1.VirtualMachineRestore]{
		kind: apiv1.KindRestore, st: v.s.stores.Restores, log: v.s.log,
		validate: func(in *apiv1.VirtualMachineRestore) field.ErrorList {
			return validation.ValidateRestoreStatus(in.GetStatus(), field.NewPath("status"))
		},
		setStatus:     func(next, in *apiv1.VirtualMachineRestore) { next.Status = in.GetStatus() },
		nodeStatus:    setNodeRestoreStatus,
		dataFinalizer: apiv1.FinalizerRestoreData,
	}.update(ctx, req.GetRestore())
}

func (v *restoreService) Delete(ctx context.Context, req *apiv1.DeleteRestoreRequest) (*apiv1.VirtualMachineRestore, error) {
	out, err := deleteByKey(ctx, v.s.stores.Restores, apiv1.KindRestore, req.GetKey(), req.GetOptions())
	if err != nil {
		return nil, err
	}
	v.s.log.Info("restore deletion requested", "restore", apiv1.Ref(out.GetMetadata().GetNamespace(), out.GetMetadata().GetName()))
	return out, nil
}

func (v *restoreService) Watch(req *apiv1.WatchRestoresRequest, stream apiv1.Restores_WatchServer) error {
	return streamWatch(stream.Context(), v.s.stores.Restores, req.GetOptions(), func(t apiv1.EventType, o *apiv1.VirtualMachineRestore, rev int64) error {
		return stream.Send(&apiv1.RestoreEvent{Type: t, Object: o, ResourceVersion: rev})
	})
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
