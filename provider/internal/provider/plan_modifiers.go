package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

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

// macFromState plans an interface's MAC address, when the configuration
// leaves it out, as the one the interface of the same name has in the
// prior state: the server assigns a MAC once per VM interface and keeps
// it, so a known plan is exact, and it follows the interface by name, not
// by list position. A new interface's MAC stays unknown until apply.
type macFromState struct{ describedAs }

var _ planmodifier.String = macFromState{}

func (macFromState) PlanModifyString(ctx context.Context, req planmodifier.StringRequest, resp *planmodifier.StringResponse) {
	if !req.ConfigValue.IsNull() || req.State.Raw.IsNull() {
		return
	}
	var name types.String
	if d := req.Plan.GetAttribute(ctx, req.Path.ParentPath().AtName("name"), &name); d.HasError() || name.IsUnknown() {
		return
	}
	var prior []interfaceModel
	if d := req.State.GetAttribute(ctx, path.Root("interface"), &prior); d.HasError() {
		return
	}
	for _, i := range prior {
		if i.Name.Equal(name) && !i.MACAddress.IsNull() && !i.MACAddress.IsUnknown() {
			resp.PlanValue = i.MACAddress
			return
		}
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
