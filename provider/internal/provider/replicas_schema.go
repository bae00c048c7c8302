package provider

import (
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/mapplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
)

// What the schemas of virtplane_virtual_machine_pool and
// virtplane_virtual_machine_replica_set share: their identity, replica
// count, selector (defaulted from the template's labels), paused flag,
// wait_for_ready, and the computed status's conditions.

// replicaKindSchema words the shared attributes for one kind.
type replicaKindSchema struct {
	// noun is the kind in descriptions ("pool", "replica set").
	noun string
	// replicas is what the kind keeps ("VMs", "instances").
	replicas string
	// maxName is the longest name the API takes: it must leave room for
	// what the names of the replicas add.
	maxName int
	// nameNote says why.
	nameNote string
	// labels is the attribute the selector defaults to.
	labels path.Path
}

// replicaAttributes are the attributes both kinds have at their root.
func replicaAttributes(k replicaKindSchema) map[string]schema.Attribute {
	return map[string]schema.Attribute{
		"id": schema.StringAttribute{
			Computed:      true,
			Description:   "`namespace/name`, also the import ID.",
			PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
		},
		"name": schema.StringAttribute{
			Required: true,
			Description: fmt.Sprintf("Name of the %s, unique in its namespace: a DNS-1123 label of at most %d "+
				"characters (%s). Changing it replaces the %s.", k.noun, k.maxName, k.nameNote, k.noun),
			Validators:    []validator.String{dnsLabelValidator(), stringvalidator.LengthAtMost(k.maxName)},
			PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
		},
		"namespace": schema.StringAttribute{
			Optional: true,
			Computed: true,
			Default:  stringdefault.StaticString(apiv1.DefaultNamespace),
			Description: fmt.Sprintf("Namespace of the %s and its %s, a DNS-1123 label. Default `default`. "+
				"Changing it replaces the %s.", k.noun, k.replicas, k.noun),
			Validators:    []validator.String{dnsLabelValidator()},
			PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
		},
		"uid": schema.StringAttribute{
			Computed:      true,
			Description:   fmt.Sprintf("Unique ID the agent gave the %s; one re-created under the same name gets a new one.", k.noun),
			PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
		},
		"replicas": schema.Int64Attribute{
			Optional: true,
			Computed: true,
			Default:  int64default.StaticInt64(int64(apiv1.DefaultReplicas)),
			Description: fmt.Sprintf("How many %s to keep, 0 to %d. Default `1`. A scale made outside Terraform "+
				"(`virtplane-agent scale`) shows as a change back.", k.replicas, validation.MaxReplicas),
			Validators: []validator.Int64{int64validator.Between(0, validation.MaxReplicas)},
		},
		"selector": schema.MapAttribute{
			Optional:    true,
			Computed:    true,
			ElementType: types.StringType,
			Description: fmt.Sprintf("Labels that select the %s's %s (match labels); they must be among `%s`. "+
				"Unset: those labels, as they are when the %s is created, kept while the template's labels still "+
				"include them. The API never changes a selector: changing it replaces the %s.",
				k.noun, k.replicas, k.labels, k.noun, k.noun),
			Validators: []validator.Map{labelMapValidator()},
			PlanModifiers: []planmodifier.Map{
				selectorDefault{describedAs: describedAs("defaults to " + k.labels.String()), labels: k.labels},
				mapplanmodifier.RequiresReplace(),
			},
		},
		"paused": schema.BoolAttribute{
			Optional: true,
			Computed: true,
			Default:  booldefault.StaticBool(false),
			Description: fmt.Sprintf("Stops the %s's controller: it makes, changes and removes no %s while paused, "+
				"and apply does not wait for them. Default `false`.", k.noun, k.replicas),
		},
		"wait_for_ready": schema.BoolAttribute{
			Optional: true,
			Computed: true,
			Default:  booldefault.StaticBool(true),
			Description: fmt.Sprintf("Whether create and update wait until the %s has `replicas` %s, ready "+
				"(see the waits above). Default `true`; `false` returns once the %s is stored. Only the "+
				"provider uses this setting.", k.noun, k.replicas, k.noun),
		},
	}
}

// replicaStatusAttributes are the computed status attributes both kinds
// have; names lists the replicas' names, described by namesDesc.
func replicaStatusAttributes(k replicaKindSchema, names, namesDesc string) map[string]schema.Attribute {
	num := func(d string) schema.Int64Attribute { return schema.Int64Attribute{Computed: true, Description: d} }
	str := func(d string) schema.StringAttribute { return schema.StringAttribute{Computed: true, Description: d} }
	return map[string]schema.Attribute{
		"replicas":       num(fmt.Sprintf("%s that exist and are not being deleted.", upperFirst(k.replicas))),
		"ready_replicas": num(fmt.Sprintf("%s that are ready.", upperFirst(k.replicas))),
		"conditions": schema.ListNestedAttribute{
			Computed: true,
			Description: fmt.Sprintf("Conditions of the %s: `ReplicaFailure` (its controller's last step failed; "+
				"the message says why) and `ReplicaPaused`.", k.noun),
			NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
				"type":    str("Condition type."),
				"status":  str("`True`, `False` or `Unknown`."),
				"reason":  str("Machine-readable reason, CamelCase."),
				"message": str("Human-readable explanation."),
			}},
		},
		names: schema.ListAttribute{
			Computed:    true,
			ElementType: types.StringType,
			Description: namesDesc,
		},
	}
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
