package provider

import (
	"context"
	"testing"

	rschema "github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// The selector defaults to the template's labels when the object is made,
// and is kept while the labels include it (adding a label replaces
// nothing); once they do not, the labels are planned (and the object
// replaced).
func TestSelectorDefault(t *testing.T) {
	ctx := context.Background()
	sch := documentedResource(t, NewPoolResource())
	labelsPath := poolKindSchema.labels
	plan := func(labels map[string]string) tfsdk.Plan {
		p := tfsdk.Plan{Schema: sch, Raw: emptyValue(t, sch)}
		v := types.MapNull(types.StringType)
		if labels != nil {
			v = mustMap(t, labels)
		}
		if d := p.SetAttribute(ctx, labelsPath, v); d.HasError() {
			t.Fatal(d)
		}
		return p
	}
	null := types.MapNull(types.StringType)
	for _, c := range []struct {
		name          string
		config, state types.Map
		labels        map[string]string
		want          string
	}{
		{"create", null, null, map[string]string{"app": "db"}, `{"app":"db"}`},
		{"label added", null, mustMap(t, map[string]string{"app": "db"}), map[string]string{"app": "db", "tier": "x"}, `{"app":"db"}`},
		{"label changed", null, mustMap(t, map[string]string{"app": "db"}), map[string]string{"app": "web"}, `{"app":"web"}`},
		{"set", mustMap(t, map[string]string{"app": "x"}), null, map[string]string{"app": "db"}, `{"app":"x"}`},
		{"no labels", null, null, nil, "<unknown>"},
	} {
		req := planmodifier.MapRequest{ConfigValue: c.config, StateValue: c.state, Plan: plan(c.labels),
			PlanValue: types.MapUnknown(types.StringType)}
		if !c.config.IsNull() {
			req.PlanValue = c.config
		}
		resp := planmodifier.MapResponse{PlanValue: req.PlanValue}
		selectorDefault{labels: labelsPath}.PlanModifyMap(ctx, req, &resp)
		if got := resp.PlanValue.String(); got != c.want {
			t.Errorf("%s: planned %s, want %s", c.name, got, c.want)
		}
	}
}

// emptyValue is an object of s's type with every attribute null.
func emptyValue(t *testing.T, s rschema.Schema) tftypes.Value {
	t.Helper()
	typ := s.Type().TerraformType(context.Background())
	obj, ok := typ.(tftypes.Object)
	if !ok {
		t.Fatalf("schema type %T", typ)
	}
	vals := map[string]tftypes.Value{}
	for k, at := range obj.AttributeTypes {
		vals[k] = tftypes.NewValue(at, nil)
	}
	return tftypes.NewValue(typ, vals)
}
