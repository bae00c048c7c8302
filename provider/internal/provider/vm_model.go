package provider

import (
	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// The virtplane_virtual_machine model: what the resource and the data
// source share, the resource's provider-only settings, and the object
// types of the computed status. What a VM is made from is the template's
// (template_model.go).

// Values of the provider-only update_policy attribute.
const (
	updatePolicyRestart = "restart"
	updatePolicyNone    = "none"
)

// Provider-side defaults; the API's own are apiv1's Default* constants.
const (
	defaultUpdatePolicy = updatePolicyRestart
)

// Allowed values, in the order the documentation lists them.
var (
	updatePolicies = []string{updatePolicyRestart, updatePolicyNone}
)

// vmModel holds what the virtplane_virtual_machine resource and data source
// share; the resource adds its provider-only settings.
type vmModel struct {
	ID        types.String `tfsdk:"id"`
	Name      types.String `tfsdk:"name"`
	Namespace types.String `tfsdk:"namespace"`
	UID       types.String `tfsdk:"uid"`
	vmSpecModel
	RestartRequired types.Bool   `tfsdk:"restart_required"`
	Status          types.Object `tfsdk:"status"`
}

// vmResourceModel is the resource's state.
type vmResourceModel struct {
	vmModel
	SourceSnapshot types.String    `tfsdk:"source_snapshot"`
	UpdatePolicy   types.String    `tfsdk:"update_policy"`
	WaitForIP      *waitForIPModel `tfsdk:"wait_for_ip"`
	Timeouts       timeouts.Value  `tfsdk:"timeouts"`
}

// waitForIPModel is the provider-only wait_for_ip block.
type waitForIPModel struct {
	Timeout   types.String `tfsdk:"timeout"`
	Interface types.String `tfsdk:"interface"`
}

// Object types of the computed status attribute.
var (
	interfaceStatusAttrTypes = map[string]attr.Type{
		"name":           types.StringType,
		"mac_address":    types.StringType,
		"ip_address":     types.StringType,
		"ip_addresses":   types.ListType{ElemType: types.StringType},
		"source":         types.StringType,
		"info":           types.StringType,
		"interface_name": types.StringType,
	}
	statusAttrTypes = map[string]attr.Type{
		"printable_status": types.StringType,
		"phase":            types.StringType,
		"ready":            types.BoolType,
		"node":             types.StringType,
		"conditions":       types.ListType{ElemType: types.ObjectType{AttrTypes: conditionAttrTypes}},
		"interfaces":       types.ListType{ElemType: types.ObjectType{AttrTypes: interfaceStatusAttrTypes}},
	}
)
