package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// Create, read, update and delete of virtplane_node_maintenance: cordon
// (or drain) the node, check it still is, uncordon it.

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
			addNodeNotFound(&resp.Diagnostics, name)
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
	if err != nil {
		r.addWaitError(&resp.Diagnostics, err, name, timeout)
		return
	}
	tflog.Info(ctx, "node drained", map[string]any{"node": name})
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
