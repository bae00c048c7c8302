package provider

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"google.golang.org/protobuf/proto"

	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
)

// What plan says about virtplane_virtual_machine_pool: that a template
// change restarts the VMs.

// ModifyPlan keeps the status of a plan that changes nothing, and warns
// at plan time that a template change restarts the VMs.
func (r *poolResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() || req.State.Raw.IsNull() {
		return // destroy or create
	}
	if keepComputedWhenUnchanged(ctx, req, resp, path.Root("status")) {
		return
	}
	if !knownAt(req.Plan.Raw, "virtual_machine_template") {
		return // apply decides
	}
	var plan, state poolResourceModel
	if d := req.Plan.Get(ctx, &plan); d.HasError() {
		return
	}
	if d := req.State.Get(ctx, &state); d.HasError() {
		return
	}
	from, d1 := poolFromModel(ctx, &state.poolModel)
	to, d2 := poolFromModel(ctx, &plan.poolModel)
	if d1.HasError() || d2.HasError() {
		return
	}
	validation.DefaultPool(from)
	validation.DefaultPool(to)
	if proto.Equal(from.Spec.VirtualMachineTemplate, to.Spec.VirtualMachineTemplate) {
		return
	}
	id := namespacedID(state.Namespace.ValueString(), state.Name.ValueString())
	resp.Diagnostics.AddWarning("Apply rolls a new template out to pool "+id,
		fmt.Sprintf("virtual_machine_template changes, so every VM of %s gets the new template and each running "+
			"VM restarts on it, at most max_unavailable (%s) at a time; apply waits until all have. Persistent "+
			"volumes are kept.", id, plan.MaxUnavailable.ValueString()))
}
