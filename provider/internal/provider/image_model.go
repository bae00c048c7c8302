package provider

import (
	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// The virtplane_image model: what the resource and the data source share,
// and the resource's provider-only settings.

// imageResourceModel is the resource's state.
type imageResourceModel struct {
	imageModel
	WaitForNodes types.Bool     `tfsdk:"wait_for_nodes"`
	Timeouts     timeouts.Value `tfsdk:"timeouts"`
}

// imageModel holds what the virtplane_image resource and data source
// share; the resource adds its provider-only settings.
type imageModel struct {
	ID         types.String  `tfsdk:"id"`
	Name       types.String  `tfsdk:"name"`
	URL        types.String  `tfsdk:"url"`
	SHA256     types.String  `tfsdk:"sha256"`
	Format     types.String  `tfsdk:"format"`
	Nodes      types.String  `tfsdk:"nodes"`
	MaxSize    quantityValue `tfsdk:"max_size"`
	Labels     types.Map     `tfsdk:"labels"`
	UID        types.String  `tfsdk:"uid"`
	NodeStatus types.List    `tfsdk:"node_status"`
}

// imageNodeStatusAttrTypes is the object type of one node_status entry.
var imageNodeStatusAttrTypes = map[string]attr.Type{
	"node":               types.StringType,
	"phase":              types.StringType,
	"sha256":             types.StringType,
	"format":             types.StringType,
	"virtual_size_bytes": types.Int64Type,
	"size_bytes":         types.Int64Type,
	"bytes_done":         types.Int64Type,
	"bytes_total":        types.Int64Type,
	"message":            types.StringType,
}

var imageNodeStatusType = types.ObjectType{AttrTypes: imageNodeStatusAttrTypes}
