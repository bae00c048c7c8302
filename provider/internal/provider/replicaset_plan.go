package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/resource"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
)

// What plan says about virtplane_virtual_machine_replica_set: that a
// template change leaves the running instances alone.

// ModifyPlan keeps the status of a plan that changes nothing, and warns
// at plan time that a template change leaves the running instances alone.
func (r *replicaSetResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	_, state, changed := r.templateChange(ctx, req, resp, "template", func(rs *apiv1.VirtualMachineInstanceReplicaSet) proto.Message {
		validation.DefaultReplicaSet(rs)
		return rs.Spec.Template
	})
	if !changed {
		return
	}
	id := apiv1.Ref(state.Namespace.ValueString(), state.Name.ValueString())
	resp.Diagnostics.AddWarning("Running instances of "+id+" keep their template",
		"template changes, which applies to the instances replica set "+id+" makes from now on; the instances "+
			"that run keep the template they were made from (KubeVirt's behaviour). To replace them, scale to 0 "+
			"and back, or delete them (virtplane-agent delete vmi).")
}
