package apiserver

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// Users' updates (VMs, images, replica sets, pools) replace spec, labels
// and annotations; the server keeps the rest, status included. Every
// write of a stored object, theirs and the status writes (status.go),
// says which version it read: the compare-and-swap makes concurrent
// writers lose loudly instead of silently overwriting each other.

// errNoResourceVersion refuses an update that does not say which version
// it read: without it the compare-and-swap could not tell a lost update.
var errNoResourceVersion = status.Error(codes.InvalidArgument, "metadata.resource_version: Required value: an update must carry the version it read")

// stale reports whether cur is no longer what the request's metadata md
// was read from: another version, or, when md names a uid, another
// object of the same name. (Updates of VMs and the replica kinds default
// the uid and refuse another one in validation, before this is asked.)
func stale(cur store.Object, md *apiv1.ObjectMeta) bool {
	return cur.GetMetadata().GetResourceVersion() != md.GetResourceVersion() ||
		(md.GetUid() != "" && md.GetUid() != cur.GetMetadata().GetUid())
}

// withUserChanges is old with what a client's update may change: in's
// labels and annotations, and its spec (setSpec puts it on next and
// reports whether that changed it), the generation counting a spec
// change. changed is false when next is old again, so the caller writes
// nothing. One rule for every kind the API updates this way (VMs, images,
// replica sets, pools).
func withUserChanges[T store.Object](old, in T, setSpec func(next T) (specChanged bool)) (next T, changed bool) {
	next = proto.Clone(old).(T)
	m := next.GetMetadata()
	m.Labels = in.GetMetadata().GetLabels()
	m.Annotations = in.GetMetadata().GetAnnotations()
	if setSpec(next) {
		m.Generation++
	}
	return next, !proto.Equal(next, old)
}

// replaceSpec sets *spec to in and reports whether that changed it: the
// setSpec of withUserChanges for a kind whose spec is one message.
func replaceSpec[M proto.Message](spec *M, in M) bool {
	changed := !proto.Equal(*spec, in)
	*spec = in
	return changed
}

// update is Update of a replica kind (replica sets, pools), as
// vmService.Update is a VM's: in is the request's object, defaulted;
// admit checks it against the stored one, which it must name by its
// version; setSpec is withUserChanges'. The status stays the stored one.
func (o *objects[T, L, E]) update(ctx context.Context, in T, admit func(in, old T) error, setSpec func(next, in T) bool) (T, error) {
	var none T
	md := in.GetMetadata()
	if md.GetResourceVersion() == 0 {
		return none, errNoResourceVersion
	}
	ref := apiv1.Ref(md.GetNamespace(), md.GetName())
	old, err := o.get(ctx, &apiv1.ObjectKey{Namespace: md.GetNamespace(), Name: md.GetName()})
	if err != nil {
		return none, err
	}
	if md.Uid == "" {
		md.Uid = old.GetMetadata().GetUid() // not given: this object; admit refuses a different one
	}
	if err := admit(in, old); err != nil {
		return none, err
	}
	if stale(old, md) {
		return none, conflict(o.kind, ref)
	}
	next, changed := withUserChanges(old, in, func(n T) bool { return setSpec(n, in) })
	if !changed {
		return old, nil
	}
	out, err := o.st.Update(ctx, next)
	if err != nil {
		return none, toStatus(err)
	}
	o.log.Info(o.noun+" updated", o.attr, ref, "generation", out.GetMetadata().GetGeneration())
	return out, nil
}
