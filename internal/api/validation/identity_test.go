package validation

import (
	"strings"
	"testing"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// Bad bindings and subjects are refused naming the field.
func TestValidateBindings(t *testing.T) {
	meta := &apiv1.ObjectMeta{Namespace: "a", Name: "devs"}
	cases := []struct {
		name string
		rb   *apiv1.RoleBinding
		want string // a field path in the error; "" for valid
	}{
		{"valid", &apiv1.RoleBinding{Metadata: meta, Spec: &apiv1.RoleBindingSpec{Role: "edit", Subjects: []*apiv1.Subject{{Kind: "User", Name: "alice"}, {Kind: "ServiceAccount", Namespace: "ci", Name: "deployer"}}}}, ""},
		{"cluster-admin in a namespace", &apiv1.RoleBinding{Metadata: meta, Spec: &apiv1.RoleBindingSpec{Role: "cluster-admin", Subjects: []*apiv1.Subject{{Kind: "User", Name: "alice"}}}}, "spec.role"},
		{"no subjects", &apiv1.RoleBinding{Metadata: meta, Spec: &apiv1.RoleBindingSpec{Role: "view"}}, "spec.subjects"},
		{"bad kind", &apiv1.RoleBinding{Metadata: meta, Spec: &apiv1.RoleBindingSpec{Role: "view", Subjects: []*apiv1.Subject{{Kind: "Group", Name: "x"}}}}, "spec.subjects[0].kind"},
		{"bad name", &apiv1.RoleBinding{Metadata: meta, Spec: &apiv1.RoleBindingSpec{Role: "view", Subjects: []*apiv1.Subject{{Kind: "User", Name: "a.b"}}}}, "spec.subjects[0].name"},
		{"sa without namespace", &apiv1.RoleBinding{Metadata: meta, Spec: &apiv1.RoleBindingSpec{Role: "view", Subjects: []*apiv1.Subject{{Kind: "ServiceAccount", Name: "x"}}}}, "spec.subjects[0].namespace"},
		{"user with namespace", &apiv1.RoleBinding{Metadata: meta, Spec: &apiv1.RoleBindingSpec{Role: "view", Subjects: []*apiv1.Subject{{Kind: "User", Namespace: "a", Name: "x"}}}}, "spec.subjects[0].namespace"},
		{"duplicate", &apiv1.RoleBinding{Metadata: meta, Spec: &apiv1.RoleBindingSpec{Role: "view", Subjects: []*apiv1.Subject{{Kind: "User", Name: "x"}, {Kind: "User", Name: "x"}}}}, "spec.subjects[1]"},
	}
	for _, c := range cases {
		errs := ValidateRoleBinding(c.rb)
		switch {
		case c.want == "" && len(errs) > 0:
			t.Errorf("%s: %v", c.name, errs)
		case c.want != "" && !strings.Contains(errs.ToAggregate().Error(), c.want):
			t.Errorf("%s: errors %v do not name %s", c.name, errs, c.want)
		}
	}
	crb := &apiv1.ClusterRoleBinding{Metadata: &apiv1.ObjectMeta{Name: "admins"}, Spec: &apiv1.RoleBindingSpec{Role: "cluster-admin", Subjects: []*apiv1.Subject{{Kind: "User", Name: "root"}}}}
	if errs := ValidateClusterRoleBinding(crb); len(errs) > 0 {
		t.Errorf("cluster-admin binding: %v", errs)
	}
	if errs := ValidateUser(&apiv1.User{Metadata: &apiv1.ObjectMeta{Name: "alice.smith"}}); len(errs) == 0 {
		t.Error("a user name with a dot was accepted")
	}
	if _, errs := ValidateIssue(&apiv1.Subject{Kind: "User", Name: "alice"}, 3*365*24*3600, ""); !strings.Contains(errs.ToAggregate().Error(), "ttl_seconds") {
		t.Errorf("a three-year token: %v", errs)
	}
	if ttl, errs := ValidateIssue(&apiv1.Subject{Kind: "User", Name: "alice"}, 0, ""); len(errs) > 0 || ttl != DefaultCredentialTTL {
		t.Errorf("default ttl %v, %v", ttl, errs)
	}
}
