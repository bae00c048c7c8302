package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
)

// What plan says about virtplane_storage_class: what changes in place and
// what replaces it is the schema's (RequiresReplace on the kind, the pool
// and the path); here, the computed status is kept when nothing changes.

// ModifyPlan keeps the state's key_set, ready and message when the plan
// changes nothing else: the framework marks them unknown as soon as the
// configuration differs from the state, even where plan modifiers then
// find no difference. When something changes they stay unknown: the
// agent may judge the new settings otherwise.
func (r *storageClassResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() || req.State.Raw.IsNull() {
		return // destroy or create
	}
	keepComputedWhenUnchanged(ctx, req, resp, path.Root("key_set"), path.Root("ready"), path.Root("message"))
}
