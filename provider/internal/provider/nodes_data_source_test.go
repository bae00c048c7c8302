package provider

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"google.golang.org/protobuf/types/known/timestamppb"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

func TestNodeToModel(t *testing.T) {
	hb := time.Date(2026, 3, 4, 5, 6, 7, 890, time.FixedZone("CET", 3600))
	n := &apiv1.Node{
		Metadata: &apiv1.ObjectMeta{Name: "host-1", Labels: map[string]string{"zone": "a"}},
		Spec:     &apiv1.NodeSpec{Unschedulable: true, Drain: true},
		Status: &apiv1.NodeStatus{
			Capacity:    map[string]string{"cpu": "8", "memory": "32Gi"},
			Allocatable: map[string]string{"cpu": "7500m", "memory": "30Gi"},
			Schedulable: true,
			Heartbeat:   timestamppb.New(hb),
			Conditions: []*apiv1.Condition{
				{Type: "Other", Status: apiv1.ConditionFalse},
				{Type: "Ready", Status: apiv1.ConditionTrue},
			},
			NodeInfo: &apiv1.NodeInfo{
				AgentVersion: "v1.2.3", LibvirtVersion: "10.0.0", QemuVersion: "8.2.2", KvmUsable: true,
			},
			Evacuation: &apiv1.NodeEvacuation{Remaining: []*apiv1.Evacuee{{Namespace: "default", Name: "web", State: "Migrating"}}},
			Images: []*apiv1.NodeImage{
				{Name: "vmlinux", Format: "raw", VirtualSizeBytes: 512, SizeBytes: 500, Sha256: "bb"},
				{Name: "debian.qcow2", Format: "qcow2", VirtualSizeBytes: 3 << 30, SizeBytes: 1 << 20, Sha256: "aa"},
			},
			Bridges:  []string{"virbr0", "br0"},
			Networks: []string{"default"},
		},
	}
	want := nodeModel{
		Name:           types.StringValue("host-1"),
		Ready:          types.BoolValue(true),
		Schedulable:    types.BoolValue(true),
		Unschedulable:  types.BoolValue(true),
		Draining:       types.BoolValue(true),
		Drained:        types.BoolValue(false),
		CPU:            types.StringValue("7500m"),
		Memory:         types.StringValue("30Gi"),
		CapacityCPU:    types.StringValue("8"),
		CapacityMemory: types.StringValue("32Gi"),
		KVMUsable:      types.BoolValue(true),
		AgentVersion:   types.StringValue("v1.2.3"),
		LibvirtVersion: types.StringValue("10.0.0"),
		QEMUVersion:    types.StringValue("8.2.2"),
		Heartbeat:      types.StringValue("2026-03-04T04:06:07Z"), // UTC, whole seconds
		Labels:         map[string]string{"zone": "a"},
		Images: []nodeImageModel{ // sorted by name
			{Name: types.StringValue("debian.qcow2"), Format: types.StringValue("qcow2"), VirtualSize: types.Int64Value(3 << 30),
				Size: types.Int64Value(1 << 20), SHA256: types.StringValue("aa")},
			{Name: types.StringValue("vmlinux"), Format: types.StringValue("raw"), VirtualSize: types.Int64Value(512),
				Size: types.Int64Value(500), SHA256: types.StringValue("bb")},
		},
		Bridges:  []string{"br0", "virbr0"}, // sorted
		Networks: []string{"default"},
	}
	if got := nodeToModel(n); !reflect.DeepEqual(got, want) {
		t.Errorf("nodeToModel:\n got %+v\nwant %+v", got, want)
	}
	// The model must not alias the API object's label map.
	got := nodeToModel(n)
	got.Labels["zone"] = "changed"
	if n.Metadata.Labels["zone"] != "a" {
		t.Error("nodeToModel aliases the node's labels")
	}
}

// A node that reported nothing yet maps to nulls and false, never to "" or
// a null label map.
func TestNodeToModelEmpty(t *testing.T) {
	got := nodeToModel(&apiv1.Node{Metadata: &apiv1.ObjectMeta{Name: "bare"}})
	want := nodeModel{
		Name:           types.StringValue("bare"),
		Ready:          types.BoolValue(false),
		Schedulable:    types.BoolValue(false),
		Unschedulable:  types.BoolValue(false),
		Draining:       types.BoolValue(false),
		Drained:        types.BoolValue(false),
		CPU:            types.StringNull(),
		Memory:         types.StringNull(),
		CapacityCPU:    types.StringNull(),
		CapacityMemory: types.StringNull(),
		KVMUsable:      types.BoolValue(false),
		AgentVersion:   types.StringNull(),
		LibvirtVersion: types.StringNull(),
		QEMUVersion:    types.StringNull(),
		Heartbeat:      types.StringNull(),
		Labels:         map[string]string{},
		Images:         []nodeImageModel{},
		// Empty, not null: contains(node.bridges, "br0") must work.
		Bridges:  []string{},
		Networks: []string{},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("nodeToModel:\n got %+v\nwant %+v", got, want)
	}
}

func TestNodeReadyFromCondition(t *testing.T) {
	for status, want := range map[string]bool{
		apiv1.ConditionTrue:    true,
		apiv1.ConditionFalse:   false,
		apiv1.ConditionUnknown: false,
		"":                     false,
	} {
		n := &apiv1.Node{Metadata: &apiv1.ObjectMeta{Name: "n"}, Status: &apiv1.NodeStatus{
			Conditions: []*apiv1.Condition{{Type: "Ready", Status: status}},
		}}
		if got := nodeToModel(n).Ready.ValueBool(); got != want {
			t.Errorf("Ready=%q: ready = %v, want %v", status, got, want)
		}
	}
}

// drained is the report of the current drain only: a report left from an
// earlier drain on a node no longer draining is not "drained".
func TestNodeDrained(t *testing.T) {
	done := &apiv1.NodeStatus{Evacuation: &apiv1.NodeEvacuation{Drained: true}}
	for _, c := range []struct {
		name          string
		node          *apiv1.Node
		draining, was bool
	}{
		{"not draining", &apiv1.Node{}, false, false},
		{"draining", &apiv1.Node{Spec: &apiv1.NodeSpec{Unschedulable: true, Drain: true}}, true, false},
		{"drained", &apiv1.Node{Spec: &apiv1.NodeSpec{Unschedulable: true, Drain: true}, Status: done}, true, true},
		{"uncordoned since", &apiv1.Node{Status: done}, false, false},
	} {
		m := nodeToModel(c.node)
		if m.Draining.ValueBool() != c.draining || m.Drained.ValueBool() != c.was {
			t.Errorf("%s: draining %s drained %s, want %v %v", c.name, m.Draining, m.Drained, c.draining, c.was)
		}
	}
}

func TestNodeModelsSortedByName(t *testing.T) {
	items := []*apiv1.Node{
		{Metadata: &apiv1.ObjectMeta{Name: "c"}},
		{Metadata: &apiv1.ObjectMeta{Name: "a"}},
		{Metadata: &apiv1.ObjectMeta{Name: "b"}},
	}
	var names []string
	for _, m := range nodeModels(items) {
		names = append(names, m.Name.ValueString())
	}
	if strings.Join(names, ",") != "a,b,c" {
		t.Errorf("order = %v", names)
	}
	if got := nodeModels(nil); got == nil || len(got) != 0 {
		t.Errorf("no nodes must be an empty list, not null: %#v", got)
	}
}

func TestNodesSchemaDocumentsEveryAttribute(t *testing.T) {
	s := documentedDataSource(t, NewNodesDataSource())
	nested := s.Attributes["nodes"].(schema.ListNestedAttribute).NestedObject.Attributes
	// The model and the schema must list the same attributes.
	fields := reflect.TypeOf(nodeModel{})
	if fields.NumField() != len(nested) {
		t.Errorf("nodeModel has %d fields, schema %d attributes", fields.NumField(), len(nested))
	}
	for i := range fields.NumField() {
		tag := fields.Field(i).Tag.Get("tfsdk")
		if _, ok := nested[tag]; !ok {
			t.Errorf("nodeModel field %s has no schema attribute", tag)
		}
	}
}
