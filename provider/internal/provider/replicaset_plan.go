package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"google.golang.org/protobuf/proto"

	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
)

// What plan says about virtplane_virtual_machine_replica_set: that a
// template change leaves the running instances alone.

// ModifyPlan keeps the status of a plan that changes nothing, and warns
// at plan time that a template change leaves the running instances alone.
func (r *replicaSetResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() || req.State.Raw.IsNull() {
		return // destroy or create
	}
	if keepComputedWhenUnchanged(ctx, req, resp, path.Root("status")) {
		return
	}
	if !knownAt(req.Plan.Raw, "template") {
		return
	}
	var plan, state replicaSetResourceModel
	if d := req.Plan.Get(ctx, &plan); d.HasError() {
		return
	}
	if d := req.State.Get(ctx, &state); d.HasError() {
		return
	}
	from, d1 := replicaSetFromModel(ctx, &state.replicaSetModel)
	to, d2 := replicaSetFromModel(ctx, &plan.replicaSetModel)
	if d1.HasError() || d2.HasError() {
		return
	}
	validation.DefaultReplicaSet(from)
	validation.DefaultReplicaSet(to)
	if proto.Equal(from.Spec.Template, to.Spec.Template) {
		return
	}
	id := namespacedID(state.Namespace.ValueString(), state.Name.ValueString())
	resp.Diagnostics.AddWarning("Running instances of "+id+" keep their template",
		"template changes, which applies to the instances replica set "+id+" makes from now on; the instances "+
			"that run keep the template they were made from (KubeVirt's behaviour). To replace them, scale to 0 "+
			"and back, or delete them (virtplane-agent delete vmi).")
}
