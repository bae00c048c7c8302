package provider

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	rschema "github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

func TestImageSchemasDocumentEveryAttribute(t *testing.T) {
	rs := documentedResource(t, NewImageResource())
	ds := documentedDataSource(t, NewImageDataSource())
	mirrorsResource(t, rs, ds, "wait_for_nodes")
}

func TestImageValidators(t *testing.T) {
	for _, c := range []struct {
		v    validator.String
		in   string
		want bool
		says string
	}{
		{imageNameValidator(), "debian-12.qcow2", true, ""},
		{imageNameValidator(), "ubuntu.24.04.img", true, ""},
		{imageNameValidator(), "Debian.qcow2", false, "lower case"},
		{imageNameValidator(), "debian/12.qcow2", false, ""},
		{imageNameValidator(), "", false, ""},
		{imageURLValidator(), "https://images.example/debian.qcow2", true, ""},
		{imageURLValidator(), "http://10.0.0.1:8080/a.raw", true, ""},
		{imageURLValidator(), "file:///srv/images/a.qcow2", true, ""},
		{imageURLValidator(), "ftp://images.example/a.qcow2", false, "ftp"},
		{imageURLValidator(), "https://user:secret@images.example/a.qcow2", false, "credentials"},
		{imageURLValidator(), "file:///srv/../a.qcow2", false, "clean"},
		{imageURLValidator(), "https:///a.qcow2", false, "host"},
		{sha256Validator(), testSum, true, ""},
		{sha256Validator(), testSumUpper, true, ""},
		{sha256Validator(), " " + testSum, false, "64 hex digits"},
		{sha256Validator(), testSum[:63], false, "63 characters"},
		{sha256Validator(), strings.Repeat("g", 64), false, "64 hex digits"},
	} {
		ok, msg := validString(c.v, c.in)
		if ok != c.want || !strings.Contains(msg, c.says) {
			t.Errorf("%q (%s) = %v %q, want %v saying %q", c.in, c.v.Description(context.Background()), ok, msg, c.want, c.says)
		}
		if strings.Contains(msg, "secret") {
			t.Errorf("%q (%s): the message repeats the password: %s", c.in, c.v.Description(context.Background()), msg)
		}
	}
}

func TestFormatContradiction(t *testing.T) {
	for _, c := range []struct {
		name, format string
		bad          bool
	}{
		{"debian.qcow2", "qcow2", false},
		{"debian.qcow2", "raw", true},
		{"disk.raw", "qcow2", true},
		{"debian.img", "raw", false},
		{"debian.img", "qcow2", false},
		{"debian.qcow2", "vmdk", false}, // the format's own validator says so
	} {
		got := formatContradiction(c.name, c.format)
		if (got != "") != c.bad {
			t.Errorf("formatContradiction(%q, %q) = %q, want contradiction %v", c.name, c.format, got, c.bad)
		}
		if c.bad && !strings.Contains(got, "extension") {
			t.Errorf("formatContradiction(%q, %q) = %q does not name the extension", c.name, c.format, got)
		}
	}
}

// A checksum written in another case is the same checksum: the plan keeps
// the state's spelling, so there is no change, let alone a replacement.
func TestSHA256CaseIsNoChange(t *testing.T) {
	ctx := context.Background()
	var rs resource.SchemaResponse
	NewImageResource().Schema(ctx, resource.SchemaRequest{}, &rs)
	mods := rs.Schema.Attributes["sha256"].(rschema.StringAttribute).PlanModifiers
	for _, c := range []struct {
		state, config types.String
		plan          types.String
		replace       bool
	}{
		{types.StringValue(testSum), types.StringValue(testSumUpper), types.StringValue(testSum), false},
		{types.StringValue(testSumUpper), types.StringValue(testSum), types.StringValue(testSumUpper), false},
		{types.StringValue(testSum), types.StringValue(strings.Repeat("0", 64)), types.StringValue(strings.Repeat("0", 64)), true},
		{types.StringNull(), types.StringValue(testSum), types.StringValue(testSum), true},
		{types.StringValue(testSum), types.StringNull(), types.StringNull(), true},
	} {
		// The framework hands each modifier the plan the previous one made.
		resp := planmodifier.StringResponse{PlanValue: c.config}
		for _, m := range mods {
			req := planmodifier.StringRequest{
				Path: path.Root("sha256"), StateValue: c.state, PlanValue: resp.PlanValue, ConfigValue: c.config,
				State: nonNullState(t), Plan: nonNullPlan(t),
			}
			m.PlanModifyString(ctx, req, &resp)
		}
		if !resp.PlanValue.Equal(c.plan) || resp.RequiresReplace != c.replace {
			t.Errorf("%s -> %s: plan %s replace %v, want %s replace %v", c.state, c.config, resp.PlanValue, resp.RequiresReplace, c.plan, c.replace)
		}
	}
}

// emptyObject is the resource's schema type with every attribute null: a
// state or plan that exists (an update, not a create or destroy).
func emptyObject(t *testing.T) (resource.SchemaResponse, tftypes.Value) {
	t.Helper()
	ctx := context.Background()
	var rs resource.SchemaResponse
	NewImageResource().Schema(ctx, resource.SchemaRequest{}, &rs)
	typ := rs.Schema.Type().TerraformType(ctx).(tftypes.Object)
	vals := map[string]tftypes.Value{}
	for name, at := range typ.AttributeTypes {
		vals[name] = tftypes.NewValue(at, nil)
	}
	return rs, tftypes.NewValue(typ, vals)
}

func nonNullState(t *testing.T) tfsdk.State {
	rs, v := emptyObject(t)
	return tfsdk.State{Schema: rs.Schema, Raw: v}
}

func nonNullPlan(t *testing.T) tfsdk.Plan {
	rs, v := emptyObject(t)
	return tfsdk.Plan{Schema: rs.Schema, Raw: v}
}
