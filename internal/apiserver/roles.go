package apiserver

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/informer"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// role is what a binding gives, ordered: each may do what the ones below
// it may. roleClusterAdmin may do everything, everywhere.
type role int

const (
	roleNone role = iota
	roleView
	roleEdit
	roleAdmin
	roleClusterAdmin
)

func (r role) String() string {
	switch r {
	case roleView:
		return apiv1.RoleView
	case roleEdit:
		return apiv1.RoleEdit
	case roleAdmin:
		return apiv1.RoleAdmin
	case roleClusterAdmin:
		return apiv1.RoleClusterAdmin
	}
	return "none"
}

// parseRole is the role a binding names; roleNone for anything else
// (validation refuses those before they are stored).
func parseRole(s string) role {
	switch s {
	case apiv1.RoleView:
		return roleView
	case apiv1.RoleEdit:
		return roleEdit
	case apiv1.RoleAdmin:
		return roleAdmin
	case apiv1.RoleClusterAdmin:
		return roleClusterAdmin
	}
	return roleNone
}

// grants are the roles one caller holds: cluster, from its
// ClusterRoleBindings (cluster-admin, or a role in every namespace), and
// per namespace from its RoleBindings.
type grants struct {
	cluster role
	ns      map[string]role
}

// clusterAdmin are the grants of admins (the bootstrap token, the unix
// socket).
var clusterAdmin = grants{cluster: roleClusterAdmin}

// in is the caller's role in namespace ns.
func (g grants) in(ns string) role { return max(g.cluster, g.ns[ns]) }

// highest is the caller's highest role anywhere.
func (g grants) highest() role {
	r := g.cluster
	for _, nr := range g.ns {
		r = max(r, nr)
	}
	return r
}

// roles names the grants one by one, as WhoAmI and audit records show
// them: "cluster-admin", "view in every namespace", "edit in a".
func (g grants) roles() []string {
	var out []string
	switch {
	case g.cluster == roleClusterAdmin:
		return []string{apiv1.RoleClusterAdmin}
	case g.cluster != roleNone:
		out = append(out, g.cluster.String()+" in every namespace")
	}
	for _, ns := range slices.Sorted(maps.Keys(g.ns)) {
		if g.ns[ns] > g.cluster {
			out = append(out, g.ns[ns].String()+" in "+ns)
		}
	}
	return out
}

// String is the grants in a refusal: "edit in a, view in b", "no role".
func (g grants) String() string {
	if r := g.roles(); len(r) > 0 {
		return strings.Join(r, ", ")
	}
	return "no role"
}

// subjectKey indexes bindings by subject: "User/alice",
// "ServiceAccount/ci/deployer".
func subjectKey(s *apiv1.Subject) string {
	if s.GetKind() == apiv1.SubjectServiceAccount {
		return s.GetKind() + "/" + s.GetNamespace() + "/" + s.GetName()
	}
	return s.GetKind() + "/" + s.GetName()
}

const bySubject = "subject"

func bindingSubjects(spec *apiv1.RoleBindingSpec) []string {
	keys := make([]string, 0, len(spec.GetSubjects()))
	for _, s := range spec.GetSubjects() {
		keys = append(keys, subjectKey(s))
	}
	return keys
}

// roleCache is the API server's view of the role bindings: watched caches
// of RoleBindings and ClusterRoleBindings indexed by subject, so that
// resolving a caller's roles on every call is two index lookups.
type roleCache struct {
	rbs  *informer.Informer[*apiv1.RoleBinding]
	crbs *informer.Informer[*apiv1.ClusterRoleBinding]
	// The stores themselves, read before a refusal (storedGrantsOf).
	rbStore  bindingLister[*apiv1.RoleBinding]
	crbStore bindingLister[*apiv1.ClusterRoleBinding]
}

// bindingLister is the read roleCache makes of a binding store.
type bindingLister[T store.Object] interface {
	List(ctx context.Context, opts store.ListOptions) ([]T, int64, error)
}

// newRoleCache watches the bindings; lost is told the subjects of a
// binding changed or deleted, which may have lost a role.
func newRoleCache(rbs store.Store[*apiv1.RoleBinding], crbs store.Store[*apiv1.ClusterRoleBinding], log *slog.Logger, lost func(subjects []string)) *roleCache {
	c := &roleCache{}
	if rbs == nil || crbs == nil {
		return c
	}
	c.rbStore, c.crbStore = rbs, crbs
	c.rbs = informer.New[*apiv1.RoleBinding](rbs, store.ListOptions{}, log.With("informer", "rolebindings"))
	c.rbs.AddIndex(bySubject, func(rb *apiv1.RoleBinding) []string { return bindingSubjects(rb.GetSpec()) })
	c.rbs.AddHandler(informer.Handler[*apiv1.RoleBinding]{
		OnUpdate: func(old, _ *apiv1.RoleBinding) { lost(bindingSubjects(old.GetSpec())) },
		OnDelete: func(old *apiv1.RoleBinding) { lost(bindingSubjects(old.GetSpec())) },
	})
	c.crbs = informer.New[*apiv1.ClusterRoleBinding](crbs, store.ListOptions{}, log.With("informer", "clusterrolebindings"))
	c.crbs.AddIndex(bySubject, func(b *apiv1.ClusterRoleBinding) []string { return bindingSubjects(b.GetSpec()) })
	c.crbs.AddHandler(informer.Handler[*apiv1.ClusterRoleBinding]{
		OnUpdate: func(old, _ *apiv1.ClusterRoleBinding) { lost(bindingSubjects(old.GetSpec())) },
		OnDelete: func(old *apiv1.ClusterRoleBinding) { lost(bindingSubjects(old.GetSpec())) },
	})
	return c
}

func (c *roleCache) run(ctx context.Context) {
	if c.rbs == nil {
		return
	}
	go c.crbs.Run(ctx)
	c.rbs.Run(ctx)
}

// grantsOf resolves id's roles: admins are cluster-admins; users and
// service accounts hold what their bindings give; anyone else nothing.
func (c *roleCache) grantsOf(id Identity) (grants, error) {
	switch id.Kind {
	case Admin:
		return clusterAdmin, nil
	case User, ServiceAccount:
	default:
		return grants{}, nil
	}
	if c.rbs == nil {
		return grants{}, nil
	}
	if !c.rbs.HasSynced() || !c.crbs.HasSynced() {
		return grants{}, status.Error(codes.Unavailable, "role bindings are still loading; retry")
	}
	key := subjectKey(id.Subject())
	return grantsFrom(c.crbs.ByIndex(bySubject, key), c.rbs.ByIndex(bySubject, key)), nil
}

// grantsFrom is what a subject's cluster role bindings and role
// bindings give it.
func grantsFrom(crbs []*apiv1.ClusterRoleBinding, rbs []*apiv1.RoleBinding) grants {
	g := grants{ns: map[string]role{}}
	for _, b := range crbs {
		g.cluster = max(g.cluster, parseRole(b.GetSpec().GetRole()))
	}
	for _, b := range rbs {
		ns := b.GetMetadata().GetNamespace()
		// A namespace's binding gives at most admin: cluster-admin is
		// a ClusterRoleBinding's alone.
		g.ns[ns] = max(g.ns[ns], min(parseRole(b.GetSpec().GetRole()), roleAdmin))
	}
	return g
}

// storedGrantsOf resolves id's roles from the stores rather than the
// caches. A refusal is decided again on them: the caches follow the
// store a moment late, and a binding made just before a call (a
// Terraform run that binds a role, then uses it) must not be refused
// for that. Only refusals pay for the read, and callers' requests are
// rate limited.
func (c *roleCache) storedGrantsOf(ctx context.Context, id Identity) (grants, bool) {
	if c.rbStore == nil || (id.Kind != User && id.Kind != ServiceAccount) {
		return grants{}, false
	}
	key := subjectKey(id.Subject())
	crbs, _, err := c.crbStore.List(ctx, store.ListOptions{})
	if err != nil {
		return grants{}, false
	}
	rbs, _, err := c.rbStore.List(ctx, store.ListOptions{})
	if err != nil {
		return grants{}, false
	}
	crbs = slices.DeleteFunc(crbs, func(b *apiv1.ClusterRoleBinding) bool { return !slices.Contains(bindingSubjects(b.GetSpec()), key) })
	rbs = slices.DeleteFunc(rbs, func(b *apiv1.RoleBinding) bool { return !slices.Contains(bindingSubjects(b.GetSpec()), key) })
	return grantsFrom(crbs, rbs), true
}

// decide runs allow on id's cached grants and, when they refuse, once
// more on the stored ones (storedGrantsOf); it returns the grants that
// decided.
func (c *roleCache) decide(ctx context.Context, id Identity, allow func(grants) error) (grants, error) {
	g, err := c.grantsOf(id)
	if err != nil {
		return g, err
	}
	err = allow(g)
	if err == nil {
		return g, nil
	}
	if fresh, ok := c.storedGrantsOf(ctx, id); ok {
		return fresh, allow(fresh)
	}
	return g, err
}

// describeRefusal is the PermissionDenied of a call id may not make:
// who, what they hold, and what would allow it.
func describeRefusal(id Identity, g grants, method, where, need string) error {
	if where != "" {
		where = " " + where
	}
	return status.Errorf(codes.PermissionDenied, "%s (%s) may not call %s%s: needs %s", id, g, shortMethod(method), where, need)
}

// shortMethod is "VirtualMachines.Create" for
// "/virtplane.v1.VirtualMachines/Create".
func shortMethod(full string) string {
	svc, m, ok := strings.Cut(strings.TrimPrefix(full, "/"), "/")
	if !ok {
		return full
	}
	if i := strings.LastIndexByte(svc, '.'); i >= 0 {
		svc = svc[i+1:]
	}
	return fmt.Sprintf("%s.%s", svc, m)
}

// noEscalation refuses a caller a credential of sub that would give it
// more than it holds: a namespace's admin may issue the tokens of the
// namespace's service accounts, but not of one that a cluster-admin bound
// to a role elsewhere (Kubernetes leaves that hole open; here the caller
// must hold every role the account holds).
func (s *Server) noEscalation(ctx context.Context, sub *apiv1.Subject) error {
	id := IdentityFrom(ctx)
	g, err := s.roles.grantsOf(id)
	if err != nil || g.cluster == roleClusterAdmin {
		return err
	}
	as := Identity{Kind: User, Name: sub.GetName()}
	if sub.GetKind() == apiv1.SubjectServiceAccount {
		as = Identity{Kind: ServiceAccount, Name: sub.GetName(), Namespace: sub.GetNamespace()}
	}
	sg, err := s.roles.grantsOf(as)
	if err != nil {
		return err
	}
	if sg.cluster > g.cluster {
		return status.Errorf(codes.PermissionDenied, "%s (%s) may not issue credentials of %s: it holds %s, which needs %s", id, g, as, sg, clusterNeed(sg.cluster))
	}
	for ns, r := range sg.ns {
		if g.in(ns) < r {
			return status.Errorf(codes.PermissionDenied, "%s (%s) may not issue credentials of %s: it holds %s, which needs %s in %s", id, g, as, sg, r, ns)
		}
	}
	return nil
}

// clusterAdmin reports whether id may call every method: an admin, or a
// user or service account bound to cluster-admin. Handlers ask it for
// what only cluster-admins may do within a method others may call too.
func (s *Server) clusterAdmin(id Identity) bool {
	g, err := s.roles.grantsOf(id)
	return err == nil && g.cluster == roleClusterAdmin
}
