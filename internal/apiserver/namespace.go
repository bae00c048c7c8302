package apiserver

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// namespaceService serves Namespaces: cluster-admins set a namespace's
// quota and allowed host resources (the spec); its usage (status.used)
// is the store's, kept in the transaction of every write that changes it
// (store.Options.Accounting). Who may call what is authz.go's.
type namespaceService struct {
	apiv1.UnimplementedNamespacesServer
	s  *Server
	st store.Store[*apiv1.Namespace]
}

func newNamespaceService(s *Server) apiv1.NamespacesServer {
	if s.stores.Namespaces == nil {
		return apiv1.UnimplementedNamespacesServer{}
	}
	return &namespaceService{s: s, st: s.stores.Namespaces}
}

// namespaceName checks a name a request reads a namespace by.
func namespaceName(name string) error {
	if errs := validation.ValidateNamespace(&apiv1.Namespace{Metadata: &apiv1.ObjectMeta{Name: name}}); len(errs) > 0 {
		return validation.ToStatusError(apiv1.KindNamespace, name, errs)
	}
	return nil
}

func (n *namespaceService) Create(ctx context.Context, req *apiv1.CreateNamespaceRequest) (*apiv1.Namespace, error) {
	in := requestCopy(req.GetNamespace())
	if in.Spec == nil {
		in.Spec = &apiv1.NamespaceSpec{}
	}
	if errs := validation.ValidateNamespace(in); len(errs) > 0 {
		return nil, validation.ToStatusError(apiv1.KindNamespace, in.GetMetadata().GetName(), errs)
	}
	obj := &apiv1.Namespace{Metadata: userMeta(in.Metadata), Spec: in.Spec, Status: &apiv1.NamespaceStatus{Used: &apiv1.NamespaceUsage{}}}
	out, err := n.st.Create(ctx, obj)
	if err != nil {
		return nil, toStatus(err)
	}
	n.s.log.Info("namespace created", "namespace", obj.Metadata.Name, "uid", out.GetMetadata().GetUid())
	return out, nil
}

func (n *namespaceService) Get(ctx context.Context, req *apiv1.GetNamespaceRequest) (*apiv1.Namespace, error) {
	if err := namespaceName(req.GetName()); err != nil {
		return nil, err
	}
	out, err := n.st.Get(ctx, "", req.GetName())
	return out, toStatus(err)
}

func (n *namespaceService) List(ctx context.Context, req *apiv1.ListNamespacesRequest) (*apiv1.ListNamespacesResponse, error) {
	opts := req.GetOptions()
	if err := checkSelector(opts.GetLabelSelector()); err != nil {
		return nil, err
	}
	p, err := n.st.ListPage(ctx, store.ListOptions{LabelSelector: opts.GetLabelSelector()}, opts.GetLimit(), opts.GetContinue())
	if err != nil {
		return nil, toStatus(err)
	}
	return &apiv1.ListNamespacesResponse{Items: p.Items, ResourceVersion: p.Revision, Continue: p.Continue}, nil
}

// Update takes the spec, labels and annotations. The request names the
// version it read, but a change of usage alone since then (status, which
// moves with every VM written in the namespace) does not make it stale:
// only another change of the spec (the generation) or another namespace
// of the same name does, so a quota can be set on a busy namespace.
func (n *namespaceService) Update(ctx context.Context, req *apiv1.UpdateNamespaceRequest) (*apiv1.Namespace, error) {
	in := requestCopy(req.GetNamespace())
	md := in.GetMetadata()
	if md.GetResourceVersion() == 0 {
		return nil, errNoResourceVersion
	}
	if in.Spec == nil {
		in.Spec = &apiv1.NamespaceSpec{}
	}
	if errs := validation.ValidateNamespace(in); len(errs) > 0 {
		return nil, validation.ToStatusError(apiv1.KindNamespace, md.GetName(), errs)
	}
	out, err := n.st.GuaranteedUpdate(ctx, "", md.GetName(), func(cur *apiv1.Namespace) (*apiv1.Namespace, error) {
		cmd := cur.GetMetadata()
		if (md.GetUid() != "" && md.GetUid() != cmd.GetUid()) ||
			(md.GetResourceVersion() != cmd.GetResourceVersion() && md.GetGeneration() != cmd.GetGeneration()) {
			return nil, conflict(apiv1.KindNamespace, md.GetName())
		}
		next, _ := withUserChanges(cur, in, func(next *apiv1.Namespace) bool { return replaceSpec(&next.Spec, in.Spec) })
		return next, nil
	})
	if err != nil {
		return nil, toStatus(err)
	}
	n.s.log.Info("namespace updated", "namespace", md.GetName(), "generation", out.GetMetadata().GetGeneration())
	return out, nil
}

// Delete refuses while the namespace holds any object: its objects would
// be left in a namespace that does not exist, with no quota. The store
// checks it again in the deletion's transaction (store.ErrNotEmpty), so
// an object created meanwhile fails it too; the check here names what
// remains.
func (n *namespaceService) Delete(ctx context.Context, req *apiv1.DeleteNamespaceRequest) (*apiv1.Namespace, error) {
	name := req.GetName()
	if err := namespaceName(name); err != nil {
		return nil, err
	}
	opts := req.GetOptions()
	if uid := opts.GetUid(); uid != "" {
		if errs := validation.ValidateUID(uid, field.NewPath("options", "uid")); len(errs) > 0 {
			return nil, validation.ToStatusError(apiv1.KindNamespace, name, errs)
		}
	}
	cur, err := n.st.Get(ctx, "", name)
	if err != nil {
		return nil, toStatus(err)
	}
	if uid := opts.GetUid(); uid != "" && uid != cur.GetMetadata().GetUid() {
		return nil, status.Errorf(codes.FailedPrecondition, "namespace %q: uid is %s, precondition %s", name, cur.GetMetadata().GetUid(), uid)
	}
	if rv := opts.GetResourceVersion(); rv != 0 && rv != cur.GetMetadata().GetResourceVersion() {
		return nil, conflict(apiv1.KindNamespace, name)
	}
	if err := n.refuseNotEmpty(ctx, name); err != nil {
		return nil, err
	}
	// At the version checked: an image charged to it meanwhile (images
	// are cluster-wide, beyond the store's check) moves it.
	out, _, err := n.st.Delete(ctx, "", name, store.DeleteOptions{UID: cur.GetMetadata().GetUid(), ResourceVersion: cur.GetMetadata().GetResourceVersion()})
	switch {
	case errors.Is(err, store.ErrNotEmpty):
		if err := n.refuseNotEmpty(ctx, name); err != nil {
			return nil, err
		}
	case errors.Is(err, store.ErrConflict):
		return nil, status.Errorf(codes.Aborted, "namespace %q changed while it was checked for objects (one was charged to it); try again", name)
	}
	if err != nil {
		return nil, toStatus(err)
	}
	n.s.log.Info("namespace deleted", "namespace", name)
	return out, nil
}

// refuseNotEmpty is FailedPrecondition naming what namespace name still
// holds, nil when it holds nothing (images charged to it included).
func (n *namespaceService) refuseNotEmpty(ctx context.Context, name string) error {
	left, err := n.s.namespaceContents(ctx, name)
	if err != nil {
		return err
	}
	if len(left) == 0 {
		return nil
	}
	return status.Errorf(codes.FailedPrecondition, "namespace %s is not empty: it still holds %s; delete them first", name, strings.Join(left, ", "))
}

func (n *namespaceService) Watch(req *apiv1.WatchNamespacesRequest, stream apiv1.Namespaces_WatchServer) error {
	return clusterWatch(stream.Context(), n.st, req.GetOptions(), func(t apiv1.EventType, obj *apiv1.Namespace, rev int64) error {
		return stream.Send(&apiv1.NamespaceEvent{Type: t, Object: obj, ResourceVersion: rev})
	})
}

// namespaceContents names one object of each kind namespace ns still
// holds ("vm a/web"), reading at most one of each: every namespaced
// kind the server stores, and the images charged to it.
func (s *Server) namespaceContents(ctx context.Context, ns string) ([]string, error) {
	st := s.stores
	var left []string
	add := func(noun string, first func() (store.Object, error)) error {
		obj, err := first()
		if err != nil {
			return toStatus(err)
		}
		if obj != nil {
			md := obj.GetMetadata()
			left = append(left, fmt.Sprintf("%s %s", noun, apiv1.Ref(md.GetNamespace(), md.GetName())))
		}
		return nil
	}
	for _, k := range []struct {
		noun  string
		first func() (store.Object, error)
	}{
		{"vm", firstOf(ctx, st.VMs, ns, "")},
		{"instance", firstOf(ctx, st.VMIs, ns, "")},
		{"migration", firstOf(ctx, st.Migrations, ns, "")},
		{"replica set", firstOf(ctx, st.ReplicaSets, ns, "")},
		{"pool", firstOf(ctx, st.Pools, ns, "")},
		{"snapshot", firstOf(ctx, st.Snapshots, ns, "")},
		{"snapshot content", firstOf(ctx, st.SnapshotContents, ns, "")},
		{"restore", firstOf(ctx, st.Restores, ns, "")},
		{"clone", firstOf(ctx, st.Clones, ns, "")},
		{"export", firstOf(ctx, st.Exports, ns, "")},
		{"backup", firstOf(ctx, st.Backups, ns, "")},
		{"backup schedule", firstOf(ctx, st.BackupSchedules, ns, "")},
		{"backup restore", firstOf(ctx, st.BackupRestores, ns, "")},
		{"adoption", firstOf(ctx, st.Adoptions, ns, "")},
		{"service account", firstOf(ctx, st.ServiceAccounts, ns, "")},
		{"role binding", firstOf(ctx, st.RoleBindings, ns, "")},
		{"image", firstOf(ctx, st.Images, "", apiv1.LabelOwnerNamespace+"="+ns)},
	} {
		if err := add(k.noun, k.first); err != nil {
			return nil, err
		}
	}
	return left, nil
}

// firstOf reads one object of st in namespace ns (matching selector), or
// none; a nil store (a kind the server does not serve) holds none.
func firstOf[T store.Object](ctx context.Context, st store.Store[T], ns, selector string) func() (store.Object, error) {
	return func() (store.Object, error) {
		if st == nil {
			return nil, nil
		}
		// A selector filters within a page, so a page of one could be
		// empty with more to read: a selector's objects are listed whole
		// (the images of one namespace, few).
		var limit int64 = 1
		if selector != "" {
			limit = 0
		}
		p, err := st.ListPage(ctx, store.ListOptions{Namespace: ns, LabelSelector: selector}, limit, "")
		if err != nil || len(p.Items) == 0 {
			return nil, err
		}
		return p.Items[0], nil
	}
}
