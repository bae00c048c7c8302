package apiserver

import (
	"context"
	"errors"
	"slices"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// What the identity services (users, service accounts, credentials, role
// bindings; users.go and the files beside it) share: reading, updating
// and deleting the cluster-scoped kinds by name, as objects does the
// namespaced ones by key, and taking a subject out of everything that
// names it when it goes.

// errNoIdentities answers every call of a server built without the
// identity stores (tests).
var errNoIdentities = status.Error(codes.Unimplemented, "this server serves no users, service accounts, credentials or role bindings")

// checkClusterName refuses a name no cluster-scoped object can have
// before the store is asked.
func checkClusterName(kind, name string) error {
	var errs field.ErrorList
	if name == "" {
		errs = append(errs, field.Required(field.NewPath("name"), ""))
	} else {
		errs = validation.ValidateObjectMeta(&apiv1.ObjectMeta{Name: name}, false, field.NewPath(""))
	}
	return validation.ToStatusError(kind, name, errs)
}

// getNamed reads a cluster-scoped object by name.
func getNamed[T store.Object](ctx context.Context, st store.Store[T], kind, name string) (T, error) {
	if err := checkClusterName(kind, name); err != nil {
		var none T
		return none, err
	}
	out, err := st.Get(ctx, "", name)
	return out, toStatus(err)
}

// deleteNamed deletes a cluster-scoped object by name, with the
// preconditions of opts.
func deleteNamed[T store.Object](ctx context.Context, st store.Store[T], kind, name string, opts *apiv1.DeleteOptions) (T, error) {
	var none T
	if err := checkClusterName(kind, name); err != nil {
		return none, err
	}
	if uid := opts.GetUid(); uid != "" {
		if errs := validation.ValidateUID(uid, field.NewPath("options", "uid")); len(errs) > 0 {
			return none, validation.ToStatusError(kind, name, errs)
		}
	}
	out, _, err := st.Delete(ctx, "", name, store.DeleteOptions{UID: opts.GetUid(), ResourceVersion: opts.GetResourceVersion()})
	return out, toStatus(err)
}

// updateNamed is Update of a cluster-scoped kind: in names the version it
// read; labels, annotations and the spec (setSpec) are taken.
func updateNamed[T store.Object](ctx context.Context, st store.Store[T], kind string, in T, setSpec func(next, in T) bool) (T, error) {
	var none T
	md := in.GetMetadata()
	if md.GetResourceVersion() == 0 {
		return none, errNoResourceVersion
	}
	old, err := getNamed(ctx, st, kind, md.GetName())
	if err != nil {
		return none, err
	}
	if stale(old, md) {
		return none, conflict(kind, md.GetName())
	}
	next, changed := withUserChanges(old, in, func(n T) bool { return setSpec(n, in) })
	if !changed {
		return old, nil
	}
	out, err := st.Update(ctx, next)
	return out, toStatus(err)
}

// forgetSubject revokes every credential of sub and takes it out of
// every binding (a binding left with no subject is deleted), so that a
// user or service account made again under the same name starts with
// nothing. Deleting a user or service account calls it first: a failure
// leaves the record, and the delete can be retried.
func (s *Server) forgetSubject(ctx context.Context, sub *apiv1.Subject, by string) error {
	key := subjectKey(sub)
	creds, _, err := s.stores.Credentials.List(ctx, store.ListOptions{})
	if err != nil {
		return toStatus(err)
	}
	for _, cr := range creds {
		if subjectKey(cr.GetSpec().GetSubject()) != key || cr.GetSpec().GetRevoked() {
			continue
		}
		if _, err := s.revokeCredential(ctx, cr.GetMetadata().GetName(), by); err != nil && status.Code(err) != codes.NotFound {
			return err
		}
	}
	if err := dropSubject(ctx, s.stores.RoleBindings, key); err != nil {
		return err
	}
	return dropSubject(ctx, s.stores.ClusterRoleBindings, key)
}

// binding is a RoleBinding or a ClusterRoleBinding.
type binding interface {
	store.Object
	GetSpec() *apiv1.RoleBindingSpec
}

// dropSubject removes the subject key from every binding in st.
func dropSubject[T binding](ctx context.Context, st store.Store[T], key string) error {
	all, _, err := st.List(ctx, store.ListOptions{})
	if err != nil {
		return toStatus(err)
	}
	named := func(s *apiv1.Subject) bool { return subjectKey(s) == key }
	for _, b := range all {
		if !slices.ContainsFunc(b.GetSpec().GetSubjects(), named) {
			continue
		}
		md := b.GetMetadata()
		if len(b.GetSpec().GetSubjects()) == 1 {
			_, _, err := st.Delete(ctx, md.GetNamespace(), md.GetName(), store.DeleteOptions{UID: md.GetUid(), ResourceVersion: md.GetResourceVersion()})
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				return toStatus(err)
			}
			continue
		}
		_, err := st.GuaranteedUpdate(ctx, md.GetNamespace(), md.GetName(), func(cur T) (T, error) {
			next := proto.Clone(cur).(T)
			next.GetSpec().Subjects = slices.DeleteFunc(next.GetSpec().Subjects, named)
			return next, nil
		})
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return toStatus(err)
		}
	}
	return nil
}
