package provider

import (
	"context"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// The virtplane_node_maintenance resource: a node cordoned, or drained,
// while the resource exists, so that a maintenance window is code. The
// node's cordon (spec.unschedulable) and drain (spec.drain) are the
// resource's whole state: uncordoned outside Terraform, the resource is
// gone and the next apply cordons (or drains) the node again. Its parts
// are in node_maintenance_*.go, as the package doc says; its model, short,
// is here.

var (
	_ resource.Resource                = (*nodeMaintenanceResource)(nil)
	_ resource.ResourceWithConfigure   = (*nodeMaintenanceResource)(nil)
	_ resource.ResourceWithImportState = (*nodeMaintenanceResource)(nil)
)

// NewNodeMaintenanceResource returns the virtplane_node_maintenance resource.
func NewNodeMaintenanceResource() resource.Resource {
	return &nodeMaintenanceResource{configuredResource{kind: nodeMaintenanceKind}}
}

type nodeMaintenanceResource struct {
	configuredResource
}

func (r *nodeMaintenanceResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_node_maintenance"
}

// ImportState adopts the cordon (and drain) of a node; Read drops it again
// when the node is not cordoned.
func (r *nodeMaintenanceResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	importNode(ctx, req, resp, "a node maintenance")
}

// defaultDrainTimeout is create's time limit when timeouts.create is unset:
// long enough for a few live migrations one after another.
const defaultDrainTimeout = 20 * time.Minute

// The virtplane_node_maintenance model.

type nodeMaintenanceModel struct {
	ID       types.String   `tfsdk:"id"`
	Node     types.String   `tfsdk:"node"`
	Drain    types.Bool     `tfsdk:"drain"`
	Drained  types.Bool     `tfsdk:"drained"`
	Timeouts timeouts.Value `tfsdk:"timeouts"`
}
