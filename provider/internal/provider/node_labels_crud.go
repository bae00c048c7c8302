package provider

import (
	"context"
	"maps"
	"slices"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
)

// Create, read, update and delete of virtplane_node_labels: one
// Nodes.Label call each (the agent applies it to the stored labels in one
// compare-and-swap loop, whatever the node's heartbeats write meanwhile),
// and a read that looks only at the keys the state holds.

func (r *nodeLabelsResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var m nodeLabelsModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() || !r.ready(&resp.Diagnostics, "label a node") {
		return
	}
	name := m.Node.ValueString()
	set := stringMap(ctx, m.Labels, &resp.Diagnostics)
	if resp.Diagnostics.HasError() || !r.label(ctx, &resp.Diagnostics, name, set, nil) {
		return
	}
	m.ID = types.StringValue(name)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// Read refreshes the keys the state holds from the node: one changed
// outside Terraform shows its value, one removed drops out, so that the
// plan sets them again. After an import the state holds none, and Read
// takes every admin label of the node.
func (r *nodeLabelsResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var m nodeLabelsModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() || !r.readyToRefresh(req, resp, "read a node's labels") {
		return
	}
	name := m.ID.ValueString()
	node, err := r.data.client.Nodes.Get(ctx, &apiv1.GetNodeRequest{Name: name})
	if !r.stillManaged(ctx, resp, name, "", "", err) {
		return
	}
	has := node.GetMetadata().GetLabels()
	got := map[string]string{}
	if m.Labels.IsNull() {
		for k, v := range has {
			if validation.AdminNodeLabel(k) {
				got[k] = v
			}
		}
	} else {
		for k := range stringMapOrEmpty(ctx, m.Labels, &resp.Diagnostics) {
			if v, ok := has[k]; ok {
				got[k] = v
			}
		}
	}
	labels, d := types.MapValueFrom(ctx, types.StringType, got)
	resp.Diagnostics.Append(d...)
	m.Node, m.Labels = types.StringValue(name), labels
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// Update sets the planned labels and removes the keys the configuration
// no longer has.
func (r *nodeLabelsResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, state nodeLabelsModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() || !r.ready(&resp.Diagnostics, "label a node") {
		return
	}
	set := stringMap(ctx, plan.Labels, &resp.Diagnostics)
	var remove []string
	for k := range stringMapOrEmpty(ctx, state.Labels, &resp.Diagnostics) {
		if _, keep := set[k]; !keep {
			remove = append(remove, k)
		}
	}
	slices.Sort(remove)
	if resp.Diagnostics.HasError() || !r.label(ctx, &resp.Diagnostics, state.ID.ValueString(), set, remove) {
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

// Delete removes the keys the resource set, whatever their values now.
func (r *nodeLabelsResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var m nodeLabelsModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() || !r.ready(&resp.Diagnostics, "remove a node's labels") {
		return
	}
	name := m.ID.ValueString()
	remove := slices.Sorted(maps.Keys(stringMapOrEmpty(ctx, m.Labels, &resp.Diagnostics)))
	_, err := r.data.client.Nodes.Label(ctx, &apiv1.LabelNodeRequest{Name: name, Remove: remove})
	switch {
	case status.Code(err) == codes.NotFound:
		tflog.Warn(ctx, "node deleted outside Terraform; no labels to remove", map[string]any{"node": name})
	case err != nil:
		r.addError(&resp.Diagnostics, err, "remove the labels of node "+name)
	default:
		tflog.Info(ctx, "node labels removed", map[string]any{"node": name, "keys": remove})
	}
}

// label sets and removes labels of node name, taking over keys the node
// has with other values: the configuration says what they are. It reports
// whether that worked.
func (r *nodeLabelsResource) label(ctx context.Context, diags *diag.Diagnostics, name string, set map[string]string, remove []string) bool {
	_, err := r.data.client.Nodes.Label(ctx, &apiv1.LabelNodeRequest{Name: name, Set: set, Remove: remove, Overwrite: true})
	switch {
	case status.Code(err) == codes.NotFound:
		addNodeNotFound(diags, name)
		return false
	case err != nil:
		r.addError(diags, err, "label node "+name)
		return false
	}
	tflog.Info(ctx, "node labelled", map[string]any{"node": name, "set": set, "removed": remove})
	return true
}

// stringMapOrEmpty is stringMap with an empty map for null.
func stringMapOrEmpty(ctx context.Context, m types.Map, diags *diag.Diagnostics) map[string]string {
	if out := stringMap(ctx, m, diags); out != nil {
		return out
	}
	return map[string]string{}
}
