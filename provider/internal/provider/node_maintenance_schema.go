package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/boolplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
)

// The schema of the virtplane_node_maintenance resource. Its descriptions
// are the documentation (tfplugindocs renders them into docs/).

func (r *nodeMaintenanceResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "A maintenance window on a node: the node is cordoned while this resource exists " +
			"(`virtplane-agent node cordon`), so no new VM instance is placed there and no migration targets " +
			"it. The instances running there stay, unless `drain = true`: then every instance leaves the node " +
			"as its VM's `eviction_strategy` says, and create waits until none is left. Destroying the resource " +
			"uncordons the node, which also cancels a drain that has not finished. A node uncordoned outside " +
			"Terraform, or whose drain was canceled, shows as a change: the next apply cordons (or drains) it " +
			"again. `virtplane_nodes` shows the cordon as `unschedulable` and the drain as `draining` and `drained`.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				Computed:            true,
				MarkdownDescription: "The node's name, also the import ID.",
				PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"node": schema.StringAttribute{
				Required: true,
				MarkdownDescription: "Name of the node to cordon, as `virtplane_nodes` lists it. Changing it " +
					"uncordons the old node and cordons the new one.",
				Validators:    []validator.String{stringvalidator.LengthAtLeast(1)},
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
			},
			"drain": schema.BoolAttribute{
				Optional: true,
				Computed: true,
				Default:  booldefault.StaticBool(false),
				MarkdownDescription: "Also drain the node: move every instance off it by its VM's " +
					"`eviction_strategy` (live migration, or a shutdown after which `run_strategy` decides whether " +
					"the VM starts elsewhere), and wait until none is left, at most `timeouts.create`. An instance that " +
					"cannot leave (`LiveMigrate` and not live-migratable, or `External`) holds the drain: create " +
					"then fails, naming each instance still there and why, and leaves the node cordoned and " +
					"draining; the resource is tainted, so destroy uncordons the node and the next apply drains it " +
					"again. Default `false`. Changing it replaces the resource: the node is uncordoned, then " +
					"cordoned (or drained) again. A drain started outside Terraform while this is `false` is left alone.",
				PlanModifiers: []planmodifier.Bool{boolplanmodifier.RequiresReplace()},
			},
			"drained": schema.BoolAttribute{
				Computed: true,
				MarkdownDescription: "Whether the node's drain has finished: no instance that has to leave is " +
					"on it. `false` when the node is not draining.",
				PlanModifiers: []planmodifier.Bool{boolplanmodifier.UseStateForUnknown()},
			},
		},
		Blocks: map[string]schema.Block{
			"timeouts": timeoutsBlock(ctx, "Time limits of create.", timeouts.Opts{
				Create: true,
				CreateDescription: "How long create may wait for a drain (`drain = true`) to finish, as a Go " +
					"duration (`30s`, `15m`, `1h`). Default `20m`.",
			}),
		},
	}
}
