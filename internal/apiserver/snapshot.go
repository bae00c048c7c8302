package apiserver

import (
	"context"
	"log/slog"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// The snapshot kinds' services (snapshot.go, snapshotcontent.go,
// restore.go, clone.go; docs/snapshots.md). Users create snapshots,
// restores and clones, whose specs are immutable (there is no Update);
// the controllers and, for contents and restores, the node that holds the
// data write their status. Controllers write spec, finalizers and the
// contents themselves through the store, not through these services.

// snapshotService is KubeVirt's VirtualMachineSnapshot API.
type snapshotService struct {
	apiv1.UnimplementedSnapshotsServer
	s *Server
}

func (v *snapshotService) Create(ctx context.Context, req *apiv1.CreateSnapshotRequest) (*apiv1.VirtualMachineSnapshot, error) {
	snap, _ := proto.Clone(req.GetSnapshot()).(*apiv1.VirtualMachineSnapshot)
	if snap == nil {
		snap = &apiv1.VirtualMachineSnapshot{}
	}
	validation.DefaultSnapshot(snap)
	if errs := validation.ValidateSnapshot(snap); len(errs) > 0 {
		return nil, validation.ToStatusError(apiv1.KindSnapshot, snap.GetMetadata().GetName(), errs)
	}
	snap.Metadata = userMeta(snap.Metadata)
	snap.Status = &apiv1.VirtualMachineSnapshotStatus{}
	out, err := v.s.stores.Snapshots.Create(ctx, snap)
	if err != nil {
		return nil, toStatus(err)
	}
	v.s.log.Info("snapshot created", "snapshot", apiv1.Ref(snap.Metadata.Namespace, snap.Metadata.Name),
		"uid", out.Metadata.Uid, "vm", snap.Spec.Source)
	return out, nil
}

func (v *snapshotService) Get(ctx context.Context, req *apiv1.GetSnapshotRequest) (*apiv1.VirtualMachineSnapshot, error) {
	return getByKey(ctx, v.s.stores.Snapshots, req.GetKey())
}

func (v *snapshotService) List(ctx context.Context, req *apiv1.ListSnapshotsRequest) (*apiv1.ListSnapshotsResponse, error) {
	items, rev, cont, err := listNamespaced(ctx, v.s.stores.Snapshots, req.GetOptions())
	if err != nil {
		return nil, err
	}
	return &apiv1.ListSnapshotsResponse{Items: items, ResourceVersion: rev, Continue: cont}, nil
}

func (v *snapshotService) UpdateStatus(ctx context.Context, req *apiv1.UpdateSnapshotStatusRequest) (*apiv1.VirtualMachineSnapshot, error) {
	return statusWrite[*apiv1.VirtualMachineSnapshot]{
		kind: apiv1.KindSnapshot, st: v.s.stores.Snapshots, log: v.s.log,
		validate: func(in *apiv1.VirtualMachineSnapshot) field.ErrorList {
			return validation.ValidateSnapshotStatus(in.GetStatus(), field.NewPath("status"))
		},
		setStatus: func(next, in *apiv1.VirtualMachineSnapshot) { next.Status = in.GetStatus() },
	}.update(ctx, req.GetSnapshot())
}

func (v *snapshotService) Delete(ctx context.Context, req *apiv1.DeleteSnapshotRequest) (*apiv1.VirtualMachineSnapshot, error) {
	out, err := deleteByKey(ctx, v.s.stores.Snapshots, apiv1.KindSnapshot, req.GetKey(), req.GetOptions())
	if err != nil {
		return nil, err
	}
	v.s.log.Info("snapshot deletion requested", "snapshot", apiv1.Ref(out.GetMetadata().GetNamespace(), out.GetMetadata().GetName()))
	return out, nil
}

func (v *snapshotService) Watch(req *apiv1.WatchSnapshotsRequest, stream apiv1.Snapshots_WatchServer) error {
	return streamWatch(stream.Context(), v.s.stores.Snapshots, req.GetOptions(), func(t apiv1.EventType, o *apiv1.VirtualMachineSnapshot, rev int64) error {
		return stream.Send(&apiv1.SnapshotEvent{Type: t, Object: o, ResourceVersion: rev})
	})
}

// statusWrite is UpdateStatus of one snapshot kind: the request's status
// replaces the stored one with compare-and-swap on the version it read,
// as the instances' UpdateStatus does; the rest of the request is
// ignored, but for the one finalizer the writer may drop (dataFinalizer).
type statusWrite[T store.Object] struct {
	kind string
	st   store.Store[T]
	log  *slog.Logger
	// validate checks the request's status.
	validate func(in T) field.ErrorList
	// setStatus copies in's status onto next.
	setStatus func(next, in T)
	// nodeStatus, when set, is setStatus for a node's write: it takes
	// only the fields the node owns, so a node cannot move what its
	// controller decides (a restore's phase, its completion).
	nodeStatus func(next, in T)
	// dataFinalizer, when set, is removed from the object when the
	// request's metadata.finalizers lacks it: the node holding the data
	// (or an admin) says in the same write that the data is gone. Nodes
	// may then write objects labelled with their own node; without it
	// they may write none.
	dataFinalizer string
}

func (w statusWrite[T]) update(ctx context.Context, req T) (T, error) {
	var none T
	in, _ := proto.Clone(req).(T)
	validation.DiscardUnknown(in)
	md := in.GetMetadata()
	ns, name, err := keyOf(&apiv1.ObjectKey{Namespace: md.GetNamespace(), Name: md.GetName()})
	if err != nil {
		return none, err
	}
	rv := md.GetResourceVersion()
	if rv == 0 {
		return none, status.Error(codes.InvalidArgument, "metadata.resource_version: Required value: a status update must carry the version it read")
	}
	cur, err := w.st.Get(ctx, ns, name)
	if err != nil {
		return none, toStatus(err)
	}
	ref := apiv1.Ref(ns, name)
	if cur.GetMetadata().GetResourceVersion() != rv || (md.GetUid() != "" && md.GetUid() != cur.GetMetadata().GetUid()) {
		return none, status.Errorf(codes.Aborted, "%s %q: %s", strings.ToLower(w.kind), ref, conflictMessage)
	}
	// A node writes only what its own node holds the data of: the label
	// is the controller's, set when it made the object, and the node
	// cannot change it (metadata is not taken from the request).
	if id := IdentityFrom(ctx); id.Kind == Node {
		if w.dataFinalizer == "" {
			return none, status.Errorf(codes.PermissionDenied, "%s may not write the status of a %s", id, w.kind)
		}
		if got := cur.GetMetadata().GetLabels()[apiv1.LabelNodeName]; got != id.Node {
			return none, status.Errorf(codes.PermissionDenied, "%s %q: node %s may write only those labelled %s=%s, not one of %q",
				w.kind, ref, id.Node, apiv1.LabelNodeName, id.Node, got)
		}
	}
	if errs := w.validate(in); len(errs) > 0 {
		return none, validation.ToStatusError(w.kind, ref, errs)
	}
	next := proto.Clone(cur).(T)
	if IdentityFrom(ctx).Kind == Node && w.nodeStatus != nil {
		w.nodeStatus(next, in)
	} else {
		w.setStatus(next, in)
	}
	if f := w.dataFinalizer; f != "" && !slices.Contains(md.GetFinalizers(), f) {
		nm := next.GetMetadata()
		nm.Finalizers = slices.DeleteFunc(nm.Finalizers, func(s string) bool { return s == f })
	}
	if proto.Equal(next, cur) {
		return cur, nil
	}
	// A deleting object left with no finalizer is removed by this write
	// (store.Update), as Delete would have.
	out, err := w.st.Update(ctx, next)
	if err != nil {
		return none, toStatus(err)
	}
	if len(out.GetMetadata().GetFinalizers()) < len(cur.GetMetadata().GetFinalizers()) {
		// The end of the node's hold on the object, which may have
		// removed it: worth a line when a snapshot's data goes.
		w.log.Info(strings.ToLower(w.kind)+" data released", "object", ref, "by", IdentityFrom(ctx).String(),
			"removed", out.GetMetadata().GetDeletionTimestamp() != nil && len(out.GetMetadata().GetFinalizers()) == 0)
	}
	return out, nil
}
