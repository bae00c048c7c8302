package provider

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/boolplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// The virtplane_node_maintenance resource: a node cordoned, or drained,
// while the resource exists, so that a maintenance window is code. The
// node's cordon (spec.unschedulable) and drain (spec.drain) are the
// resource's whole state: uncordoned outside Terraform, the resource is
// gone and the next apply cordons (or drains) the node again.

var (
	_ resource.Resource                = (*nodeMaintenanceResource)(nil)
	_ resource.ResourceWithConfigure   = (*nodeMaintenanceResource)(nil)
	_ resource.ResourceWithImportState = (*nodeMaintenanceResource)(nil)
)

var nodeMaintenanceKind = objectKind{noun: "node maintenance", title: "Node", one: "a node", short: "node maintenance",
	logKey: "node", importID: "NODE", attribute: func(string) (path.Path, bool) { return path.Root("node"), true }}

// NewNodeMaintenanceResource returns the virtplane_node_maintenance resource.
func NewNodeMaintenanceResource() resource.Resource {
	return &nodeMaintenanceResource{configuredResource{kind: nodeMaintenanceKind}}
}

type nodeMaintenanceResource struct {
	configuredResource
}

type nodeMaintenanceModel struct {
	ID       types.String   `tfsdk:"id"`
	Node     types.String   `tfsdk:"node"`
	Drain    types.Bool     `tfsdk:"drain"`
	Drained  types.Bool     `tfsdk:"drained"`
	Timeouts timeouts.Value `tfsdk:"timeouts"`
}

func (r *nodeMaintenanceResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_node_maintenance"
}

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

func (r *nodeMaintenanceResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var m nodeMaintenanceModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() || !r.ready(&resp.Diagnostics, "cordon a node") {
		return
	}
	timeout, d := m.Timeouts.Create(ctx, defaultDrainTimeout)
	resp.Diagnostics.Append(d...)
	if resp.Diagnostics.HasError() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	name := m.Node.ValueString()
	nodes := r.data.client.Nodes
	verb, done, call := "cordon", "node cordoned", nodes.Cordon
	if m.Drain.ValueBool() {
		verb, done, call = "drain", "node cordoned and drain started", nodes.Drain
	}
	node, err := call(ctx, &apiv1.CordonNodeRequest{Name: name})
	if err != nil {
		if status.Code(err) == codes.NotFound {
			resp.Diagnostics.AddAttributeError(path.Root("node"), "Node not found",
				fmt.Sprintf("No node called %q has registered with the agent; virtplane_nodes lists those that have.", name))
			return
		}
		r.addError(&resp.Diagnostics, err, verb+" node "+name)
		return
	}
	tflog.Info(ctx, done, map[string]any{"node": name})
	m.ID = types.StringValue(name)
	m.Drained = types.BoolValue(node.Drained())
	// Saved before the wait: if the drain does not finish, destroy can
	// still uncordon the node.
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
	if !m.Drain.ValueBool() || m.Drained.ValueBool() || resp.Diagnostics.HasError() {
		return
	}

	node, err = waitDrained(ctx, nodes, name)
	if node != nil {
		m.Drained = types.BoolValue(node.Drained())
		resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
	}
	switch {
	case err == nil:
		tflog.Info(ctx, "node drained", map[string]any{"node": name})
	case errors.Is(err, errWaitTimeout):
		resp.Diagnostics.AddError("Node "+name+" not drained",
			fmt.Sprintf("node %s not drained after %s: %s.\n\nThe node stays cordoned and draining. An instance whose "+
				"eviction_strategy is LiveMigrate and that is not live-migratable, or External, leaves only when it "+
				"is stopped or moved by other means. Raise timeouts.create to wait longer. The resource is tainted: "+
				"destroy uncordons the node, and the next apply replaces it, draining the node again.",
				name, timeout, strings.TrimPrefix(err.Error(), errWaitTimeout.Error()+": ")))
	case errors.Is(err, errDrainCanceled):
		resp.Diagnostics.AddError("Node "+name+" not drained",
			fmt.Sprintf("node %s: %s. The next apply cordons and drains it again.", name, err))
	default:
		r.addError(&resp.Diagnostics, err, "wait for node "+name+" to drain")
	}
}

func (r *nodeMaintenanceResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var m nodeMaintenanceModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() || !r.readyToRefresh(req, resp, "read a node") {
		return
	}
	name := m.ID.ValueString()
	node, err := r.data.client.Nodes.Get(ctx, &apiv1.GetNodeRequest{Name: name})
	if !r.stillManaged(ctx, resp, name, "", "", err) {
		return
	}
	spec := node.GetSpec()
	switch {
	case !spec.GetUnschedulable():
		tflog.Warn(ctx, "node uncordoned outside Terraform; removing its maintenance from the state", map[string]any{"node": name})
		resp.State.RemoveResource(ctx)
		return
	case m.Drain.ValueBool() && !spec.GetDrain():
		// Uncordoned and cordoned again: the drain was canceled.
		tflog.Warn(ctx, "node no longer draining; removing its maintenance from the state", map[string]any{"node": name})
		resp.State.RemoveResource(ctx)
		return
	}
	m.Node = types.StringValue(name)
	if m.Drain.IsNull() {
		m.Drain = types.BoolValue(spec.GetDrain()) // after import
	}
	m.Drained = types.BoolValue(node.Drained())
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// Update only records a change of timeouts: node and drain force
// replacement.
func (r *nodeMaintenanceResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var m nodeMaintenanceModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *nodeMaintenanceResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var m nodeMaintenanceModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() || !r.ready(&resp.Diagnostics, "uncordon a node") {
		return
	}
	name := m.ID.ValueString()
	_, err := r.data.client.Nodes.Uncordon(ctx, &apiv1.CordonNodeRequest{Name: name})
	switch {
	case status.Code(err) == codes.NotFound:
		tflog.Warn(ctx, "node deleted outside Terraform; nothing to uncordon", map[string]any{"node": name})
	case err != nil:
		r.addError(&resp.Diagnostics, err, "uncordon node "+name)
	default:
		tflog.Info(ctx, "node uncordoned", map[string]any{"node": name})
	}
}

// ImportState adopts the cordon (and drain) of a node; Read drops it again
// when the node is not cordoned.
func (r *nodeMaintenanceResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	if req.ID == "" {
		resp.Diagnostics.AddError("Invalid import ID", "Import a node maintenance by the node's name: terraform import <address> NODE")
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), req.ID)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("node"), req.ID)...)
}
