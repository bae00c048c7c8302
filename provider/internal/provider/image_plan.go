package provider

import (
	"context"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
)

// What plan says about virtplane_image: a checksum in another case is no
// change.

// sha256KeepState plans the prior value when the configuration spells the
// same checksum in another case (the agent stores it in lower case, which
// is what an import reads), so that the case is never a change, let alone
// a replacement.
func sha256KeepState() planmodifier.String {
	return keepEquivalentState{describedAs: "the same checksum in another case is not a change", equivalent: strings.EqualFold}
}

// ModifyPlan keeps the state's node_status when the plan changes nothing
// else. The framework marks computed attributes unknown as soon as the
// configuration differs from the state, before attribute plan modifiers
// run; when those turn the difference into none (the checksum in another
// case), the unknown node_status alone would make an update.
func (r *imageResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() || req.State.Raw.IsNull() {
		return // destroy or create
	}
	var v attr.Value
	if d := req.State.GetAttribute(ctx, path.Root("node_status"), &v); d.HasError() {
		return
	}
	keep := resp.Plan
	if d := keep.SetAttribute(ctx, path.Root("node_status"), v); d.HasError() {
		return
	}
	if keep.Raw.Equal(req.State.Raw) {
		resp.Plan = keep
	}
}
