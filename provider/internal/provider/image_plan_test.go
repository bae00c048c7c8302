package provider

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	rschema "github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

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
