package apiserver

import (
	"context"
	"log/slog"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// What the services of the cluster-scoped admin kinds holding a
// write-only secret (a StorageClass's spec.rbd.key, a BackupTarget's
// spec.s3.secret_key) do the same way. The secret is stored with the
// object and leaves the server only through Connect, to a node the object
// selects: every other read (Get, List, Watch, the answer to a write)
// carries status.key_set instead, and an update that leaves the secret
// empty keeps the stored one. One mechanism, so that a rule of it (what
// a reader sees, who may connect) cannot differ between the kinds.

// nodeSelecting is an object with a node selector.
type nodeSelecting interface {
	store.Object
	SelectsNode(labels map[string]string) bool
}

// secretObjects is one such kind as its service serves it.
type secretObjects[T nodeSelecting] struct {
	st   store.Store[T]
	s    *Server
	log  *slog.Logger
	kind string // names it in errors: apiv1.KindStorageClass
	// noun and attr name it in log lines and errors: "storage class",
	// class=<name>.
	noun, attr string
	// secret points at obj's write-only secret, nil when obj's spec has
	// none (another kind of class or target).
	secret func(obj T) *string
	// setKeySet writes status.key_set, making the status if there is none.
	setKeySet func(obj T, set bool)
	// newStatus gives a created object its first status.
	newStatus func(obj T)
	// specKind names what obj's spec is (rbd, s3, ...) in the create log line.
	specKind func(obj T) string
	// validate and validateUpdate admit a user's object (the update with
	// the stored secret already kept).
	validate       func(obj T, create bool) field.ErrorList
	validateUpdate func(in, old T) field.ErrorList
}

// withoutSecret is obj as readers see it: no secret, key_set saying
// whether one is stored.
func (o *secretObjects[T]) withoutSecret(obj T) T {
	if !obj.ProtoReflect().IsValid() {
		return obj
	}
	out := proto.Clone(obj).(T)
	p := o.secret(out)
	o.setKeySet(out, p != nil && *p != "")
	if p != nil {
		*p = ""
	}
	return out
}

func (o *secretObjects[T]) store() (store.Store[T], error) {
	if o.st == nil {
		return nil, status.Errorf(codes.Unimplemented, "this server serves no %ss", o.noun)
	}
	return o.st, nil
}

func (o *secretObjects[T]) checkName(name string) error {
	errs := validation.ValidateObjectMeta(&apiv1.ObjectMeta{Name: name}, false, field.NewPath("name"))
	return validation.ToStatusError(o.kind, name, errs)
}

// create stores the request's object: validated, with the metadata a
// user may set and the first status.
func (o *secretObjects[T]) create(ctx context.Context, in T) (T, error) {
	var none T
	st, err := o.store()
	if err != nil {
		return none, err
	}
	obj := requestCopy(in)
	validation.DiscardUnknown(obj)
	if errs := o.validate(obj, true); len(errs) > 0 {
		return none, validation.ToStatusError(o.kind, obj.GetMetadata().GetName(), errs)
	}
	m := obj.GetMetadata()
	name, labels, annotations := m.GetName(), m.GetLabels(), m.GetAnnotations()
	proto.Reset(m) // the rest (uid, versions, finalizers, ...) is the server's
	m.Name, m.Labels, m.Annotations = name, labels, annotations
	o.newStatus(obj)
	out, err := st.Create(ctx, obj)
	if err != nil {
		return none, toStatus(err)
	}
	o.log.Info(o.noun+" created", o.attr, name, "kind", o.specKind(obj))
	return o.withoutSecret(out), nil
}

// getWithSecret is the stored object, secret included: for Connect and
// the server's own checks, never for a reader.
func (o *secretObjects[T]) getWithSecret(ctx context.Context, name string) (T, error) {
	var none T
	st, err := o.store()
	if err != nil {
		return none, err
	}
	if err := o.checkName(name); err != nil {
		return none, err
	}
	out, err := st.Get(ctx, "", name)
	if err != nil {
		return none, toStatus(err)
	}
	return out, nil
}

func (o *secretObjects[T]) get(ctx context.Context, name string) (T, error) {
	out, err := o.getWithSecret(ctx, name)
	if err != nil {
		return out, err
	}
	return o.withoutSecret(out), nil
}

func (o *secretObjects[T]) list(ctx context.Context, selector string) ([]T, int64, error) {
	st, err := o.store()
	if err != nil {
		return nil, 0, err
	}
	if err := checkSelector(selector); err != nil {
		return nil, 0, err
	}
	items, rev, err := st.List(ctx, store.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, 0, toStatus(err)
	}
	for i, obj := range items {
		items[i] = o.withoutSecret(obj)
	}
	return items, rev, nil
}

// update replaces labels, annotations and the spec; an empty secret
// keeps the stored one. setSpec is withUserChanges'.
func (o *secretObjects[T]) update(ctx context.Context, req T, setSpec func(next, in T) bool) (T, error) {
	var none T
	st, err := o.store()
	if err != nil {
		return none, err
	}
	in := requestCopy(req)
	validation.DiscardUnknown(in)
	if in.GetMetadata().GetResourceVersion() == 0 {
		return none, errNoResourceVersion
	}
	name := in.GetMetadata().GetName()
	if errs := o.validate(in, false); len(errs) > 0 {
		return none, validation.ToStatusError(o.kind, name, errs)
	}
	old, err := st.Get(ctx, "", name)
	if err != nil {
		return none, toStatus(err)
	}
	if p := o.secret(in); p != nil && *p == "" {
		if q := o.secret(old); q != nil {
			*p = *q
		}
	}
	if errs := o.validateUpdate(in, old); len(errs) > 0 {
		return none, validation.ToStatusError(o.kind, name, errs)
	}
	if stale(old, in.GetMetadata()) {
		return none, conflict(o.kind, name)
	}
	next, changed := withUserChanges(old, in, func(n T) bool { return setSpec(n, in) })
	if !changed {
		return o.withoutSecret(old), nil
	}
	out, err := st.Update(ctx, next)
	if err != nil {
		return none, toStatus(err)
	}
	o.log.Info(o.noun+" updated", o.attr, name)
	return o.withoutSecret(out), nil
}

// delete deletes name unless users (what still needs it) lists something;
// inUse says why that refuses.
func (o *secretObjects[T]) delete(ctx context.Context, name string, users func(ctx context.Context, name string) ([]string, error), inUse string) (T, error) {
	var none T
	st, err := o.store()
	if err != nil {
		return none, err
	}
	if err := o.checkName(name); err != nil {
		return none, err
	}
	us, err := users(ctx, name)
	if err != nil {
		return none, err
	}
	if len(us) > 0 {
		return none, status.Errorf(codes.FailedPrecondition, "%s %q is in use by %s: %s", o.noun, name, joinUsers(us), inUse)
	}
	out, _, err := st.Delete(ctx, "", name, store.DeleteOptions{})
	if err != nil {
		return none, toStatus(err)
	}
	o.log.Info(o.noun+" deleted", o.attr, name)
	return o.withoutSecret(out), nil
}

func (o *secretObjects[T]) watch(ctx context.Context, opts *apiv1.WatchOptions, send func(apiv1.EventType, T, int64) error) error {
	st, err := o.store()
	if err != nil {
		return err
	}
	return clusterWatch(ctx, st, opts, func(t apiv1.EventType, obj T, rev int64) error {
		return send(t, o.withoutSecret(obj), rev)
	})
}

// connect is the object with its secret, for an admin (they wrote it) or
// for a node the object selects, by the labels the server holds for it
// (which a node cannot set beyond its own node.virtplane.io/ ones).
// nodeMay, when not nil, checks first what else the kind asks of a node.
func (o *secretObjects[T]) connect(ctx context.Context, name string, nodeMay func(node string) error) (T, error) {
	var none T
	if _, err := o.store(); err != nil {
		return none, err
	}
	if err := o.checkName(name); err != nil {
		return none, err
	}
	id := IdentityFrom(ctx)
	if id.Kind == Node && nodeMay != nil {
		if err := nodeMay(id.Node); err != nil {
			return none, err
		}
	}
	obj, err := o.getWithSecret(ctx, name)
	if err != nil {
		return none, err
	}
	if id.Kind == Node {
		node, err := o.s.stores.Nodes.Get(ctx, "", id.Node)
		if err != nil {
			return none, toStatus(err)
		}
		if !obj.SelectsNode(node.GetMetadata().GetLabels()) {
			return none, status.Errorf(codes.PermissionDenied, "%s %q does not select node %s (spec.node_selector)", o.noun, name, id.Node)
		}
	}
	return obj, nil
}
