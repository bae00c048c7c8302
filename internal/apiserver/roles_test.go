package apiserver

import (
	"slices"
	"testing"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// Roles are ordered, a cluster role counts in every namespace, and
// Namespaces.List keeps the namespaces a caller has a role in.
func TestGrants(t *testing.T) {
	g := grants{cluster: roleView, ns: map[string]role{"a": roleEdit, "b": roleView}}
	if g.in("a") != roleEdit || g.in("b") != roleView || g.in("c") != roleView || g.highest() != roleEdit {
		t.Fatalf("in a %v, b %v, c %v, highest %v", g.in("a"), g.in("b"), g.in("c"), g.highest())
	}
	if got := g.roles(); !slices.Equal(got, []string{"view in every namespace", "edit in a"}) {
		t.Fatalf("roles %v", got)
	}
	if got := (grants{}).String(); got != "no role" {
		t.Fatalf("no grants: %q", got)
	}
	list := &apiv1.ListNamespacesResponse{Items: []*apiv1.Namespace{
		{Metadata: &apiv1.ObjectMeta{Name: "a"}}, {Metadata: &apiv1.ObjectMeta{Name: "b"}}, {Metadata: &apiv1.ObjectMeta{Name: "c"}},
	}}
	held := namespacesHeld(grants{ns: map[string]role{"a": roleView, "c": roleAdmin}}, list).(*apiv1.ListNamespacesResponse)
	var names []string
	for _, n := range held.Items {
		names = append(names, n.Metadata.Name)
	}
	if !slices.Equal(names, []string{"a", "c"}) || len(list.Items) != 3 {
		t.Fatalf("namespaces held %v (the response had %d)", names, len(list.Items))
	}
	if all := namespacesHeld(grants{cluster: roleView}, list).(*apiv1.ListNamespacesResponse); len(all.Items) != 3 {
		t.Fatalf("a cluster viewer sees %d namespaces", len(all.Items))
	}
	if shortMethod(apiv1.VirtualMachines_Create_FullMethodName) != "VirtualMachines.Create" || fullMethod("VirtualMachines.Create") != apiv1.VirtualMachines_Create_FullMethodName {
		t.Fatal("method names")
	}
}
