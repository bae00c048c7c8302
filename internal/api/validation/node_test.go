package validation

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

func validNode() *apiv1.Node {
	return &apiv1.Node{
		Metadata: &apiv1.ObjectMeta{Name: "node-1.example.com", Labels: map[string]string{"kubernetes.io/arch": "amd64"}},
		Status: &apiv1.NodeStatus{
			Capacity:    map[string]string{"cpu": "8", "memory": "32Gi"},
			Allocatable: map[string]string{"cpu": "7500m", "memory": "30Gi"},
		},
	}
}

func TestValidateNode(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(n *apiv1.Node)
		want   []want
	}{
		{"valid", func(*apiv1.Node) {}, nil},
		{"no status", func(n *apiv1.Node) { n.Status = nil }, nil},
		{"name longer than a label", func(n *apiv1.Node) { n.Metadata.Name = strings.Repeat("a", 63) + ".example.com" }, nil},
		{"name missing", func(n *apiv1.Node) { n.Metadata.Name = "" }, []want{required("metadata.name")}},
		{"name invalid", func(n *apiv1.Node) { n.Metadata.Name = "Node_1" }, []want{invalid("metadata.name")}},
		{"name too long", func(n *apiv1.Node) { n.Metadata.Name = strings.Repeat("a.", 127) + "a" }, []want{invalid("metadata.name")}},
		{"namespace set", func(n *apiv1.Node) { n.Metadata.Namespace = "default" }, []want{forbidden("metadata.namespace")}},
		{"label invalid", func(n *apiv1.Node) { n.Metadata.Labels["zone"] = "eu west" }, []want{invalid("metadata.labels[zone]")}},
		{"capacity not a quantity", func(n *apiv1.Node) { n.Status.Capacity["memory"] = "lots" },
			[]want{invalid("status.capacity[memory]")}},
		{"allocatable negative", func(n *apiv1.Node) { n.Status.Allocatable["cpu"] = "-1" },
			[]want{invalid("status.allocatable[cpu]")}},
		{"allocatable empty", func(n *apiv1.Node) { n.Status.Allocatable["cpu"] = "" },
			[]want{invalid("status.allocatable[cpu]")}},
		{"resource name invalid", func(n *apiv1.Node) { n.Status.Capacity["a b"] = "1" },
			[]want{invalid("status.capacity")}},
		{"metadata missing", func(n *apiv1.Node) { n.Metadata = nil }, []want{required("metadata")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := validNode()
			tc.mutate(n)
			expectErrors(t, ValidateNode(n), tc.want...)
		})
	}
	expectErrors(t, ValidateNode(nil), required("metadata"))
}

func TestValidateObjectMeta(t *testing.T) {
	p := field.NewPath("metadata")
	expectErrors(t, ValidateObjectMeta(nil, true, p), required("metadata"))
	expectErrors(t, ValidateObjectMeta(&apiv1.ObjectMeta{}, true, p), required("metadata.name"), required("metadata.namespace"))
	expectErrors(t, ValidateObjectMeta(&apiv1.ObjectMeta{}, false, p), required("metadata.name"))
	expectErrors(t, ValidateObjectMeta(&apiv1.ObjectMeta{Name: "a.b", Namespace: "ns"}, true, p), invalid("metadata.name"))
	expectErrors(t, ValidateObjectMeta(&apiv1.ObjectMeta{Name: "a.b"}, false, p))
	// Server-managed fields are not the user's to get wrong.
	expectErrors(t, ValidateObjectMeta(&apiv1.ObjectMeta{Name: "a", Namespace: "b", Uid: "x", ResourceVersion: 7, Generation: 2}, true, p))
}
