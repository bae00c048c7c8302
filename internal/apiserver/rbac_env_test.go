package apiserver

import (
	"fmt"
	"slices"
	"strings"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// How a test calls the API as a user or service account: the admin
// makes the user (or account), its bindings and a token through the API,
// and the test dials with the token as the CLI and Terraform do
// (client.Config.Token). tenant waits until the server's caches show
// the roles, so the first call is already decided on them.

// tenant is a caller with a credential.
type tenant struct {
	sub   *apiv1.Subject
	token string
	cred  string
	c     *client.Client
}

// roleSpec is one binding: "cluster-admin", "view *" (a ClusterRoleBinding
// of view), or "edit a" (a RoleBinding in a).
func (e *secEnv) bindRole(sub *apiv1.Subject, spec string) {
	e.t.Helper()
	admin := e.admin()
	role, ns, _ := strings.Cut(spec, " ")
	name := fmt.Sprintf("%s-%s-%s", strings.ToLower(sub.Kind), sub.Name, role)
	var err error
	if ns == "" || ns == "*" {
		_, err = apiv1.NewClusterRoleBindingsClient(admin.Conn).Create(ctx(), &apiv1.CreateClusterRoleBindingRequest{ClusterRoleBinding: &apiv1.ClusterRoleBinding{
			Metadata: &apiv1.ObjectMeta{Name: name}, Spec: &apiv1.RoleBindingSpec{Role: role, Subjects: []*apiv1.Subject{sub}}}})
	} else {
		_, err = apiv1.NewRoleBindingsClient(admin.Conn).Create(ctx(), &apiv1.CreateRoleBindingRequest{RoleBinding: &apiv1.RoleBinding{
			Metadata: &apiv1.ObjectMeta{Namespace: ns, Name: name}, Spec: &apiv1.RoleBindingSpec{Role: role, Subjects: []*apiv1.Subject{sub}}}})
	}
	if err != nil {
		e.t.Fatalf("binding %s to %s: %v", spec, subjectKey(sub), err)
	}
}

// wantRoles is what WhoAmI says of bindings specs.
func wantRoles(specs []string) []string {
	var out []string
	for _, s := range specs {
		role, ns, _ := strings.Cut(s, " ")
		switch {
		case role == apiv1.RoleClusterAdmin:
			return []string{apiv1.RoleClusterAdmin}
		case ns == "*":
			out = append(out, role+" in every namespace")
		default:
			out = append(out, role+" in "+ns)
		}
	}
	return out
}

// user makes user name with the bindings specs and a token for it.
func (e *secEnv) user(name string, specs ...string) *tenant {
	e.t.Helper()
	if _, err := apiv1.NewUsersClient(e.admin().Conn).Create(ctx(), &apiv1.CreateUserRequest{User: &apiv1.User{Metadata: &apiv1.ObjectMeta{Name: name}}}); err != nil {
		e.t.Fatalf("creating user %s: %v", name, err)
	}
	return e.tenant(&apiv1.Subject{Kind: apiv1.SubjectUser, Name: name}, specs...)
}

// serviceAccount makes service account ns/name with the bindings specs
// and a token for it.
func (e *secEnv) serviceAccount(ns, name string, specs ...string) *tenant {
	e.t.Helper()
	if _, err := apiv1.NewServiceAccountsClient(e.admin().Conn).Create(ctx(), &apiv1.CreateServiceAccountRequest{ServiceAccount: &apiv1.ServiceAccount{Metadata: &apiv1.ObjectMeta{Namespace: ns, Name: name}}}); err != nil {
		e.t.Fatalf("creating service account %s/%s: %v", ns, name, err)
	}
	return e.tenant(&apiv1.Subject{Kind: apiv1.SubjectServiceAccount, Namespace: ns, Name: name}, specs...)
}

func (e *secEnv) tenant(sub *apiv1.Subject, specs ...string) *tenant {
	e.t.Helper()
	for _, s := range specs {
		e.bindRole(sub, s)
	}
	tn := e.issue(sub, 0)
	want := wantRoles(specs)
	slices.Sort(want)
	testutil.EventuallyNoError(e.t, 10*time.Second, subjectKey(sub)+" authenticated with its roles", func() error {
		who, err := apiv1.NewAuthClient(tn.c.Conn).WhoAmI(ctx(), &apiv1.WhoAmIRequest{})
		if err != nil {
			return err
		}
		got := slices.Sorted(slices.Values(who.Roles))
		if !slices.Equal(got, want) {
			return fmt.Errorf("roles %v, want %v", got, want)
		}
		return nil
	})
	return tn
}

// issue gives sub a token valid for ttl (0: the default) and a client
// that uses it; the server may not know the token yet.
func (e *secEnv) issue(sub *apiv1.Subject, ttl time.Duration) *tenant {
	e.t.Helper()
	resp, err := apiv1.NewCredentialsClient(e.admin().Conn).IssueToken(ctx(), &apiv1.IssueTokenRequest{Subject: sub, TtlSeconds: int64(ttl / time.Second)})
	if err != nil {
		e.t.Fatalf("issuing a token for %s: %v", subjectKey(sub), err)
	}
	return &tenant{sub: sub, token: resp.Token, cred: resp.Credential.GetMetadata().GetName(), c: e.dial(client.Config{Token: resp.Token})}
}
