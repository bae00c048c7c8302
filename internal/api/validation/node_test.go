package validation

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

func validNode() *apiv1.Node {
	return &apiv1.Node{
		Metadata: &apiv1.ObjectMeta{Name: "node-1.example.com", Labels: map[string]string{apiv1.LabelKVM: "true"}},
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
		{"label invalid", func(n *apiv1.Node) { n.Metadata.Labels["node.virtplane.io/zone"] = "eu west" },
			[]want{invalid("metadata.labels[node.virtplane.io/zone]")}},
		// Issue 33: a node labelled itself tier=secure to draw the VMs
		// that select it. It sets only its own labels.
		{"an admin's label", func(n *apiv1.Node) { n.Metadata.Labels["tier"] = "secure" }, []want{forbidden("metadata.labels[tier]")}},
		{"the server's label", func(n *apiv1.Node) { n.Metadata.Labels[apiv1.LabelNodeName] = "node-2" },
			[]want{forbidden("metadata.labels[virtplane.io/node-name]")}},
		{"a prefix that only looks like the node's", func(n *apiv1.Node) { n.Metadata.Labels["evil.node.virtplane.io/x"] = "y" },
			[]want{forbidden("metadata.labels[evil.node.virtplane.io/x]")}},
		{"the prefix without a name", func(n *apiv1.Node) { n.Metadata.Labels["node.virtplane.io"] = "y" },
			[]want{forbidden("metadata.labels[node.virtplane.io]")}},
		{"own labels at the bound", func(n *apiv1.Node) {
			for i := range MaxNodeOwnedLabels - 1 {
				n.Metadata.Labels[fmt.Sprintf("node.virtplane.io/l%d", i)] = "x"
			}
		}, nil},
		{"too many own labels", func(n *apiv1.Node) {
			for i := range MaxNodeOwnedLabels {
				n.Metadata.Labels[fmt.Sprintf("node.virtplane.io/l%d", i)] = "x"
			}
		}, []want{tooMany("metadata.labels")}},
		{"capacity not a quantity", func(n *apiv1.Node) { n.Status.Capacity["memory"] = "lots" },
			[]want{invalid("status.capacity[memory]")}},
		{"allocatable negative", func(n *apiv1.Node) { n.Status.Allocatable["cpu"] = "-1" },
			[]want{invalid("status.allocatable[cpu]")}},
		{"allocatable empty", func(n *apiv1.Node) { n.Status.Allocatable["cpu"] = "" },
			[]want{invalid("status.allocatable[cpu]")}},
		{"resource name invalid", func(n *apiv1.Node) { n.Status.Capacity["a b"] = "1" },
			[]want{notSupported("status.capacity")}},
		{"resource unknown", func(n *apiv1.Node) { n.Status.Allocatable["example.com/gpu"] = "1" },
			[]want{notSupported("status.allocatable")}},
		// Issue 13: a phantom node with 1 PiB of memory was accepted.
		{"memory of no host", func(n *apiv1.Node) { n.Status.Capacity["memory"] = "1Pi" },
			[]want{invalid("status.capacity[memory]")}},
		{"memory at the bound", func(n *apiv1.Node) { n.Status.Capacity["memory"] = "64Ti"; n.Status.Allocatable["memory"] = "64Ti" }, nil},
		{"cpus of no host", func(n *apiv1.Node) { n.Status.Capacity["cpu"] = "5000" },
			[]want{invalid("status.capacity[cpu]")}},
		{"cpus at the bound", func(n *apiv1.Node) { n.Status.Capacity["cpu"] = "4096" }, nil},
		{"not canonical", func(n *apiv1.Node) { n.Status.Capacity["memory"] = "32768Mi" },
			[]want{invalid("status.capacity[memory]")}},
		{"not canonical cpu", func(n *apiv1.Node) { n.Status.Allocatable["cpu"] = "7.5" },
			[]want{invalid("status.allocatable[cpu]")}},
		{"fraction of a byte", func(n *apiv1.Node) { n.Status.Allocatable["memory"] = "1500m" },
			[]want{invalid("status.allocatable[memory]")}},
		{"allocatable above capacity", func(n *apiv1.Node) { n.Status.Allocatable["memory"] = "64Gi" },
			[]want{invalid("status.allocatable[memory]")}},
		{"node info", func(n *apiv1.Node) {
			n.Status.NodeInfo = &apiv1.NodeInfo{Hostname: "host-1", AgentVersion: "v1.2.3 (abc)", LibvirtVersion: "9.0.0",
				QemuVersion: "7.2.19", KernelVersion: "6.1.0-28-amd64", Architecture: "amd64"}
			n.Status.Address = "[2001:db8::1]:7443"
		}, nil},
		{"node info escapes", func(n *apiv1.Node) {
			n.Status.NodeInfo = &apiv1.NodeInfo{Hostname: "host\x1b[2J", QemuVersion: strings.Repeat("9", 257), Architecture: "\xff"}
		}, []want{invalid("status.node_info.hostname"), tooLong("status.node_info.qemu_version"), invalid("status.node_info.architecture")}},
		{"address with spaces", func(n *apiv1.Node) { n.Status.Address = "10.0.0.1 evil" }, []want{invalid("status.address")}},
		{"address too long", func(n *apiv1.Node) { n.Status.Address = strings.Repeat("a", 300) }, []want{tooLong("status.address")}},
		{"migration address", func(n *apiv1.Node) { n.Status.MigrationAddress = "169.254.7.2" }, nil},
		{"migration address IPv6", func(n *apiv1.Node) { n.Status.MigrationAddress = "2001:db8::2" }, nil},
		{"migration address loopback", func(n *apiv1.Node) { n.Status.MigrationAddress = "127.0.0.1" }, []want{invalid("status.migration_address")}},
		{"migration address unspecified", func(n *apiv1.Node) { n.Status.MigrationAddress = "::" }, []want{invalid("status.migration_address")}},
		{"migration address multicast", func(n *apiv1.Node) { n.Status.MigrationAddress = "239.1.2.3" }, []want{invalid("status.migration_address")}},
		{"migration address a name", func(n *apiv1.Node) { n.Status.MigrationAddress = "node-b" }, []want{invalid("status.migration_address")}},
		{"migration address with a port", func(n *apiv1.Node) { n.Status.MigrationAddress = "10.0.0.2:16514" }, []want{invalid("status.migration_address")}},
		{"too many labels", func(n *apiv1.Node) {
			for i := range MaxLabels {
				n.Metadata.Labels[fmt.Sprintf("node.virtplane.io/l%d", i)] = "x"
			}
		}, []want{tooMany("metadata.labels"), tooMany("metadata.labels")}},
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

func TestValidateHeartbeat(t *testing.T) {
	capacity := map[string]string{"cpu": "8", "memory": "32Gi"}
	expectErrors(t, ValidateHeartbeat("node-1", map[string]string{"cpu": "8", "memory": "30Gi"}, capacity))
	expectErrors(t, ValidateHeartbeat("node-1", nil, nil))
	expectErrors(t, ValidateHeartbeat("", nil, nil), required("name"))
	expectErrors(t, ValidateHeartbeat("Node_1", nil, nil), invalid("name"))
	expectErrors(t, ValidateHeartbeat("node-1", map[string]string{"memory": "1Pi"}, nil), invalid("allocatable[memory]"))
	expectErrors(t, ValidateHeartbeat("node-1", map[string]string{"memory": "33Gi"}, capacity), invalid("allocatable[memory]"))
	expectErrors(t, ValidateHeartbeat("node-1", map[string]string{"pods": "110"}, capacity), notSupported("allocatable"))
}

// Bridges and libvirt networks are spelt as instances name them and
// listed once; what would garble a terminal is refused.
func TestValidateNodeNetworks(t *testing.T) {
	cases := []struct {
		name     string
		bridges  []string
		networks []string
		want     []want
	}{
		{"none", nil, nil, nil},
		{"valid", []string{"br0", "virbr0", "vpguest0", strings.Repeat("b", 15)}, []string{"default", "lan 2", strings.Repeat("n", 63)}, nil},
		{"bridge name too long", []string{strings.Repeat("b", 16)}, nil, []want{tooLong("status.bridges[0]")}},
		{"bridge name with a slash", []string{"br0", "a/b"}, nil, []want{invalid("status.bridges[1]")}},
		{"bridge name with a space", []string{"br 0"}, nil, []want{invalid("status.bridges[0]")}},
		{"bridge name empty", []string{""}, nil, []want{required("status.bridges[0]")}},
		{"bridge dot", []string{".."}, nil, []want{invalid("status.bridges[0]")}},
		{"bridge with an escape", []string{"br\x1b[2J"}, nil, []want{invalid("status.bridges[0]")}},
		{"bridge twice", []string{"br0", "br0"}, nil, []want{duplicate("status.bridges[1]")}},
		{"network with a slash", nil, []string{"a/b"}, []want{invalid("status.networks[0]")}},
		{"network too long", nil, []string{strings.Repeat("n", 64)}, []want{tooLong("status.networks[0]")}},
		{"network with a bell", nil, []string{"lan\a"}, []want{invalid("status.networks[0]")}},
		{"network not UTF-8", nil, []string{"\xff"}, []want{invalid("status.networks[0]")}},
		{"network twice", nil, []string{"lan", "lan"}, []want{duplicate("status.networks[1]")}},
		{"too many bridges", make([]string, MaxNodeBridges+1), nil, []want{tooMany("status.bridges")}},
		{"too many networks", nil, make([]string, MaxNodeNetworks+1), []want{tooMany("status.networks")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := validNode()
			n.Status.Bridges, n.Status.Networks = tc.bridges, tc.networks
			expectErrors(t, ValidateNode(n), tc.want...)
		})
	}
	if errs := ValidateNodeBridgeName("br0", field.NewPath("b")); len(errs) > 0 {
		t.Errorf("ValidateNodeBridgeName(br0) = %v", errs)
	}
	if errs := ValidateNodeNetworkName("a/b", field.NewPath("n")); len(errs) == 0 {
		t.Error("ValidateNodeNetworkName(a/b) passed")
	}
}
