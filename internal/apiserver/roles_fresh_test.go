package apiserver

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
	"github.com/virtplane/terraform-provider-virtplane/internal/store/memstore"
)

// A binding the caches have not seen yet (made a moment before the call)
// does not make a refusal: a refusal is decided again on the stored
// bindings. What the stores do not give is still refused, in the stored
// bindings' words.
func TestRefusalsAreDecidedAgainOnTheStoredBindings(t *testing.T) {
	ctx := context.Background()
	db := memstore.NewDB(time.Now)
	rbs, crbs := memstore.New(db, store.RoleBindings), memstore.New(db, store.ClusterRoleBindings)
	c := newRoleCache(rbs, crbs, slog.Default(), func([]string) {})
	// The caches are synced and empty: they have not seen the binding below.
	c.rbs.Fill()
	c.crbs.Fill()
	eddie := Identity{Kind: User, Name: "eddie"}
	if _, err := rbs.Create(ctx, &apiv1.RoleBinding{
		Metadata: &apiv1.ObjectMeta{Namespace: "a", Name: "eddie-edit"},
		Spec:     &apiv1.RoleBindingSpec{Role: apiv1.RoleEdit, Subjects: []*apiv1.Subject{{Kind: apiv1.SubjectUser, Name: "eddie"}}},
	}); err != nil {
		t.Fatal(err)
	}
	if g, _ := c.grantsOf(eddie); g.in("a") != roleNone {
		t.Fatalf("the cache already has the binding (%v): the test proves nothing", g)
	}
	rule := methodRules[apiv1.VirtualMachines_Create_FullMethodName]
	in := func(ns string) func(grants) error {
		return func(g grants) error {
			return rule.allowsIn(eddie, g, apiv1.VirtualMachines_Create_FullMethodName, target{ns: ns})
		}
	}
	g, err := c.decide(ctx, eddie, in("a"))
	if err != nil || g.in("a") != roleEdit {
		t.Fatalf("edit in a from the stored binding: grants %v, %v", g, err)
	}
	_, err = c.decide(ctx, eddie, in("b"))
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "user eddie (edit in a)") || !strings.Contains(err.Error(), "needs edit in b") {
		t.Fatalf("namespace b: %v", err)
	}
	// Nodes and admins never read the stores: they have no bindings.
	if _, ok := c.storedGrantsOf(ctx, Identity{Kind: Node, Node: "n1"}); ok {
		t.Fatal("a node's grants were read from the stores")
	}
}

// Every name the server gives a credential is one authentication reads
// from the store when its cache lags (usercreds.go lookup).
func TestCredentialNamesAreLookedUp(t *testing.T) {
	for range 100 {
		if n := newCredentialName(); !credentialName.MatchString(n) {
			t.Fatalf("credential name %q is not looked up in the store", n)
		}
	}
}
