package validation

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/api/validate/content"
	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

func TestNodeLabelOwners(t *testing.T) {
	for _, tc := range []struct {
		key        string
		own, admin bool
	}{
		{apiv1.LabelKVM, true, false},
		{"node.virtplane.io/zone", true, false},
		{apiv1.LabelNodeName, false, false},
		{"tier", false, true},
		{"virtplane.io/kvm", true, false}, // the old key, which agents not upgraded yet send
		{"virtplane.io/kvm2", false, true},
		{"evil.node.virtplane.io/zone", false, true},
		{"node.virtplane.io.evil/zone", false, true},
		{"node.virtplane.io", false, true},
	} {
		if got := NodeOwnedLabel(tc.key); got != tc.own {
			t.Errorf("NodeOwnedLabel(%q) = %v", tc.key, got)
		}
		if got := AdminNodeLabel(tc.key); got != tc.admin {
			t.Errorf("AdminNodeLabel(%q) = %v", tc.key, got)
		}
	}
	if k := NodeLabelKey("virtplane.io/kvm"); k != apiv1.LabelKVM {
		t.Errorf("the legacy KVM label is stored as %s", k)
	}
	if k := NodeLabelKey("node.virtplane.io/zone"); k != "node.virtplane.io/zone" {
		t.Errorf("node.virtplane.io/zone is stored as %s", k)
	}
}

func TestValidateLabelNode(t *testing.T) {
	many := func(n int) map[string]string {
		m := map[string]string{}
		for i := range n {
			m[fmt.Sprintf("l%d", i)] = "x"
		}
		return m
	}
	for _, tc := range []struct {
		name string
		req  *apiv1.LabelNodeRequest
		want []want
	}{
		{"set and remove", &apiv1.LabelNodeRequest{Name: "n1", Set: map[string]string{"tier": "secure", "example.com/rack": ""},
			Remove: []string{"zone", "virtplane.io/kvm2"}}, nil},
		{"legacy node label", &apiv1.LabelNodeRequest{Name: "n1", Set: map[string]string{"virtplane.io/kvm": "true"}},
			[]want{forbidden("set[virtplane.io/kvm]")}},
		{"nothing", &apiv1.LabelNodeRequest{Name: "n1"}, nil},
		{"no name", &apiv1.LabelNodeRequest{Set: map[string]string{"tier": "a"}}, []want{required("name")}},
		{"bad name", &apiv1.LabelNodeRequest{Name: "../n1"}, []want{invalid("name")}},
		{"node's own", &apiv1.LabelNodeRequest{Name: "n1", Set: map[string]string{"node.virtplane.io/zone": "a"}},
			[]want{forbidden("set[node.virtplane.io/zone]")}},
		{"server's", &apiv1.LabelNodeRequest{Name: "n1", Set: map[string]string{apiv1.LabelNodeName: "n2"}},
			[]want{forbidden("set[virtplane.io/node-name]")}},
		{"remove node's own", &apiv1.LabelNodeRequest{Name: "n1", Remove: []string{"a", apiv1.LabelKVM}}, []want{forbidden("remove[1]")}},
		{"remove server's", &apiv1.LabelNodeRequest{Name: "n1", Remove: []string{apiv1.LabelNodeName}}, []want{forbidden("remove[0]")}},
		{"bad key", &apiv1.LabelNodeRequest{Name: "n1", Set: map[string]string{"a/b/c": "x"}}, []want{invalid("set[a/b/c]")}},
		{"bad value", &apiv1.LabelNodeRequest{Name: "n1", Set: map[string]string{"a": strings.Repeat("x", 64)}}, []want{invalid("set[a]")}},
		{"bad key to remove", &apiv1.LabelNodeRequest{Name: "n1", Remove: []string{"-x"}}, []want{invalid("remove[0]")}},
		{"both", &apiv1.LabelNodeRequest{Name: "n1", Set: map[string]string{"a": "x"}, Remove: []string{"a"}}, []want{invalid("remove[0]")}},
		{"at the bound", &apiv1.LabelNodeRequest{Name: "n1", Set: many(MaxAdminNodeLabels)}, nil},
		{"too many", &apiv1.LabelNodeRequest{Name: "n1", Set: many(MaxAdminNodeLabels + 1)}, []want{tooMany("set")}},
		{"too many to remove", &apiv1.LabelNodeRequest{Name: "n1", Remove: make([]string, MaxLabels+1)}, []want{tooMany("remove")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			expectErrors(t, ValidateLabelNode(tc.req), tc.want...)
		})
	}
}

func TestValidateAdminNodeLabelCount(t *testing.T) {
	labels := map[string]string{apiv1.LabelNodeName: "n1"}
	for i := range MaxNodeOwnedLabels {
		labels[fmt.Sprintf("node.virtplane.io/l%d", i)] = "x"
	}
	for i := range MaxAdminNodeLabels {
		labels[fmt.Sprintf("l%d", i)] = "x"
	}
	p := field.NewPath("metadata", "labels")
	expectErrors(t, ValidateAdminNodeLabelCount(labels, p))
	if len(labels) != MaxLabels {
		t.Fatalf("a node full of both kinds has %d labels, want MaxLabels (%d)", len(labels), MaxLabels)
	}
	labels["one-more"] = "x"
	expectErrors(t, ValidateAdminNodeLabelCount(labels, p), tooMany("metadata.labels"))
}

// FuzzValidateLabelNode: whatever an admin's Label request holds, the
// validator does not panic, and a request it passes sets and removes only
// admins' labels of valid syntax, within the bounds.
func FuzzValidateLabelNode(f *testing.F) {
	seed := func(req *apiv1.LabelNodeRequest) {
		b, err := proto.Marshal(req)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	seed(&apiv1.LabelNodeRequest{Name: "n1", Set: map[string]string{"tier": "secure"}, Remove: []string{"zone"}})
	seed(&apiv1.LabelNodeRequest{Name: "n1", Set: map[string]string{apiv1.LabelKVM: "true", apiv1.LabelNodeName: "n2"}})
	seed(&apiv1.LabelNodeRequest{Name: "n1", Remove: []string{"node.virtplane.io/", "evil.node.virtplane.io/x", "a"}, Overwrite: true})
	f.Fuzz(func(t *testing.T, data []byte) {
		req := &apiv1.LabelNodeRequest{}
		if proto.Unmarshal(data, req) != nil {
			return
		}
		if len(ValidateLabelNode(req)) > 0 {
			return
		}
		if len(req.GetSet()) > MaxAdminNodeLabels || len(req.GetRemove()) > MaxLabels {
			t.Fatalf("passed with %d labels to set and %d to remove", len(req.GetSet()), len(req.GetRemove()))
		}
		keys := append([]string(nil), req.GetRemove()...)
		for k, v := range req.GetSet() {
			keys = append(keys, k)
			if len(content.IsLabelValue(v)) > 0 {
				t.Fatalf("passed the value %q", v)
			}
		}
		for _, k := range keys {
			if !AdminNodeLabel(k) || strings.HasPrefix(k, apiv1.NodeLabelPrefix) || k == apiv1.LabelNodeName {
				t.Fatalf("passed the key %q, which is not an admin's", k)
			}
			if len(content.IsLabelKey(k)) > 0 {
				t.Fatalf("passed the key %q", k)
			}
		}
	})
}

// FuzzValidateNodeOwnedLabels: labels a node registers with pass only when
// each is the node's own and valid, and no more than MaxNodeOwnedLabels.
func FuzzValidateNodeOwnedLabels(f *testing.F) {
	f.Add("node.virtplane.io/kvm", "true", "tier", "secure")
	f.Add("node.virtplane.io/a", "", "node.virtplane.io/b", "x")
	f.Add("virtplane.io/node-name", "n2", "node.virtplane.io", "y")
	f.Add("node.virtplane.io", "y", "node.virtplane.io/kvm", "true") // the prefix without its slash
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2 string) {
		labels := map[string]string{k1: v1, k2: v2}
		n := &apiv1.Node{Metadata: &apiv1.ObjectMeta{Name: "n1", Labels: labels}}
		viaNode, direct := ValidateNode(n), ValidateNodeOwnedLabels(labels, field.NewPath("metadata", "labels"))
		if (len(viaNode) == 0) != (len(direct) == 0) {
			t.Fatalf("ValidateNode %v and ValidateNodeOwnedLabels %v disagree", viaNode, direct)
		}
		if len(direct) > 0 {
			return
		}
		for k, v := range labels {
			if !NodeOwnedLabel(k) || AdminNodeLabel(k) || len(content.IsLabelKey(k)) > 0 || len(content.IsLabelValue(v)) > 0 {
				t.Fatalf("passed %q=%q", k, v)
			}
			// Not by NodeOwnedLabel alone, which this tests: the prefix,
			// or the one key of earlier releases.
			if !strings.HasPrefix(k, apiv1.NodeLabelPrefix) && k != "virtplane.io/kvm" {
				t.Fatalf("passed %q, neither under %s nor the legacy KVM label", k, apiv1.NodeLabelPrefix)
			}
		}
	})
}
