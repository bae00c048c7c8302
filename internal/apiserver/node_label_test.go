package apiserver

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
)

// labelNode is a node as its agent registers it, with its own labels.
func labelNode(name string, own map[string]string) *apiv1.Node {
	n := limitNode(name)
	n.Metadata.Labels = own
	return n
}

func wantLabels(t *testing.T, what string, n *apiv1.Node, want map[string]string) {
	t.Helper()
	if got := n.GetMetadata().GetLabels(); !maps.Equal(got, want) {
		t.Fatalf("%s: labels %v, want %v", what, got, want)
	}
}

// Register replaces the node's own labels (so a node can drop one) and
// keeps the admins' and the server's.
func TestRegisterReplacesOnlyTheNodesOwnLabels(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	own := map[string]string{apiv1.LabelKVM: "false", "node.virtplane.io/disk": "ssd"}
	if _, err := f.nodes.Register(ctx, &apiv1.RegisterNodeRequest{Node: labelNode("host-1", own)}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.nodes.Label(ctx, &apiv1.LabelNodeRequest{Name: "host-1", Set: map[string]string{"tier": "secure"}}); err != nil {
		t.Fatal(err)
	}
	n, err := f.nodes.Register(ctx, &apiv1.RegisterNodeRequest{Node: labelNode("host-1", map[string]string{apiv1.LabelKVM: "true"})})
	if err != nil {
		t.Fatal(err)
	}
	wantLabels(t, "re-registered without node.virtplane.io/disk", n,
		map[string]string{apiv1.LabelKVM: "true", "tier": "secure", apiv1.LabelNodeName: "host-1"})
	n, err = f.nodes.Register(ctx, &apiv1.RegisterNodeRequest{Node: labelNode("host-1", nil)})
	if err != nil {
		t.Fatal(err)
	}
	wantLabels(t, "re-registered without labels", n, map[string]string{"tier": "secure", apiv1.LabelNodeName: "host-1"})
}

// A rolling upgrade, servers first: a node agent of an earlier release
// still registers with virtplane.io/kvm, which is stored as
// node.virtplane.io/kvm, and the old label an earlier server stored goes
// with the node's first registration.
func TestRegisterTakesTheLegacyKVMLabel(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	// As an earlier server stored it, with an admin's label beside it.
	old := labelNode("host-1", map[string]string{"virtplane.io/kvm": "true", apiv1.LabelNodeName: "host-1", "tier": "secure"})
	old.Spec = &apiv1.NodeSpec{}
	if _, err := f.st.Nodes.Create(ctx, old); err != nil {
		t.Fatal(err)
	}
	n, err := f.nodes.Register(ctx, &apiv1.RegisterNodeRequest{Node: labelNode("host-1", map[string]string{"virtplane.io/kvm": "false"})})
	if err != nil {
		t.Fatalf("an agent of the earlier release registering: %v", err)
	}
	wantLabels(t, "registered by an earlier agent", n,
		map[string]string{apiv1.LabelKVM: "false", "tier": "secure", apiv1.LabelNodeName: "host-1"})
	n, err = f.nodes.Register(ctx, &apiv1.RegisterNodeRequest{Node: labelNode("host-1",
		map[string]string{"virtplane.io/kvm": "false", apiv1.LabelKVM: "true"})})
	if err != nil {
		t.Fatal(err)
	}
	wantLabels(t, "both keys sent", n, map[string]string{apiv1.LabelKVM: "true", "tier": "secure", apiv1.LabelNodeName: "host-1"})
}

// An admin sets, changes (only with overwrite) and removes a node's labels;
// the node's own and the server's are refused, naming the field.
func TestLabelNode(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if _, err := f.nodes.Register(ctx, &apiv1.RegisterNodeRequest{Node: labelNode("host-1", map[string]string{apiv1.LabelKVM: "true"})}); err != nil {
		t.Fatal(err)
	}
	label := func(req *apiv1.LabelNodeRequest) (*apiv1.Node, error) {
		if req.Name == "" {
			req.Name = "host-1"
		}
		return f.nodes.Label(ctx, req)
	}
	n, err := label(&apiv1.LabelNodeRequest{Set: map[string]string{"tier": "secure", "example.com/rack": "r1"}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{apiv1.LabelKVM: "true", apiv1.LabelNodeName: "host-1", "tier": "secure", "example.com/rack": "r1"}
	wantLabels(t, "labelled", n, want)
	rv := n.Metadata.ResourceVersion

	// Setting what is set writes nothing.
	if n, err = label(&apiv1.LabelNodeRequest{Set: map[string]string{"tier": "secure"}}); err != nil || n.Metadata.ResourceVersion != rv {
		t.Fatalf("setting an unchanged label: %v, resource version %d, want %d", err, n.GetMetadata().GetResourceVersion(), rv)
	}
	_, err = label(&apiv1.LabelNodeRequest{Set: map[string]string{"tier": "public", "zone": "a"}})
	wantCode(t, "changing a label without overwrite", err, codes.FailedPrecondition)
	if !strings.Contains(err.Error(), "set[tier]") || !strings.Contains(err.Error(), "tier=secure") {
		t.Fatalf("the refusal does not name the label and its value: %v", err)
	}
	if n, _ := f.nodes.Get(ctx, &apiv1.GetNodeRequest{Name: "host-1"}); n.Metadata.Labels["zone"] != "" {
		t.Fatal("a refused request changed the node")
	}
	n, err = label(&apiv1.LabelNodeRequest{Set: map[string]string{"tier": "public"}, Remove: []string{"example.com/rack", "absent"}, Overwrite: true})
	if err != nil {
		t.Fatal(err)
	}
	delete(want, "example.com/rack")
	want["tier"] = "public"
	wantLabels(t, "changed and removed", n, want)

	for _, tc := range []struct {
		name  string
		req   *apiv1.LabelNodeRequest
		field string
	}{
		{"the node's own label", &apiv1.LabelNodeRequest{Set: map[string]string{apiv1.LabelKVM: "false"}}, "set[node.virtplane.io/kvm]"},
		{"the node's own label of an earlier release", &apiv1.LabelNodeRequest{Set: map[string]string{"virtplane.io/kvm": "false"}}, "set[virtplane.io/kvm]"},
		{"removing the node's own label", &apiv1.LabelNodeRequest{Remove: []string{apiv1.LabelKVM}}, "remove[0]"},
		{"the node-name label", &apiv1.LabelNodeRequest{Set: map[string]string{apiv1.LabelNodeName: "other"}}, "set[virtplane.io/node-name]"},
		{"removing the node-name label", &apiv1.LabelNodeRequest{Remove: []string{"tier", apiv1.LabelNodeName}}, "remove[1]"},
		{"a bad key", &apiv1.LabelNodeRequest{Set: map[string]string{"a b": "x"}}, "set[a b]"},
		{"a bad value", &apiv1.LabelNodeRequest{Set: map[string]string{"tier": "a b"}}, "set[tier]"},
		{"a bad key to remove", &apiv1.LabelNodeRequest{Remove: []string{"-x"}}, "remove[0]"},
		{"set and removed", &apiv1.LabelNodeRequest{Set: map[string]string{"zone": "a"}, Remove: []string{"zone"}}, "remove[0]"},
		{"a bad node name", &apiv1.LabelNodeRequest{Name: "Not_A_Node", Set: map[string]string{"zone": "a"}}, "name"},
		{"too many", &apiv1.LabelNodeRequest{Set: manyLabels(validation.MaxAdminNodeLabels + 1)}, "set"},
		{"too many with those there", &apiv1.LabelNodeRequest{Set: manyLabels(validation.MaxAdminNodeLabels)}, "metadata.labels"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := label(tc.req)
			wantInvalid(t, err, tc.field)
			n, err := f.nodes.Get(ctx, &apiv1.GetNodeRequest{Name: "host-1"})
			if err != nil {
				t.Fatal(err)
			}
			wantLabels(t, "after a refused request", n, want)
		})
	}
	_, err = f.nodes.Label(ctx, &apiv1.LabelNodeRequest{Name: "ghost", Set: map[string]string{"zone": "a"}})
	wantCode(t, "labelling an unknown node", err, codes.NotFound)
}

// What a node may call of the Nodes service is Get, Register and Heartbeat:
// any other method would be one more way for it to change its labels, so
// a new one must be looked at here before nodes get it
// (TestEveryMethodHasAnAuthorizationRule sees that each is classified).
func TestNodesMethodsOpenToNodes(t *testing.T) {
	svc := apiv1.File_internal_api_v1_service_proto.Services().ByName("Nodes")
	var open []string
	methods := svc.Methods()
	for i := range methods.Len() {
		m := methods.Get(i)
		if _, ok := nodeRules[fmt.Sprintf("/%s/%s", svc.FullName(), m.Name())]; ok {
			open = append(open, string(m.Name()))
		}
	}
	slices.Sort(open)
	if want := []string{"Get", "Heartbeat", "Register"}; !slices.Equal(open, want) {
		t.Fatalf("nodes may call Nodes.%v, want %v", open, want)
	}
}
