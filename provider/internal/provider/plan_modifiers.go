package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// Plan modifiers and plan-time helpers more than one kind uses.

// keepEquivalentState plans the prior state's value when the configuration
// says the same in another spelling (equivalent decides), so that the
// spelling is never a change. Terraform accepts a planned value equal to
// the prior state in place of an equivalent configuration value.
type keepEquivalentState struct {
	describedAs
	equivalent func(config, state string) bool
}

var _ planmodifier.String = keepEquivalentState{}

func (m keepEquivalentState) PlanModifyString(_ context.Context, req planmodifier.StringRequest, resp *planmodifier.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() || req.StateValue.IsNull() || req.StateValue.IsUnknown() {
		return
	}
	if m.equivalent(req.ConfigValue.ValueString(), req.StateValue.ValueString()) {
		resp.PlanValue = req.StateValue
	}
}

// keepComputedWhenUnchanged plans the state's values of the computed
// attributes at paths when nothing else changes, and reports whether it
// did. The framework marks computed attributes unknown as soon as the
// configuration differs from the state, before attribute plan modifiers
// run. When those turn the difference into none (a memory spelled "0.5Gi"
// instead of "512Mi"), the unknowns alone would make an update: a
// resource's ModifyPlan keeps the state's values instead.
func keepComputedWhenUnchanged(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse, paths ...path.Path) bool {
	keep := resp.Plan
	for _, p := range paths {
		var v attr.Value
		if d := req.State.GetAttribute(ctx, p, &v); d.HasError() {
			return false
		}
		if d := keep.SetAttribute(ctx, p, v); d.HasError() {
			return false
		}
	}
	if !keep.Raw.Equal(req.State.Raw) {
		return false
	}
	resp.Plan = keep
	return true
}

// knownAt reports whether the value of the root attribute name is known
// throughout.
func knownAt(v tftypes.Value, name string) bool {
	at, _, err := tftypes.WalkAttributePath(v, tftypes.NewAttributePath().WithAttributeName(name))
	if err != nil {
		return false
	}
	tv, ok := at.(tftypes.Value)
	return ok && tv.IsFullyKnown()
}
