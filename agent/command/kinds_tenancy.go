package command

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
)

// The kinds of tenancy_service.proto (docs/security.md): namespaces with
// their quota and usage, users, service accounts, credentials and role
// bindings. Namespaces, users, service accounts and bindings are applied
// like any kind (or made by `auth` and `namespace`); credentials are only
// issued by `auth token issue` and `auth cert issue`, since their secret
// exists only in the answer to the issuing call.

var namespaceResource = kind[*apiv1.Namespace, *apiv1.NamespaceEvent]{
	resource: resource{
		Kind: apiv1.KindNamespace, Singular: "namespace",
		names: []string{"namespace", "namespaces", "ns"},
		// Used/limit side by side, as kubectl describe quota puts them.
		columns:     []string{"NAME", "VCPUS", "MEMORY", "VMS", "IMAGES", "AGE"},
		wideColumns: []string{"STORAGE", "BRIDGES", "NETWORKS", "STORAGE-CLASSES", "PORT-FORWARDS"},
	},
	row: func(ns *apiv1.Namespace, now time.Time) []string {
		q, u := ns.GetSpec().GetQuota(), ns.GetStatus().GetUsed()
		if q == nil {
			q = &apiv1.NamespaceQuota{} // no bound: what is used alone
		}
		return []string{
			ns.GetMetadata().GetName(),
			usedOf(strconv.FormatInt(u.GetVcpus(), 10), int64Limit(q.Vcpus)),
			usedOf(zeroQuantity(u.GetMemory()), q.Memory),
			usedOf(strconv.FormatInt(u.GetVms(), 10), int64Limit(q.Vms)),
			usedOf(strconv.FormatInt(u.GetImages(), 10), int64Limit(q.Images)),
			age(ns.GetMetadata().GetCreationTimestamp(), now),
		}
	},
	wide: func(ns *apiv1.Namespace) []string {
		a := ns.GetSpec().GetAllowed()
		return []string{
			storageUsage(ns),
			allowedCell(a.GetBridges()), allowedCell(a.GetNetworks()),
			allowedCell(a.GetStorageClasses()), allowedCell(a.GetPortForwardRanges()),
		}
	},
	get: func(ctx context.Context, c *client.Client, key *apiv1.ObjectKey) (*apiv1.Namespace, error) {
		return c.Namespaces.Get(ctx, &apiv1.GetNamespaceRequest{Name: key.GetName()})
	},
	list: paged(func(ctx context.Context, c *client.Client, o *apiv1.ListOptions) (*apiv1.ListNamespacesResponse, error) {
		return c.Namespaces.List(ctx, &apiv1.ListNamespacesRequest{Options: o})
	}),
	watch: func(ctx context.Context, c *client.Client, o *apiv1.WatchOptions) (client.Stream[*apiv1.NamespaceEvent], error) {
		return c.Namespaces.Watch(ctx, &apiv1.WatchNamespacesRequest{Options: o})
	},
	create: func(ctx context.Context, c *client.Client, ns *apiv1.Namespace) (*apiv1.Namespace, error) {
		return c.Namespaces.Create(ctx, &apiv1.CreateNamespaceRequest{Namespace: ns})
	},
	update: func(ctx context.Context, c *client.Client, ns *apiv1.Namespace) (*apiv1.Namespace, error) {
		return c.Namespaces.Update(ctx, &apiv1.UpdateNamespaceRequest{Namespace: ns})
	},
	delete: func(ctx context.Context, c *client.Client, key *apiv1.ObjectKey) (*apiv1.Namespace, error) {
		return c.Namespaces.Delete(ctx, &apiv1.DeleteNamespaceRequest{Name: key.GetName()})
	},
}.define()

var userResource = kind[*apiv1.User, noEvent[*apiv1.User]]{
	resource: resource{
		Kind: apiv1.KindUser, Singular: "user",
		names:   []string{"user", "users"},
		columns: []string{"NAME", "DISABLED", "DESCRIPTION", "AGE"},
	},
	row: func(u *apiv1.User, now time.Time) []string {
		return []string{u.GetMetadata().GetName(), boolString(u.GetSpec().GetDisabled()), cell(u.GetSpec().GetDescription()),
			age(u.GetMetadata().GetCreationTimestamp(), now)}
	},
	get: func(ctx context.Context, c *client.Client, key *apiv1.ObjectKey) (*apiv1.User, error) {
		return c.Users.Get(ctx, &apiv1.GetUserRequest{Name: key.GetName()})
	},
	list: paged(func(ctx context.Context, c *client.Client, o *apiv1.ListOptions) (*apiv1.ListUsersResponse, error) {
		return c.Users.List(ctx, &apiv1.ListUsersRequest{Options: o})
	}),
	create: func(ctx context.Context, c *client.Client, u *apiv1.User) (*apiv1.User, error) {
		return c.Users.Create(ctx, &apiv1.CreateUserRequest{User: u})
	},
	update: func(ctx context.Context, c *client.Client, u *apiv1.User) (*apiv1.User, error) {
		return c.Users.Update(ctx, &apiv1.UpdateUserRequest{User: u})
	},
	delete: func(ctx context.Context, c *client.Client, key *apiv1.ObjectKey) (*apiv1.User, error) {
		return c.Users.Delete(ctx, &apiv1.DeleteUserRequest{Name: key.GetName()})
	},
}.define()

var serviceAccountResource = kind[*apiv1.ServiceAccount, noEvent[*apiv1.ServiceAccount]]{
	resource: resource{
		Kind: apiv1.KindServiceAccount, Singular: "serviceaccount", Namespaced: true,
		names:   []string{"serviceaccount", "serviceaccounts", "sa"},
		columns: []string{"NAME", "DESCRIPTION", "AGE"},
	},
	row: func(sa *apiv1.ServiceAccount, now time.Time) []string {
		return []string{sa.GetMetadata().GetName(), cell(sa.GetSpec().GetDescription()), age(sa.GetMetadata().GetCreationTimestamp(), now)}
	},
	get: func(ctx context.Context, c *client.Client, key *apiv1.ObjectKey) (*apiv1.ServiceAccount, error) {
		return c.ServiceAccounts.Get(ctx, &apiv1.GetServiceAccountRequest{Key: key})
	},
	list: paged(func(ctx context.Context, c *client.Client, o *apiv1.ListOptions) (*apiv1.ListServiceAccountsResponse, error) {
		return c.ServiceAccounts.List(ctx, &apiv1.ListServiceAccountsRequest{Options: o})
	}),
	create: func(ctx context.Context, c *client.Client, sa *apiv1.ServiceAccount) (*apiv1.ServiceAccount, error) {
		return c.ServiceAccounts.Create(ctx, &apiv1.CreateServiceAccountRequest{ServiceAccount: sa})
	},
	update: func(ctx context.Context, c *client.Client, sa *apiv1.ServiceAccount) (*apiv1.ServiceAccount, error) {
		return c.ServiceAccounts.Update(ctx, &apiv1.UpdateServiceAccountRequest{ServiceAccount: sa})
	},
	delete: func(ctx context.Context, c *client.Client, key *apiv1.ObjectKey) (*apiv1.ServiceAccount, error) {
		return c.ServiceAccounts.Delete(ctx, &apiv1.DeleteServiceAccountRequest{Key: key})
	},
}.define()

// Credentials are read, revoked (`auth token revoke`) and deleted here;
// reads never carry a secret.
var credentialResource = kind[*apiv1.Credential, noEvent[*apiv1.Credential]]{
	resource: resource{
		Kind: apiv1.KindCredential, Singular: "credential",
		names:   []string{"credential", "credentials", "cred"},
		columns: []string{"NAME", "TYPE", "SUBJECT", "EXPIRES", "REVOKED", "DESCRIPTION"},
		// Who issued and revoked it, and when it was revoked.
		wideColumns: []string{"ISSUED-BY", "REVOKED-BY", "REVOKED-AT"},
	},
	row: credentialRow,
	wide: func(cr *apiv1.Credential) []string {
		st := cr.GetStatus()
		revokedAt := none
		if st.GetRevokedAt() != nil {
			revokedAt = timestampCell(st.GetRevokedAt())
		}
		return []string{cell(st.GetIssuedBy()), cell(st.GetRevokedBy()), revokedAt}
	},
	get: func(ctx context.Context, c *client.Client, key *apiv1.ObjectKey) (*apiv1.Credential, error) {
		return c.Credentials.Get(ctx, &apiv1.GetCredentialRequest{Name: key.GetName()})
	},
	list: paged(func(ctx context.Context, c *client.Client, o *apiv1.ListOptions) (*apiv1.ListCredentialsResponse, error) {
		return c.Credentials.List(ctx, &apiv1.ListCredentialsRequest{Options: o})
	}),
	delete: func(ctx context.Context, c *client.Client, key *apiv1.ObjectKey) (*apiv1.Credential, error) {
		return c.Credentials.Delete(ctx, &apiv1.DeleteCredentialRequest{Name: key.GetName()})
	},
}.define()

var roleBindingResource = kind[*apiv1.RoleBinding, noEvent[*apiv1.RoleBinding]]{
	resource: resource{
		Kind: apiv1.KindRoleBinding, Singular: "rolebinding", Namespaced: true,
		names:   []string{"rolebinding", "rolebindings"},
		columns: []string{"NAME", "ROLE", "SUBJECTS", "AGE"},
	},
	row: func(b *apiv1.RoleBinding, now time.Time) []string {
		return []string{b.GetMetadata().GetName(), cell(b.GetSpec().GetRole()), subjectsCell(b.GetSpec().GetSubjects()),
			age(b.GetMetadata().GetCreationTimestamp(), now)}
	},
	get: func(ctx context.Context, c *client.Client, key *apiv1.ObjectKey) (*apiv1.RoleBinding, error) {
		return c.RoleBindings.Get(ctx, &apiv1.GetRoleBindingRequest{Key: key})
	},
	list: paged(func(ctx context.Context, c *client.Client, o *apiv1.ListOptions) (*apiv1.ListRoleBindingsResponse, error) {
		return c.RoleBindings.List(ctx, &apiv1.ListRoleBindingsRequest{Options: o})
	}),
	create: func(ctx context.Context, c *client.Client, b *apiv1.RoleBinding) (*apiv1.RoleBinding, error) {
		return c.RoleBindings.Create(ctx, &apiv1.CreateRoleBindingRequest{RoleBinding: b})
	},
	update: func(ctx context.Context, c *client.Client, b *apiv1.RoleBinding) (*apiv1.RoleBinding, error) {
		return c.RoleBindings.Update(ctx, &apiv1.UpdateRoleBindingRequest{RoleBinding: b})
	},
	delete: func(ctx context.Context, c *client.Client, key *apiv1.ObjectKey) (*apiv1.RoleBinding, error) {
		return c.RoleBindings.Delete(ctx, &apiv1.DeleteRoleBindingRequest{Key: key})
	},
}.define()

var clusterRoleBindingResource = kind[*apiv1.ClusterRoleBinding, noEvent[*apiv1.ClusterRoleBinding]]{
	resource: resource{
		Kind: apiv1.KindClusterRoleBinding, Singular: "clusterrolebinding",
		names:   []string{"clusterrolebinding", "clusterrolebindings"},
		columns: []string{"NAME", "ROLE", "SUBJECTS", "AGE"},
	},
	row: func(b *apiv1.ClusterRoleBinding, now time.Time) []string {
		return []string{b.GetMetadata().GetName(), cell(b.GetSpec().GetRole()), subjectsCell(b.GetSpec().GetSubjects()),
			age(b.GetMetadata().GetCreationTimestamp(), now)}
	},
	get: func(ctx context.Context, c *client.Client, key *apiv1.ObjectKey) (*apiv1.ClusterRoleBinding, error) {
		return c.ClusterRoleBindings.Get(ctx, &apiv1.GetClusterRoleBindingRequest{Name: key.GetName()})
	},
	list: paged(func(ctx context.Context, c *client.Client, o *apiv1.ListOptions) (*apiv1.ListClusterRoleBindingsResponse, error) {
		return c.ClusterRoleBindings.List(ctx, &apiv1.ListClusterRoleBindingsRequest{Options: o})
	}),
	create: func(ctx context.Context, c *client.Client, b *apiv1.ClusterRoleBinding) (*apiv1.ClusterRoleBinding, error) {
		return c.ClusterRoleBindings.Create(ctx, &apiv1.CreateClusterRoleBindingRequest{ClusterRoleBinding: b})
	},
	update: func(ctx context.Context, c *client.Client, b *apiv1.ClusterRoleBinding) (*apiv1.ClusterRoleBinding, error) {
		return c.ClusterRoleBindings.Update(ctx, &apiv1.UpdateClusterRoleBindingRequest{ClusterRoleBinding: b})
	},
	delete: func(ctx context.Context, c *client.Client, key *apiv1.ObjectKey) (*apiv1.ClusterRoleBinding, error) {
		return c.ClusterRoleBindings.Delete(ctx, &apiv1.DeleteClusterRoleBindingRequest{Name: key.GetName()})
	},
}.define()

// noEvent is the watch event of a kind whose service has no Watch: the
// entry's watch stays nil, and get -w says the kind has none.
type noEvent[T object] struct{}

func (noEvent[T]) GetType() apiv1.EventType { return apiv1.EventType(0) }
func (noEvent[T]) GetObject() T {
	var zero T
	return zero
}

func credentialRow(cr *apiv1.Credential, now time.Time) []string {
	s := cr.GetSpec()
	return []string{
		cr.GetMetadata().GetName(), cell(s.GetType()), subjectString(s.GetSubject()),
		expiresCell(s.GetExpires(), now), boolString(s.GetRevoked()), cell(s.GetDescription()),
	}
}

// expiresCell is when a credential expires, and "expired" after.
func expiresCell(ts *timestamppb.Timestamp, now time.Time) string {
	switch {
	case ts == nil:
		return none
	case !ts.AsTime().After(now):
		return "expired " + timestampCell(ts)
	}
	return timestampCell(ts)
}

// subjectString is how the CLI writes a subject: "user alice",
// "serviceaccount ci/deployer", as the server names identities.
func subjectString(s *apiv1.Subject) string {
	switch s.GetKind() {
	case apiv1.SubjectUser:
		return "user " + s.GetName()
	case apiv1.SubjectServiceAccount:
		return "serviceaccount " + s.GetNamespace() + "/" + s.GetName()
	case "":
		return none
	}
	return strings.ToLower(s.GetKind()) + " " + s.GetName()
}

// subjectsCell is a binding's subjects, comma-separated, without spaces
// (one word for awk): user:alice,serviceaccount:ci/deployer.
func subjectsCell(subjects []*apiv1.Subject) string {
	out := make([]string, 0, len(subjects))
	for _, s := range subjects {
		out = append(out, strings.Replace(subjectString(s), " ", ":", 1))
	}
	return cell(strings.Join(out, ","))
}

// usedOf is "used/limit", or what is used alone when nothing bounds it.
func usedOf(used string, limit *string) string {
	if limit == nil {
		return used
	}
	return used + "/" + *limit
}

func int64Limit(n *int64) *string {
	if n == nil {
		return nil
	}
	s := strconv.FormatInt(*n, 10)
	return &s
}

// zeroQuantity is a usage quantity, "0" when the server sent none.
func zeroQuantity(q string) string {
	if q == "" {
		return "0"
	}
	return q
}

// storageUsage is the persistent storage a namespace uses per class,
// with its bound: ceph=120Gi/500Gi,local=10Gi ("local" for the node's
// disk, the class "").
func storageUsage(ns *apiv1.Namespace) string {
	limits, used := ns.GetSpec().GetQuota().GetPersistentStorage(), ns.GetStatus().GetUsed().GetPersistentStorage()
	classes := slices.Concat(slices.Collect(maps.Keys(limits)), slices.Collect(maps.Keys(used)))
	slices.Sort(classes)
	var out []string
	for _, c := range slices.Compact(classes) {
		var limit *string
		if l, ok := limits[c]; ok {
			limit = &l
		}
		name := c
		if name == "" {
			name = "local"
		}
		out = append(out, name+"="+usedOf(zeroQuantity(used[c]), limit))
	}
	return cell(strings.Join(out, ","))
}

// allowedCell is a namespace's allow-list: <all> when unset (the host
// policy decides), <nothing> when present and empty.
func allowedCell(l *apiv1.StringList) string {
	switch {
	case l == nil:
		return "<all>"
	case len(l.GetItems()) == 0:
		return "<nothing>"
	}
	return strings.Join(slices.Sorted(slices.Values(l.GetItems())), ",")
}

// parseSubject reads --user NAME or --service-account NS/NAME (exactly
// one of them) into a Subject.
func parseSubject(user, serviceAccount string) (*apiv1.Subject, error) {
	switch {
	case user != "" && serviceAccount != "":
		return nil, fmt.Errorf("--user and --service-account are exclusive: a credential or binding names one subject")
	case user != "":
		return &apiv1.Subject{Kind: apiv1.SubjectUser, Name: user}, nil
	case serviceAccount != "":
		ns, name, ok := strings.Cut(serviceAccount, "/")
		if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
			return nil, fmt.Errorf("--service-account %q: want NAMESPACE/NAME", serviceAccount)
		}
		return &apiv1.Subject{Kind: apiv1.SubjectServiceAccount, Namespace: ns, Name: name}, nil
	}
	return nil, fmt.Errorf("name the subject: --user NAME or --service-account NAMESPACE/NAME")
}
