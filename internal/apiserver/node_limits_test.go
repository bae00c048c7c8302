package apiserver

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
)

func limitNode(name string) *apiv1.Node {
	return &apiv1.Node{
		Metadata: &apiv1.ObjectMeta{Name: name, Labels: map[string]string{"node.virtplane.io/zone": "a"}},
		Status: &apiv1.NodeStatus{
			Capacity:    map[string]string{"cpu": "8", "memory": "32Gi"},
			Allocatable: map[string]string{"cpu": "8", "memory": "31Gi"},
			Schedulable: true,
			NodeInfo:    &apiv1.NodeInfo{Hostname: name, AgentVersion: "dev", KernelVersion: "6.1.0-28-amd64", Architecture: "amd64"},
			Address:     "10.0.0.7:7443",
		},
	}
}

// Issue 13: a phantom node with 1 PiB of memory was accepted, and would
// have drawn every VM. What a node reports is validated, field by field.
func TestNodeRegisterLimits(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if _, err := f.nodes.Register(ctx, &apiv1.RegisterNodeRequest{Node: limitNode("good")}); err != nil {
		t.Fatalf("a real node: %v", err)
	}
	sum := strings.Repeat("0", 64)
	for _, tc := range []struct {
		name   string
		mutate func(n *apiv1.Node)
		field  string
	}{
		{"1 PiB of memory", func(n *apiv1.Node) { n.Status.Capacity["memory"] = "1Pi"; n.Status.Allocatable["memory"] = "1Pi" },
			"status.capacity[memory]"},
		{"a million CPUs", func(n *apiv1.Node) { n.Status.Allocatable["cpu"] = "1000000" }, "status.allocatable[cpu]"},
		{"allocatable above capacity", func(n *apiv1.Node) { n.Status.Allocatable["memory"] = "64Gi" }, "status.allocatable[memory]"},
		{"unknown resource", func(n *apiv1.Node) { n.Status.Capacity["example.com/gpu"] = "8" }, "status.capacity"},
		{"not canonical", func(n *apiv1.Node) { n.Status.Capacity["memory"] = "32768Mi" }, "status.capacity[memory]"},
		{"terminal escapes in node info", func(n *apiv1.Node) { n.Status.NodeInfo.KernelVersion = "6.1\x1b]0;pwned\x07" },
			"status.node_info.kernel_version"},
		{"long node info", func(n *apiv1.Node) { n.Status.NodeInfo.AgentVersion = strings.Repeat("v", 100000) },
			"status.node_info.agent_version"},
		{"address", func(n *apiv1.Node) { n.Status.Address = "10.0.0.7 and more" }, "status.address"},
		{"labels", func(n *apiv1.Node) { n.Metadata.Labels = manyLabels(validation.MaxLabels + 1) }, "metadata.labels"},
		// Issue 33: a node labelled itself tier=secure and drew the VMs
		// that select it; a node sets only its own labels (node_label_test.go).
		{"an admin's label", func(n *apiv1.Node) { n.Metadata.Labels["tier"] = "secure" }, "metadata.labels[tier]"},
		{"the node-name label", func(n *apiv1.Node) { n.Metadata.Labels[apiv1.LabelNodeName] = "other" }, "metadata.labels[virtplane.io/node-name]"},
		{"more own labels than a node has", func(n *apiv1.Node) {
			for i := range validation.MaxNodeOwnedLabels {
				n.Metadata.Labels[fmt.Sprintf("%sl%d", apiv1.NodeLabelPrefix, i)] = "x"
			}
		}, "metadata.labels"},
		{"sidecar as image", func(n *apiv1.Node) {
			n.Status.Images = []*apiv1.NodeImage{{Name: ".debian.qcow2.info.json", Format: "raw", Sha256: sum}}
		}, "status.images[0].name"},
		{"unclean image name", func(n *apiv1.Node) {
			n.Status.Images = []*apiv1.NodeImage{{Name: "sub/./x", Format: "raw", Sha256: sum}}
		}, "status.images[0].name"},
		{"negative image size", func(n *apiv1.Node) {
			n.Status.Images = []*apiv1.NodeImage{{Name: "x.raw", Format: "raw", SizeBytes: -1}}
		}, "status.images[0].size_bytes"},
		{"too many images", func(n *apiv1.Node) {
			for i := range validation.MaxNodeImages + 1 {
				n.Status.Images = append(n.Status.Images, &apiv1.NodeImage{Name: fmt.Sprintf("i%d.raw", i)})
			}
		}, "status.images"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := limitNode("phantom")
			tc.mutate(n)
			_, err := f.nodes.Register(ctx, &apiv1.RegisterNodeRequest{Node: n})
			wantInvalid(t, err, tc.field)
			if _, err := f.st.Nodes.Get(ctx, "", "phantom"); err == nil {
				t.Fatal("the refused node was stored")
			}
		})
	}
}

// A heartbeat is checked too: it cannot raise what a node offers above
// what it has, or past any host's, and names only a valid node.
func TestHeartbeatLimits(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if _, err := f.nodes.Register(ctx, &apiv1.RegisterNodeRequest{Node: limitNode("host-1")}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		req   *apiv1.HeartbeatRequest
		field string
	}{
		{"1 PiB", &apiv1.HeartbeatRequest{Name: "host-1", Allocatable: map[string]string{"memory": "1Pi"}}, "allocatable[memory]"},
		{"above capacity", &apiv1.HeartbeatRequest{Name: "host-1", Allocatable: map[string]string{"memory": "33Gi"}}, "allocatable[memory]"},
		{"unknown resource", &apiv1.HeartbeatRequest{Name: "host-1", Allocatable: map[string]string{"pods": "110"}}, "allocatable"},
		{"bad name", &apiv1.HeartbeatRequest{Name: "../host-1"}, "name"},
		{"long name", &apiv1.HeartbeatRequest{Name: strings.Repeat("a", 300)}, "name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.nodes.Heartbeat(ctx, tc.req)
			wantInvalid(t, err, tc.field)
		})
	}
	n, err := f.nodes.Get(ctx, &apiv1.GetNodeRequest{Name: "host-1"})
	if err != nil || n.Status.Allocatable["memory"] != "31Gi" {
		t.Fatalf("after refused heartbeats: %v, allocatable %v", err, n.GetStatus().GetAllocatable())
	}
	if _, err := f.nodes.Heartbeat(ctx, &apiv1.HeartbeatRequest{Name: "host-1", Allocatable: map[string]string{"memory": "30Gi"}}); err != nil {
		t.Fatalf("a valid heartbeat: %v", err)
	}
	if _, err := f.nodes.Get(ctx, &apiv1.GetNodeRequest{Name: "Not_A_Node"}); code(err) != 3 {
		t.Fatalf("get with a bad name: %v", err)
	}
}

// Fields the server does not know are not stored with the node.
func TestNodeRegisterDropsUnknownFields(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	n := limitNode("host-2")
	var junk []byte
	junk = protowire.AppendTag(junk, 999, protowire.BytesType)
	junk = protowire.AppendBytes(junk, make([]byte, 64<<10))
	n.Status.NodeInfo.ProtoReflect().SetUnknown(junk)
	n.Status.Images = []*apiv1.NodeImage{{Name: "x.raw", Format: "raw"}}
	n.Status.Images[0].ProtoReflect().SetUnknown(junk)
	if _, err := f.nodes.Register(ctx, &apiv1.RegisterNodeRequest{Node: n}); err != nil {
		t.Fatal(err)
	}
	stored, err := f.st.Nodes.Get(ctx, "", "host-2")
	if err != nil {
		t.Fatal(err)
	}
	if s := proto.Size(stored); s > 4096 {
		t.Fatalf("the stored node is %d bytes: unknown fields were kept", s)
	}
}
