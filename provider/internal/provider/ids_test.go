package provider

import (
	"context"
	"fmt"
	"maps"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

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

func TestParseVMID(t *testing.T) {
	for _, c := range []struct{ in, ns, name string }{
		{"prod/web", "prod", "web"},
		{"web", "default", "web"},
	} {
		ns, name, err := parseNamespacedID(c.in)
		if err != nil || ns != c.ns || name != c.name {
			t.Errorf("parseNamespacedID(%q) = %q, %q, %v", c.in, ns, name, err)
		}
	}
	for _, bad := range []string{"", "/", "a/", "/b", "a/b/c"} {
		if _, _, err := parseNamespacedID(bad); err == nil {
			t.Errorf("parseNamespacedID(%q) accepted", bad)
		}
	}
}

// Every kind imported by namespace/name takes the same ids and words a bad
// one as it always has, naming the kind and an example; what it sets
// besides the key are its own provider-only defaults.
func TestImportNamespaced(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		r     resource.Resource
		bad   string            // the detail for an invalid id, before the parse error
		extra map[string]string // the attributes import sets besides id, namespace and name
	}{
		{NewVMResource(), "Import a virtual machine by namespace/name (default/web), or by name alone for the default namespace: ",
			map[string]string{"update_policy": `"restart"`}},
		{NewPoolResource(), "Import a virtual machine pool by namespace/name (default/web), or by name alone for the default namespace: ",
			map[string]string{"wait_for_ready": "true"}},
		{NewReplicaSetResource(), "Import a replica set by namespace/name (default/web), or by name alone for the default namespace: ", map[string]string{"wait_for_ready": "true"}},
		{NewSnapshotResource(), "Import a virtual machine snapshot by namespace/name (default/before-upgrade), or by name alone for the default namespace: ", nil},
		{NewRestoreResource(), "Import a virtual machine restore by namespace/name, or by name alone for the default namespace: ", nil},
	} {
		var sresp resource.SchemaResponse
		c.r.Schema(ctx, resource.SchemaRequest{}, &sresp)
		importID := func(id string) *resource.ImportStateResponse {
			resp := &resource.ImportStateResponse{State: tfsdk.State{Schema: sresp.Schema,
				Raw: tftypes.NewValue(sresp.Schema.Type().TerraformType(ctx), nil)}}
			c.r.(resource.ResourceWithImportState).ImportState(ctx, resource.ImportStateRequest{ID: id}, resp)
			return resp
		}
		name := fmt.Sprintf("%T", c.r)

		resp := importID("a/b/c")
		wantDetail := c.bad + `want namespace/name or name, got "a/b/c"`
		if errs := resp.Diagnostics.Errors(); len(errs) != 1 || errs[0].Summary() != "Invalid import ID" ||
			errs[0].Detail() != wantDetail {
			t.Errorf("%s: import a/b/c: %v, want one error %q", name, resp.Diagnostics, wantDetail)
		}

		resp = importID("prod/web")
		if resp.Diagnostics.HasError() {
			t.Fatalf("%s: import prod/web: %v", name, resp.Diagnostics)
		}
		want := map[string]string{"id": `"prod/web"`, "namespace": `"prod"`, "name": `"web"`}
		maps.Copy(want, c.extra)
		for a, v := range want {
			var got attr.Value
			resp.Diagnostics.Append(resp.State.GetAttribute(ctx, path.Root(a), &got)...)
			if got == nil || got.String() != v {
				t.Errorf("%s: import prod/web set %s = %v, want %s", name, a, got, v)
			}
		}
	}
}

// The resources that are a node's are imported by the node's name.
func TestImportNode(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		r    resource.Resource
		what string
	}{
		{NewNodeMaintenanceResource(), "a node maintenance"},
		{NewNodeLabelsResource(), "a node's labels"},
	} {
		var sresp resource.SchemaResponse
		c.r.Schema(ctx, resource.SchemaRequest{}, &sresp)
		importID := func(id string) *resource.ImportStateResponse {
			resp := &resource.ImportStateResponse{State: tfsdk.State{Schema: sresp.Schema,
				Raw: tftypes.NewValue(sresp.Schema.Type().TerraformType(ctx), nil)}}
			c.r.(resource.ResourceWithImportState).ImportState(ctx, resource.ImportStateRequest{ID: id}, resp)
			return resp
		}
		name := fmt.Sprintf("%T", c.r)

		wantDetail := "Import " + c.what + " by the node's name: terraform import <address> NODE"
		if errs := importID("").Diagnostics.Errors(); len(errs) != 1 || errs[0].Summary() != "Invalid import ID" || errs[0].Detail() != wantDetail {
			t.Errorf("%s: import of no name: %v, want one error %q", name, errs, wantDetail)
		}
		resp := importID("node-1")
		if resp.Diagnostics.HasError() {
			t.Fatalf("%s: import node-1: %v", name, resp.Diagnostics)
		}
		for _, a := range []string{"id", "node"} {
			var got attr.Value
			resp.Diagnostics.Append(resp.State.GetAttribute(ctx, path.Root(a), &got)...)
			if got == nil || got.String() != `"node-1"` {
				t.Errorf("%s: import node-1 set %s = %v, want \"node-1\"", name, a, got)
			}
		}
	}
}
