package apiserver

import (
	"context"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// Cordon sets spec.unschedulable, which the node agent's re-registration
// keeps; cordoning twice answers the same; uncordon clears it.
func TestCordonSurvivesReRegistration(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	registerNode(t, f, "host-1")
	req := &apiv1.CordonNodeRequest{Name: "host-1"}
	n, err := f.nodes.Cordon(ctx, req)
	if err != nil || !n.GetSpec().GetUnschedulable() {
		t.Fatalf("cordon: %v, %v", n.GetSpec(), err)
	}
	again, err := f.nodes.Cordon(ctx, req)
	if err != nil || again.GetMetadata().GetResourceVersion() != n.GetMetadata().GetResourceVersion() {
		t.Fatalf("cordon again wrote (resource version %d → %d) or failed: %v",
			n.GetMetadata().GetResourceVersion(), again.GetMetadata().GetResourceVersion(), err)
	}
	if n := registerNode(t, f, "host-1"); !n.GetSpec().GetUnschedulable() {
		t.Fatal("the node agent's registration cleared the cordon")
	}
	n, err = f.nodes.Uncordon(ctx, req)
	if err != nil || n.GetSpec().GetUnschedulable() {
		t.Fatalf("uncordon: %v, %v", n.GetSpec(), err)
	}
	for _, tc := range []struct {
		name string
		code codes.Code
	}{{"", codes.InvalidArgument}, {"nope", codes.NotFound}} {
		if _, err := f.nodes.Cordon(ctx, &apiv1.CordonNodeRequest{Name: tc.name}); status.Code(err) != tc.code {
			t.Errorf("cordon %q: %v, want %v", tc.name, err, tc.code)
		}
	}
}
