package provider

import (
	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// The virtplane_virtual_machine_snapshot model: what the resource and the
// data source share, and the resource's state.

// snapshotModel is what the resource and the data source share.
type snapshotModel struct {
	ID              types.String `tfsdk:"id"`
	Namespace       types.String `tfsdk:"namespace"`
	Name            types.String `tfsdk:"name"`
	VirtualMachine  types.String `tfsdk:"virtual_machine"`
	DeletionPolicy  types.String `tfsdk:"deletion_policy"`
	FailureDeadline types.String `tfsdk:"failure_deadline"`
	UID             types.String `tfsdk:"uid"`
	Phase           types.String `tfsdk:"phase"`
	ReadyToUse      types.Bool   `tfsdk:"ready_to_use"`
	CreationTime    types.String `tfsdk:"creation_time"`
	Indications     types.List   `tfsdk:"indications"`
	IncludedVolumes types.List   `tfsdk:"included_volumes"`
	ExcludedVolumes types.List   `tfsdk:"excluded_volumes"`
	NodeName        types.String `tfsdk:"node_name"`
	ContentName     types.String `tfsdk:"content_name"`
}

type snapshotResourceModel struct {
	snapshotModel
	Timeouts timeouts.Value `tfsdk:"timeouts"`
}
