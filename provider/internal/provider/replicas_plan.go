package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// What plan says of the attributes the pool and the replica set share:
// the selector's default.

// selectorDefault plans a selector left out of the configuration: the
// state's while it still selects the template's labels (the API keeps a
// selector for the object's life, so a label added to the template is no
// reason to replace it), else the template's labels, which replaces the
// object when it exists (RequiresReplace follows).
type selectorDefault struct {
	describedAs
	labels path.Path
}

var _ planmodifier.Map = selectorDefault{}

func (m selectorDefault) PlanModifyMap(ctx context.Context, req planmodifier.MapRequest, resp *planmodifier.MapResponse) {
	if !req.ConfigValue.IsNull() || req.Plan.Raw.IsNull() {
		return
	}
	var labels types.Map
	if d := req.Plan.GetAttribute(ctx, m.labels, &labels); d.HasError() || labels.IsUnknown() {
		return
	}
	if !req.StateValue.IsNull() && !req.StateValue.IsUnknown() && selects(req.StateValue, labels) {
		resp.PlanValue = req.StateValue
		return
	}
	if labels.IsNull() || len(labels.Elements()) == 0 {
		return // ValidateConfig reports it
	}
	resp.PlanValue = labels
}

// selects reports whether every pair of selector is among labels (and
// the selector has at least one), as the API's LabelSelector.Matches.
func selects(selector, labels types.Map) bool {
	sel := selector.Elements()
	if len(sel) == 0 {
		return false
	}
	have := labels.Elements()
	for k, v := range sel {
		if got, ok := have[k]; !ok || !got.Equal(v) {
			return false
		}
	}
	return true
}
