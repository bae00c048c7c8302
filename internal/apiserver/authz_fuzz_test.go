package apiserver

import (
	"testing"

	"k8s.io/apimachinery/pkg/labels"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// FuzzOwnNodeSelector: a selector a node may list or watch instances with
// never selects an instance of another node, nor one with no node.
func FuzzOwnNodeSelector(f *testing.F) {
	for _, s := range []string{
		apiv1.LabelNodeName + "=node-a",
		apiv1.LabelNodeName + "==node-a,app=web",
		apiv1.LabelNodeName + " in (node-a)",
		apiv1.LabelNodeName + " in (node-a,node-b)",
		apiv1.LabelNodeName + "!=node-b",
		"!" + apiv1.LabelNodeName,
		"",
	} {
		f.Add(s, "node-b")
	}
	f.Fuzz(func(t *testing.T, selector, other string) {
		if ownNodeSelector("node-a", selector) != nil {
			return
		}
		sel, err := labels.Parse(selector)
		if err != nil {
			t.Fatalf("accepted a selector that does not parse: %q", selector)
		}
		if other != "node-a" && sel.Matches(labels.Set{apiv1.LabelNodeName: other, "app": "web"}) {
			t.Fatalf("selector %q, accepted for node-a, selects an instance of %q", selector, other)
		}
		if sel.Matches(labels.Set{"app": "web"}) {
			t.Fatalf("selector %q, accepted for node-a, selects an instance of no node", selector)
		}
	})
}
