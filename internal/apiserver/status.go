package apiserver

import (
	"context"
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

// Status writes (UpdateStatus): the request's status replaces the stored
// one with compare-and-swap on the version it read; the rest of the
// request is ignored. statusRequest and commitStatus are the steps every
// kind's takes; between them the kind decides who may write what (the
// instances' rules in vmi.go, the snapshot kinds' in statusRule).

// errNoStatusVersion is errNoResourceVersion for a status write.
var errNoStatusVersion = status.Error(codes.InvalidArgument, "metadata.resource_version: Required value: a status update must carry the version it read")

// statusRequest begins a status write: a copy of the request's object
// (in), the stored one (cur) and its ref, refused as a conflict unless
// cur is what the request was read from.
func (o *objects[T, L, E]) statusRequest(ctx context.Context, req T) (in, cur T, ref string, err error) {
	var none T
	in, _ = proto.Clone(req).(T)
	validation.DiscardUnknown(in)
	md := in.GetMetadata()
	ns, name, err := keyOf(&apiv1.ObjectKey{Namespace: md.GetNamespace(), Name: md.GetName()})
	if err != nil {
		return none, none, "", err
	}
	if md.GetResourceVersion() == 0 {
		return none, none, "", errNoStatusVersion
	}
	cur, err = o.st.Get(ctx, ns, name)
	if err != nil {
		return none, none, "", toStatus(err)
	}
	ref = apiv1.Ref(ns, name)
	if stale(cur, md) {
		return none, none, "", conflict(o.kind, ref)
	}
	return in, cur, ref, nil
}

// commitStatus ends a status write: next, cur with what the request may
// change, is written unless it is cur again. A deleting object left with
// no finalizer is removed by this write (store.Update), as Delete would
// have.
func (o *objects[T, L, E]) commitStatus(ctx context.Context, cur, next T) (T, error) {
	if proto.Equal(next, cur) {
		return cur, nil
	}
	out, err := o.st.Update(ctx, next)
	if err != nil {
		var none T
		return none, toStatus(err)
	}
	return out, nil
}

// nodeLabelled refuses node id's status write of the object of kind at
// ref, stored with metadata md, unless it is labelled with id's node:
// the label is the server's or a controller's, set when the object was
// made, and a status write cannot change it.
func nodeLabelled(id Identity, kind, ref string, md *apiv1.ObjectMeta) error {
	if got := md.GetLabels()[apiv1.LabelNodeName]; got != id.Node {
		return status.Errorf(codes.PermissionDenied, "%s %q: node %s may write only those labelled %s=%s, not one of %q",
			kind, ref, id.Node, apiv1.LabelNodeName, id.Node, got)
	}
	return nil
}

// statusRule is how the status of one snapshot kind is written: as the
// instances' is, but for the one finalizer the writer may drop
// (dataFinalizer), and with nodes writing only the objects of their own
// node.
type statusRule[T store.Object] struct {
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

// updateStatus is UpdateStatus of a snapshot kind, by rule r.
func (o *objects[T, L, E]) updateStatus(ctx context.Context, req T, r statusRule[T]) (T, error) {
	var none T
	in, cur, ref, err := o.statusRequest(ctx, req)
	if err != nil {
		return none, err
	}
	// A node writes only what its own node holds the data of: the label
	// is the controller's, set when it made the object, and the node
	// cannot change it (metadata is not taken from the request).
	if id := IdentityFrom(ctx); id.Kind == Node {
		if r.dataFinalizer == "" {
			return none, status.Errorf(codes.PermissionDenied, "%s may not write the status of a %s", id, o.kind)
		}
		if err := nodeLabelled(id, o.kind, ref, cur.GetMetadata()); err != nil {
			return none, err
		}
	}
	if errs := r.validate(in); len(errs) > 0 {
		return none, validation.ToStatusError(o.kind, ref, errs)
	}
	next := proto.Clone(cur).(T)
	if IdentityFrom(ctx).Kind == Node && r.nodeStatus != nil {
		r.nodeStatus(next, in)
	} else {
		r.setStatus(next, in)
	}
	if f := r.dataFinalizer; f != "" && !slices.Contains(in.GetMetadata().GetFinalizers(), f) {
		nm := next.GetMetadata()
		nm.Finalizers = slices.DeleteFunc(nm.Finalizers, func(s string) bool { return s == f })
	}
	out, err := o.commitStatus(ctx, cur, next)
	if err != nil {
		return none, err
	}
	if len(out.GetMetadata().GetFinalizers()) < len(cur.GetMetadata().GetFinalizers()) {
		// The end of the node's hold on the object, which may have
		// removed it: worth a line when a snapshot's data goes.
		o.log.Info(strings.ToLower(o.kind)+" data released", "object", ref, "by", IdentityFrom(ctx).String(),
			"removed", out.GetMetadata().GetDeletionTimestamp() != nil && len(out.GetMetadata().GetFinalizers()) == 0)
	}
	return out, nil
}
