package provider

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
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

func TestSelectorID(t *testing.T) {
	for in, want := range map[string]string{
		"":                    "*",
		"  ":                  "*",
		"zone=a":              "zone=a",
		"zone = a, gpu":       "gpu,zone=a",
		"tier in (web, db),x": "tier in (db,web),x",
	} {
		if got := selectorID(in); got != want {
			t.Errorf("selectorID(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestLabelSelectorValidator(t *testing.T) {
	for sel, ok := range map[string]bool{
		"":                  true,
		"zone=a,gpu!=true":  true,
		"tier in (db,web)":  true,
		"!maintenance":      true,
		"zone in ((a)":      false,
		"==":                false,
		"zone=a b":          false,
		"bad key!/x=1":      false,
		"zone notin (a,b),": false,
	} {
		req := validator.StringRequest{Path: path.Root("label_selector"), ConfigValue: types.StringValue(sel)}
		var resp validator.StringResponse
		labelSelectorValidator().ValidateString(context.Background(), req, &resp)
		if got := !resp.Diagnostics.HasError(); got != ok {
			t.Errorf("selector %q: valid = %v, want %v (%v)", sel, got, ok, resp.Diagnostics)
		}
		if !ok && !strings.Contains(resp.Diagnostics.Errors()[0].Detail(), "label_selector") {
			t.Errorf("selector %q: error does not name label_selector", sel)
		}
	}
	// Unknown values are checked once they are known.
	var resp validator.StringResponse
	labelSelectorValidator().ValidateString(context.Background(),
		validator.StringRequest{Path: path.Root("label_selector"), ConfigValue: types.StringUnknown()}, &resp)
	if resp.Diagnostics.HasError() {
		t.Error("unknown selector rejected")
	}
}

func TestAPIError(t *testing.T) {
	const ep = "unix:///run/virtplane/agent.sock"
	tests := []struct {
		err  error
		want []string
	}{
		{status.Error(codes.Unavailable, "connection refused"),
			[]string{"unreachable at " + ep, "connection refused", "virtplane-agent is running"}},
		{status.Error(codes.Unavailable, "tls: failed to verify certificate: x509: certificate signed by unknown authority"),
			[]string{"unreachable at " + ep, "ca_file"}},
		{status.Error(codes.Unauthenticated, "missing bearer token"),
			[]string{"rejected", "missing bearer token", "token_file"}},
		{status.Error(codes.Internal, "boom"), []string{"Internal", "boom", ep}},
		{errors.New("not a status"), []string{"not a status"}},
	}
	for _, tt := range tests {
		summary, detail := apiError(tt.err, ep, "list nodes")
		text := summary + "\n" + detail
		if !strings.HasPrefix(detail, "Cannot list nodes") {
			t.Errorf("%v: detail does not say what failed: %s", tt.err, detail)
		}
		for _, w := range tt.want {
			if !strings.Contains(text, w) {
				t.Errorf("%v: message lacks %q:\n%s", tt.err, w, text)
			}
		}
	}
}

// A read during plan with an unknown provider configuration explains
// itself, or defers when Terraform allows it; it never dials.
func TestReadWithUnknownProviderConfig(t *testing.T) {
	ctx := context.Background()
	ds := &nodesDataSource{configuredDataSource{data: &providerData{unknown: []string{"endpoint"}}}}
	var sresp datasource.SchemaResponse
	ds.Schema(ctx, datasource.SchemaRequest{}, &sresp)
	typ := sresp.Schema.Type().TerraformType(ctx)
	cfg := tftypes.NewValue(typ, map[string]tftypes.Value{
		"id":             tftypes.NewValue(tftypes.String, nil),
		"label_selector": tftypes.NewValue(tftypes.String, nil),
		"nodes":          tftypes.NewValue(typ.(tftypes.Object).AttributeTypes["nodes"], nil),
	})
	read := func(deferralAllowed bool) *datasource.ReadResponse {
		req := datasource.ReadRequest{Config: tfsdk.Config{Schema: sresp.Schema, Raw: cfg}}
		req.ClientCapabilities.DeferralAllowed = deferralAllowed
		resp := &datasource.ReadResponse{State: tfsdk.State{Schema: sresp.Schema, Raw: tftypes.NewValue(typ, nil)}}
		ds.Read(ctx, req, resp)
		return resp
	}

	resp := read(false)
	if errs := resp.Diagnostics.Errors(); len(errs) != 1 ||
		!strings.Contains(errs[0].Summary(), "not known yet") ||
		!strings.Contains(errs[0].Detail(), "endpoint") || !strings.Contains(errs[0].Detail(), "depends_on") {
		t.Errorf("want one error naming endpoint and depends_on, got %v", resp.Diagnostics)
	}
	resp = read(true)
	if resp.Diagnostics.HasError() || resp.Deferred == nil ||
		resp.Deferred.Reason != datasource.DeferredReasonProviderConfigUnknown {
		t.Errorf("with deferral allowed: deferred %v, diags %v", resp.Deferred, resp.Diagnostics)
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
