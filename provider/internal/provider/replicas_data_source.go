package provider

import (
	"maps"

	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// What the data sources virtplane_virtual_machine_pool and
// virtplane_virtual_machine_replica_set share.

// dataReplicaAttributes are the attributes both data sources have at their
// root, but the template and status.
func dataReplicaAttributes(noun, replicas string) map[string]schema.Attribute {
	str := func(desc string) schema.StringAttribute {
		return schema.StringAttribute{Computed: true, Description: desc}
	}
	return map[string]schema.Attribute{
		"id": str("`namespace/name`."),
		"name": schema.StringAttribute{
			Required:    true,
			Description: "Name of the " + noun + ".",
			Validators:  []validator.String{dnsLabelValidator()},
		},
		"namespace": schema.StringAttribute{
			Optional:    true,
			Computed:    true,
			Description: "Namespace of the " + noun + ". Default `default`.",
			Validators:  []validator.String{dnsLabelValidator()},
		},
		"uid":      str("Unique ID the agent gave the " + noun + "."),
		"replicas": schema.Int64Attribute{Computed: true, Description: "How many " + replicas + " the " + noun + " keeps."},
		"selector": schema.MapAttribute{
			Computed: true, ElementType: types.StringType,
			Description: "Labels that select the " + noun + "'s " + replicas + ".",
		},
		"paused": schema.BoolAttribute{Computed: true, Description: "Whether the " + noun + "'s controller is paused."},
	}
}

// dataReplicaStatusAttributes is replicaStatusAttributes for data sources.
func dataReplicaStatusAttributes(replicas, names, namesDesc string, more map[string]schema.Attribute) map[string]schema.Attribute {
	str := func(d string) schema.StringAttribute { return schema.StringAttribute{Computed: true, Description: d} }
	out := map[string]schema.Attribute{
		"replicas":       schema.Int64Attribute{Computed: true, Description: upperFirst(replicas) + " that exist and are not being deleted."},
		"ready_replicas": schema.Int64Attribute{Computed: true, Description: upperFirst(replicas) + " that are ready."},
		"conditions": schema.ListNestedAttribute{
			Computed:    true,
			Description: "Conditions: `ReplicaFailure` and `ReplicaPaused`.",
			NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
				"type":    str("Condition type."),
				"status":  str("`True`, `False` or `Unknown`."),
				"reason":  str("Machine-readable reason."),
				"message": str("Human-readable explanation."),
			}},
		},
		names: schema.ListAttribute{Computed: true, ElementType: types.StringType, Description: namesDesc},
	}
	maps.Copy(out, more)
	return out
}
