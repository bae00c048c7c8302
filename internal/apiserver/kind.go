package apiserver

import (
	"context"
	"log/slog"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// What the services of the namespaced kinds (VMs, instances, migrations,
// the replica and the snapshot kinds) do the same way: read an object by
// its key, list a page, watch, store what a user created, delete with
// preconditions, and the steps of their updates (update.go, status.go).
// Each service embeds the objects of its kind and answers those calls in
// one line, so that its own file holds what is particular to the kind:
// defaulting, admission, what its writers may change. Nodes and images
// are cluster-scoped and keep calls of their own.

// objects is one kind as its service serves it: its store, its names in
// errors and logs, and its own messages for a List response (L) and a
// watch event (E).
type objects[T store.Object, L, E any] struct {
	st  store.Store[T]
	log *slog.Logger
	// kind names it in errors: apiv1.KindPool.
	kind string
	// noun and attr name it in log lines: "pool created", pool=<ref>.
	noun, attr string
	// listResponse and event wrap a page of a list and a watch event in
	// the kind's messages.
	listResponse func(store.Page[T]) L
	event        func(apiv1.EventType, T, int64) *E
}

// keyOf is the namespace and name a request names an object by, checked
// as stored objects' are (DNS-1123 labels), so that a name no object can
// have is InvalidArgument before it reaches the store.
func keyOf(k *apiv1.ObjectKey) (string, string, error) {
	ns, name := k.GetNamespace(), k.GetName()
	if ns == "" {
		ns = apiv1.DefaultNamespace
	}
	if errs := validation.ValidateObjectKey(ns, name, field.NewPath("key")); len(errs) > 0 {
		return "", "", validation.ToStatusError("ObjectKey", apiv1.Ref(ns, name), errs)
	}
	return ns, name, nil
}

// checkSelector refuses a label selector of a list or watch that is too
// large to match against every object (validation.ValidateLabelSelector).
func checkSelector(s string) error {
	return validation.ToStatusError("LabelSelector", "", validation.ValidateLabelSelector(s, field.NewPath("options", "label_selector")))
}

// get is Get: the key is checked before the store is asked.
func (o *objects[T, L, E]) get(ctx context.Context, key *apiv1.ObjectKey) (T, error) {
	ns, name, err := keyOf(key)
	if err != nil {
		var none T
		return none, err
	}
	out, err := o.st.Get(ctx, ns, name)
	return out, toStatus(err)
}

// list is List, a page at a time when the options have a limit or a
// continue token: the selector is checked before the store is asked.
// Authorization checked this request's options (a node's selector pins
// its own node), and every page is a request of its own that is checked
// again and filtered by its own selector: a token carries only where to
// go on and at which revision, no permission.
func (o *objects[T, L, E]) list(ctx context.Context, opts *apiv1.ListOptions) (L, error) {
	var none L
	if err := checkSelector(opts.GetLabelSelector()); err != nil {
		return none, err
	}
	p, err := o.st.ListPage(ctx, listOptions(opts), opts.GetLimit(), opts.GetContinue())
	if err != nil {
		return none, toStatus(err)
	}
	return o.listResponse(p), nil
}

func listOptions(o *apiv1.ListOptions) store.ListOptions {
	return store.ListOptions{Namespace: o.GetNamespace(), LabelSelector: o.GetLabelSelector()}
}

// watch is Watch: the store's events, each sent as the kind's event.
func (o *objects[T, L, E]) watch(opts *apiv1.WatchOptions, stream grpc.ServerStreamingServer[E]) error {
	return streamWatch(stream.Context(), o.st, opts, func(t apiv1.EventType, obj T, rev int64) error {
		return stream.Send(o.event(t, obj, rev))
	})
}

// requestCopy is a copy of the object a request carries, the server's to
// default and trim without touching the caller's; an empty one when the
// request has none.
func requestCopy[T proto.Message](m T) T {
	if !m.ProtoReflect().IsValid() {
		return m.ProtoReflect().Type().New().Interface().(T)
	}
	return proto.Clone(m).(T)
}

// userMeta is the part of metadata a client may set on create; the rest
// (uid, versions, timestamps, finalizers, owners) is the server's.
func userMeta(m *apiv1.ObjectMeta) *apiv1.ObjectMeta {
	return &apiv1.ObjectMeta{Namespace: m.GetNamespace(), Name: m.GetName(), Labels: m.GetLabels(), Annotations: m.GetAnnotations()}
}

// create ends a Create: obj, the request's object once defaulted and
// admitted, with userMeta and the kind's first status, is stored and
// logged with attrs after its ref and uid.
func (o *objects[T, L, E]) create(ctx context.Context, obj T, attrs ...any) (T, error) {
	out, err := o.st.Create(ctx, obj)
	if err != nil {
		var none T
		return none, toStatus(err)
	}
	md := obj.GetMetadata()
	o.log.Info(o.noun+" created", append([]any{o.attr, apiv1.Ref(md.GetNamespace(), md.GetName()), "uid", out.GetMetadata().GetUid()}, attrs...)...)
	return out, nil
}

// delete is Delete of a kind that takes DeleteOptions: the key and the
// uid precondition are checked before the store is asked, and the
// request is logged with attrs. An object with finalizers gets its
// deletion timestamp and stays until they are removed.
func (o *objects[T, L, E]) delete(ctx context.Context, key *apiv1.ObjectKey, opts *apiv1.DeleteOptions, attrs ...any) (T, error) {
	var none T
	ns, name, err := keyOf(key)
	if err != nil {
		return none, err
	}
	if uid := opts.GetUid(); uid != "" {
		if errs := validation.ValidateUID(uid, field.NewPath("options", "uid")); len(errs) > 0 {
			return none, validation.ToStatusError(o.kind, name, errs)
		}
	}
	out, _, err := o.st.Delete(ctx, ns, name, store.DeleteOptions{UID: opts.GetUid(), ResourceVersion: opts.GetResourceVersion()})
	if err != nil {
		return none, toStatus(err)
	}
	md := out.GetMetadata()
	o.log.Info(o.noun+" deletion requested", append([]any{o.attr, apiv1.Ref(md.GetNamespace(), md.GetName())}, attrs...)...)
	return out, nil
}
