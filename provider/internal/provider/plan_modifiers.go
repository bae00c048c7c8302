package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
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
