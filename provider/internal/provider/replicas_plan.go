package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"google.golang.org/protobuf/proto"
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

// templateChange is what the ModifyPlan of a pool and of a replica set
// share. For a plan that updates the object it keeps the status of a plan
// that changes nothing, and reports whether the template changes (the
// attribute tmpl; template is its API message after the API's
// defaulting, as the controller compares it), with the plan and state,
// so that the kind can say what the change does to its replicas.
func (r *replicaResource[T, V, M]) templateChange(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse,
	tmpl string, template func(T) proto.Message) (plan, state M, changed bool) {
	if req.Plan.Raw.IsNull() || req.State.Raw.IsNull() {
		return // destroy or create
	}
	if keepComputedWhenUnchanged(ctx, req, resp, path.Root("status")) {
		return
	}
	if !knownAt(req.Plan.Raw, tmpl) {
		return // apply decides
	}
	if d := req.Plan.Get(ctx, &plan); d.HasError() {
		return
	}
	if d := req.State.Get(ctx, &state); d.HasError() {
		return
	}
	from, d1 := r.ops.fromModel(ctx, &state)
	to, d2 := r.ops.fromModel(ctx, &plan)
	if d1.HasError() || d2.HasError() {
		return
	}
	changed = !proto.Equal(template(from), template(to))
	return
}
