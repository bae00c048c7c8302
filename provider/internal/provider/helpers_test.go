package provider

import (
	"context"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	dschema "github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	rschema "github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// What the package's tests share: schema documentation checks, running a
// validator, and the values they build.

// documentedResource returns r's schema after checking that it is valid
// and that it, and each of its attributes and blocks, has a description.
func documentedResource(t *testing.T, r resource.Resource) rschema.Schema {
	t.Helper()
	ctx := context.Background()
	var md resource.MetadataResponse
	r.Metadata(ctx, resource.MetadataRequest{ProviderTypeName: "virtplane"}, &md)
	var resp resource.SchemaResponse
	r.Schema(ctx, resource.SchemaRequest{}, &resp)
	resourceElems(resp.Schema.Attributes, resp.Schema.Blocks, schemaDescribed(t, md.TypeName, resp.Diagnostics, resp.Schema), t)
	if d := resp.Schema.ValidateImplementation(ctx); d.HasError() {
		t.Errorf("%s schema is invalid: %v", md.TypeName, d)
	}
	return resp.Schema
}

// documentedDataSource is documentedResource for a data source.
func documentedDataSource(t *testing.T, ds datasource.DataSource) dschema.Schema {
	t.Helper()
	var md datasource.MetadataResponse
	ds.Metadata(context.Background(), datasource.MetadataRequest{ProviderTypeName: "virtplane"}, &md)
	var resp datasource.SchemaResponse
	ds.Schema(context.Background(), datasource.SchemaRequest{}, &resp)
	dataElems(resp.Schema.Attributes, schemaDescribed(t, "data."+md.TypeName, resp.Diagnostics, resp.Schema), t)
	return resp.Schema
}

// schemaDescribed stops the test when the schema of name could not be
// made, reports it when it has no description, and returns the prefix of
// its attributes' names.
func schemaDescribed(t *testing.T, name string, diags diag.Diagnostics, s described) string {
	t.Helper()
	if diags.HasError() {
		t.Fatalf("%s schema: %v", name, diags)
	}
	if s.GetDescription() == "" && s.GetMarkdownDescription() == "" {
		t.Errorf("%s has no description", name)
	}
	return name + "."
}

// mirrorsResource checks that a data source returns every attribute and
// block of the resource (blocks as attributes) but the provider-only ones
// and the timeouts.
func mirrorsResource(t *testing.T, rs rschema.Schema, ds dschema.Schema, providerOnly ...string) {
	t.Helper()
	skip := map[string]bool{"timeouts": true}
	for _, name := range providerOnly {
		skip[name] = true
	}
	for name := range rs.Attributes {
		if _, ok := ds.Attributes[name]; !ok && !skip[name] {
			t.Errorf("data source lacks attribute %s", name)
		}
	}
	for name := range rs.Blocks {
		if _, ok := ds.Attributes[name]; !ok && !skip[name] {
			t.Errorf("data source lacks %s", name)
		}
	}
}

// described is what every schema element offers for the docs.
type described interface {
	GetDescription() string
	GetMarkdownDescription() string
}

// checkDescribed walks attributes and blocks and reports any without a
// description: tfplugindocs renders them, and users read them.
func checkDescribed(t *testing.T, prefix string, attrs map[string]described, blocks map[string]described) {
	t.Helper()
	for name, a := range attrs {
		if a.GetDescription() == "" && a.GetMarkdownDescription() == "" {
			t.Errorf("%s%s has no description", prefix, name)
		}
	}
	for name, b := range blocks {
		if b.GetDescription() == "" && b.GetMarkdownDescription() == "" {
			t.Errorf("block %s%s has no description", prefix, name)
		}
	}
}

func resourceElems(attrs map[string]rschema.Attribute, blocks map[string]rschema.Block, prefix string, t *testing.T) {
	t.Helper()
	a := map[string]described{}
	for k, v := range attrs {
		a[k] = v
		switch n := v.(type) {
		case rschema.SingleNestedAttribute:
			resourceElems(n.Attributes, nil, prefix+k+".", t)
		case rschema.ListNestedAttribute:
			resourceElems(n.NestedObject.Attributes, nil, prefix+k+".", t)
		}
	}
	b := map[string]described{}
	for k, v := range blocks {
		b[k] = v
		switch n := v.(type) {
		case rschema.SingleNestedBlock:
			resourceElems(n.Attributes, n.Blocks, prefix+k+".", t)
		case rschema.ListNestedBlock:
			resourceElems(n.NestedObject.Attributes, n.NestedObject.Blocks, prefix+k+".", t)
		}
	}
	checkDescribed(t, prefix, a, b)
}

func dataElems(attrs map[string]dschema.Attribute, prefix string, t *testing.T) {
	t.Helper()
	a := map[string]described{}
	for k, v := range attrs {
		a[k] = v
		switch n := v.(type) {
		case dschema.SingleNestedAttribute:
			dataElems(n.Attributes, prefix+k+".", t)
		case dschema.ListNestedAttribute:
			dataElems(n.NestedObject.Attributes, prefix+k+".", t)
		}
	}
	checkDescribed(t, prefix, a, nil)
}

// validString runs v on s at attribute x: whether it passed, and else its
// first error's detail.
func validString(v validator.String, s string) (ok bool, msg string) {
	var resp validator.StringResponse
	v.ValidateString(context.Background(), validator.StringRequest{Path: path.Root("x"), ConfigValue: types.StringValue(s)}, &resp)
	if resp.Diagnostics.HasError() {
		return false, resp.Diagnostics.Errors()[0].Detail()
	}
	return true, ""
}

// mustMap is m as a map attribute value.
func mustMap(t *testing.T, m map[string]string) types.Map {
	t.Helper()
	v, d := types.MapValueFrom(context.Background(), types.StringType, m)
	if d.HasError() {
		t.Fatal(d)
	}
	return v
}

// diagsT gives tests an addressable diag.Diagnostics.
type diagsT struct{ d diag.Diagnostics }

// wantErrorsOn checks that the agent's error err about an object of kind
// k is reported on the attributes at paths (and maybe others).
func wantErrorsOn(t *testing.T, err error, k objectKind, paths ...string) {
	t.Helper()
	if err == nil {
		t.Fatal("the API accepted an invalid object")
	}
	var diags diagsT
	addObjectError(&diags.d, err, "unix:///x", "create it", k)
	got := map[string]bool{}
	for _, e := range diags.d.Errors() {
		if wp, ok := e.(interface{ Path() path.Path }); ok {
			got[wp.Path().String()] = true
		}
	}
	for _, want := range paths {
		if !got[want] {
			t.Errorf("no error on %s; got errors on %v (%v)", want, got, diags.d)
		}
	}
}
