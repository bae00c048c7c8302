package provider

import (
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// The conditions of an object's status, as the computed status attributes
// of the VM, pool and replica set resources and data sources list them.

// conditionAttrTypes is the object type of one condition.
var conditionAttrTypes = map[string]attr.Type{
	"type":    types.StringType,
	"status":  types.StringType,
	"reason":  types.StringType,
	"message": types.StringType,
}

// conditionList is a list of conditions as the status attributes have it.
func conditionList(conds []*apiv1.Condition, diags *diag.Diagnostics) types.List {
	elems := make([]attr.Value, 0, len(conds))
	for _, c := range conds {
		obj, d := types.ObjectValue(conditionAttrTypes, map[string]attr.Value{
			"type":    types.StringValue(c.GetType()),
			"status":  types.StringValue(c.GetStatus()),
			"reason":  types.StringValue(c.GetReason()),
			"message": types.StringValue(c.GetMessage()),
		})
		diags.Append(d...)
		elems = append(elems, obj)
	}
	list, d := types.ListValue(types.ObjectType{AttrTypes: conditionAttrTypes}, elems)
	diags.Append(d...)
	return list
}
