package provider

import (
	"context"
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// What plan says about virtplane_virtual_machine: what apply will do to a
// running guest (vm_plan_restart.go decides), when source_snapshot
// replaces the VM, and that a persistent disk cannot shrink, change its
// image or move to another storage class (template_plan_volumes.go).

// ModifyPlan says at plan time what apply will do to a running guest, and
// plans the restart that update_policy = "restart" owes a VM whose
// restart_required is still true.
func (r *vmResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() || req.State.Raw.IsNull() {
		return // destroy or create
	}
	if keepComputedWhenUnchanged(ctx, req, resp, path.Root("status"), path.Root("restart_required")) {
		return
	}
	var plan, state vmResourceModel
	// Plans with unknown blocks (dynamic blocks over unknown values) cannot
	// be judged yet; apply still does the right thing.
	if d := req.Plan.Get(ctx, &plan); d.HasError() {
		return
	}
	if d := req.State.Get(ctx, &state); d.HasError() {
		return
	}
	if refuseVolumeUpdates(ctx, &resp.Diagnostics, &state.instanceSpecModel, &plan.instanceSpecModel, path.Empty()) {
		return
	}
	id := apiv1.Ref(state.Namespace.ValueString(), state.Name.ValueString())
	changed, live := restartChanges(ctx, &state.vmModel, &plan.vmModel)
	d := decideRestart(plan.RunStrategy.ValueString(), plan.UpdatePolicy.ValueString(),
		instanceActive(state.Status), len(changed) > 0 || state.RestartRequired.ValueBool())

	if what := strings.Join(changed, ", "); what != "" {
		switch d.action {
		case restartNow:
			resp.Diagnostics.AddWarning("Apply restarts virtual machine "+id,
				fmt.Sprintf("Changing %s takes effect only when the guest restarts, so apply restarts %s (update_policy = \"restart\") "+
					"and waits for the new instance. The guest gets termination_grace_period seconds to shut down. "+
					"Set update_policy = \"none\" to apply the change at the next restart instead.", what, id))
		case restartDeferred:
			resp.Diagnostics.AddWarning("Change to "+id+" waits for a restart",
				fmt.Sprintf("Changing %s takes effect only when the guest restarts; %s keeps running with the old settings "+
					"(%s) and restart_required becomes true.", what, id, d.why))
		}
	}

	if plugged, unplugged := live.Added, live.Removed; instanceActive(state.Status) && len(plugged)+len(unplugged) > 0 {
		var what []string
		if len(plugged) > 0 {
			what = append(what, "plugs disk "+strings.Join(plugged, ", ")+" into")
		}
		if len(unplugged) > 0 {
			what = append(what, "unplugs disk "+strings.Join(unplugged, ", ")+" from")
		}
		resp.Diagnostics.AddWarning("Apply changes the disks of running virtual machine "+id+" in place",
			fmt.Sprintf("Apply %s the running guest without a restart (hotpluggable disks); the instance's volume "+
				"status shows each one Ready once plugged. An unplugged disk's volume is kept until the VM is deleted.",
				strings.Join(what, " and ")))
	}

	if d.action == restartNow && state.RestartRequired.ValueBool() {
		resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("restart_required"), false)...)
		if len(changed) == 0 {
			resp.Diagnostics.AddWarning("Apply restarts virtual machine "+id,
				id+" runs with settings older than its configuration (restart_required is true) and update_policy is \"restart\", so apply restarts it.")
		}
	}
}

// instanceActive reports whether a status says the VM has an instance that
// has not ended.
func instanceActive(st types.Object) bool {
	if st.IsNull() || st.IsUnknown() {
		return false
	}
	phase, ok := st.Attributes()["phase"].(types.String)
	if !ok || phase.IsNull() || phase.IsUnknown() {
		return false
	}
	return !apiv1.IsFinal(phase.ValueString())
}

// sourceSnapshotReplace replaces the VM when source_snapshot changes from
// one snapshot to another: its volumes would have to start over. Setting
// it where the state has none (a VM created without it, or imported) or
// removing it changes nothing on the VM, and is only recorded.
func sourceSnapshotReplace() planmodifier.String {
	return stringplanmodifier.RequiresReplaceIf(
		func(_ context.Context, req planmodifier.StringRequest, resp *stringplanmodifier.RequiresReplaceIfFuncResponse) {
			resp.RequiresReplace = !req.StateValue.IsNull() && !req.PlanValue.IsNull()
		},
		"Changing to another snapshot replaces the VM; setting or removing it does not.",
		"Changing to another snapshot replaces the VM; setting or removing it does not.")
}
