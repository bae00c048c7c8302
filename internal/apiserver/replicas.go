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

// What the replica kinds' services (replicaset.go, pool.go) share. Both
// follow vmService: the API defaults and validates, owns metadata and
// status, and counts spec changes in the generation; their controllers
// write the status and the finalizers through the store.

// userMeta is the part of metadata a client may set on create; the rest
// (uid, versions, timestamps, finalizers, owners) is the server's.
func userMeta(m *apiv1.ObjectMeta) *apiv1.ObjectMeta {
	return &apiv1.ObjectMeta{Namespace: m.GetNamespace(), Name: m.GetName(), Labels: m.GetLabels(), Annotations: m.GetAnnotations()}
}

// withUserChanges is old with what a client's update may change: in's
// labels and annotations, and its spec (setSpec copies it onto next),
// the generation counting a spec change (specChanged). changed is false
// when next is old again, so the caller writes nothing. One rule for
// every kind the API updates this way (VMs, images, replica sets,
// pools).
func withUserChanges[T interface {
	proto.Message
	GetMetadata() *apiv1.ObjectMeta
}](old, in T, specChanged bool, setSpec func(next T)) (next T, changed bool) {
	next = proto.Clone(old).(T)
	m := next.GetMetadata()
	m.Labels = in.GetMetadata().GetLabels()
	m.Annotations = in.GetMetadata().GetAnnotations()
	if specChanged {
		m.Generation++
	}
	setSpec(next)
	return next, !proto.Equal(next, old)
}

// errNoResourceVersion refuses an update that does not say which version
// it read: without it the compare-and-swap could not tell a lost update.
var errNoResourceVersion = status.Error(codes.InvalidArgument, "metadata.resource_version: Required value: an update must carry the version it read")

// scaleObject is Scale of a replica kind: set changes spec.replicas of
// the current object to n and reports whether it changed anything. The
// write is a compare-and-swap retried on conflict, so the controller's
// status writes in between are kept and none of them is lost; a change
// counts in the generation, as Update's do.
func scaleObject[T store.Object](ctx context.Context, st store.Store[T], kind string, req *apiv1.ScaleRequest, set func(cur T, n int32) bool) (T, error) {
	var none T
	ns, name, err := keyOf(req.GetKey())
	if err != nil {
		return none, err
	}
	n := req.GetReplicas()
	if errs := validation.ValidateReplicas(n, field.NewPath("replicas")); len(errs) > 0 {
		return none, validation.ToStatusError(kind, apiv1.Ref(ns, name), errs)
	}
	out, err := st.GuaranteedUpdate(ctx, ns, name, func(cur T) (T, error) {
		if set(cur, n) {
			cur.GetMetadata().Generation++
		}
		return cur, nil
	})
	if err != nil {
		return none, toStatus(err)
	}
	return out, nil
}
