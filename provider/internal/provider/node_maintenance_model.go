package provider

import (
	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// The virtplane_node_maintenance model.

type nodeMaintenanceModel struct {
	ID       types.String   `tfsdk:"id"`
	Node     types.String   `tfsdk:"node"`
	Drain    types.Bool     `tfsdk:"drain"`
	Drained  types.Bool     `tfsdk:"drained"`
	Timeouts timeouts.Value `tfsdk:"timeouts"`
}
