package provider

import (
	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// The virtplane_virtual_machine_pool model: what the resource and the data
// source share, and the resource's state.

// poolModel holds what the pool resource and data source share.
type poolModel struct {
	ID             types.String `tfsdk:"id"`
	Name           types.String `tfsdk:"name"`
	Namespace      types.String `tfsdk:"namespace"`
	UID            types.String `tfsdk:"uid"`
	Replicas       types.Int64  `tfsdk:"replicas"`
	Selector       types.Map    `tfsdk:"selector"`
	Paused         types.Bool   `tfsdk:"paused"`
	MaxUnavailable types.String `tfsdk:"max_unavailable"`
	ScaleInOrder   types.String `tfsdk:"scale_in_order"`
	Template       *vmSpecModel `tfsdk:"virtual_machine_template"`
	Status         types.Object `tfsdk:"status"`
}

// poolResourceModel is the resource's state.
type poolResourceModel struct {
	poolModel
	WaitForReady types.Bool     `tfsdk:"wait_for_ready"`
	Timeouts     timeouts.Value `tfsdk:"timeouts"`
}

// poolStatusAttrTypes is the object type of the pool's status.
var poolStatusAttrTypes = replicaStatusAttrTypes("vm_names", map[string]attr.Type{"updated_replicas": types.Int64Type})
