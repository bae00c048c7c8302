package provider

import (
	"maps"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// The object types the pool and replica set models share.

// replicaStatusAttrTypes are the object types of the status attributes,
// with the names list under names.
func replicaStatusAttrTypes(names string, more map[string]attr.Type) map[string]attr.Type {
	out := map[string]attr.Type{
		"replicas":       types.Int64Type,
		"ready_replicas": types.Int64Type,
		"conditions":     types.ListType{ElemType: types.ObjectType{AttrTypes: conditionAttrTypes}},
		names:            types.ListType{ElemType: types.StringType},
	}
	maps.Copy(out, more)
	return out
}
