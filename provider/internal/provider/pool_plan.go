package provider

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
)

// What plan says about virtplane_virtual_machine_pool: that a template
// change restarts the VMs, and that it may not shrink a persistent disk,
// change its image or move it to another storage class
// (template_plan_volumes.go), which the agent refuses too.

// ModifyPlan keeps the status of a plan that changes nothing, and warns
// at plan time that a template change restarts the VMs.
func (r *poolResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	plan, state, changed := r.templateChange(ctx, req, resp, "virtual_machine_template", func(p *apiv1.VirtualMachinePool) proto.Message {
		validation.DefaultPool(p)
		return p.Spec.VirtualMachineTemplate
	})
	if !changed {
		return
	}
	if state.Template != nil && plan.Template != nil && refuseVolumeUpdates(ctx, &resp.Diagnostics,
		&state.Template.instanceSpecModel, &plan.Template.instanceSpecModel, path.Root("virtual_machine_template")) {
		return
	}
	id := apiv1.Ref(state.Namespace.ValueString(), state.Name.ValueString())
	resp.Diagnostics.AddWarning("Apply rolls a new template out to pool "+id,
		fmt.Sprintf("virtual_machine_template changes, so every VM of %s gets the new template and each running "+
			"VM restarts on it, at most max_unavailable (%s) at a time; apply waits until all have. Persistent "+
			"volumes are kept.", id, plan.MaxUnavailable.ValueString()))
}
