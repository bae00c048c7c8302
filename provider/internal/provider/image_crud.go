package provider

import (
	"context"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
)

// Create, read, update and delete of virtplane_image, and the wait for
// the nodes' pulls (image_wait.go) after create and update.

func (r *imageResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan imageResourceModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() || !r.ready(&resp.Diagnostics, "create an image") {
		return
	}
	want, timeout, ok := planned(ctx, &plan.imageModel, imageFromModel, plan.Timeouts.Create, defaultImageTimeout, &resp.Diagnostics)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	name := want.GetMetadata().GetName()
	created, err := r.data.client.Images.Create(ctx, &apiv1.CreateImageRequest{Image: want})
	if err != nil {
		r.addError(&resp.Diagnostics, err, "create image "+name)
		return
	}
	tflog.Info(ctx, "image created", map[string]any{"image": name, "uid": created.GetMetadata().GetUid()})

	// Saved before waiting: a failed wait leaves the image tainted, so
	// the next apply replaces it (and the nodes pull it again) instead of
	// refusing a second image of the same name.
	r.setState(ctx, &resp.State, &resp.Diagnostics, created, &plan)
	if resp.Diagnostics.HasError() || !waitsForNodes(&plan) {
		return
	}
	r.wait(ctx, &resp.State, &resp.Diagnostics, created, &plan, timeout, "create")
}

// waitsForNodes says whether apply waits for the nodes' pulls.
func waitsForNodes(m *imageResourceModel) bool {
	return m.Nodes.ValueString() == validation.ImageNodesAll && m.WaitForNodes.ValueBool()
}

// wait waits for every target node's pull of img, then records what the
// nodes reported.
func (r *imageResource) wait(ctx context.Context, st stateSetter, diags *diag.Diagnostics, img *apiv1.Image, plan *imageResourceModel, timeout time.Duration, op string) {
	name := img.GetMetadata().GetName()
	last, v, err := waitImage(ctx, r.data.client, img)
	if last != nil {
		r.setState(ctx, st, diags, last, plan)
	}
	switch {
	case err != nil:
		r.addWaitError(diags, err, name, timeout, op)
	case len(v.Targets) == 0:
		diags.AddWarning("No node to pull image "+name,
			"No node is ready and schedulable, so there was nothing to wait for; nodes pull the image when they become ready.")
	}
}

func (r *imageResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state imageResourceModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	name := state.Name.ValueString()
	if !r.readyToRefresh(req, resp, "read image "+name) {
		return
	}
	img, err := r.data.client.Images.Get(ctx, &apiv1.GetImageRequest{Name: name})
	if !r.stillManaged(ctx, resp, name, state.UID.ValueString(), img.GetMetadata().GetUid(), err) {
		return
	}
	r.setState(ctx, &resp.State, &resp.Diagnostics, img, &state)
}

func (r *imageResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, state imageResourceModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() || !r.ready(&resp.Diagnostics, "update an image") {
		return
	}
	want, timeout, ok := planned(ctx, &plan.imageModel, imageFromModel, plan.Timeouts.Update, defaultImageTimeout, &resp.Diagnostics)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	name := want.GetMetadata().GetName()
	c := r.data.client

	// Nodes write their pull status concurrently: updateCAS retries the
	// conflicts that causes.
	img, written, err := updateCAS(tflog.SetField(ctx, "image", name), "image "+name, state.UID.ValueString(),
		func(ctx context.Context) (*apiv1.Image, error) {
			return c.Images.Get(ctx, &apiv1.GetImageRequest{Name: name})
		},
		func(cur *apiv1.Image) *apiv1.Image { return mergeImage(cur, want) },
		func(ctx context.Context, next *apiv1.Image) (*apiv1.Image, error) {
			return c.Images.Update(ctx, &apiv1.UpdateImageRequest{Image: next})
		})
	if addCASError(&resp.Diagnostics, err, r.kind, name, r.addError) {
		return
	}
	if written {
		tflog.Info(ctx, "image updated", map[string]any{"image": name, "nodes": img.GetSpec().GetNodes()})
	}
	r.setState(ctx, &resp.State, &resp.Diagnostics, img, &plan)
	// Only a change that starts pulls everywhere is waited for: a label
	// change must not fail because some node cannot pull the image.
	if resp.Diagnostics.HasError() || !waitsForNodes(&plan) || waitsForNodes(&state) {
		return
	}
	r.wait(ctx, &resp.State, &resp.Diagnostics, img, &plan, timeout, "update")
}

func (r *imageResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state imageResourceModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() || !r.ready(&resp.Diagnostics, "delete an image") {
		return
	}
	name := state.Name.ValueString()
	c := r.data.client
	deleteCreated(ctx, &r.configuredResource, &resp.Diagnostics, name, state.UID.ValueString(),
		func(ctx context.Context) (*apiv1.Image, error) {
			return c.Images.Get(ctx, &apiv1.GetImageRequest{Name: name})
		},
		func(ctx context.Context) error {
			_, err := c.Images.Delete(ctx, &apiv1.DeleteImageRequest{Name: name})
			return err
		},
		"image deleted; nodes remove their copies",
		"When those VMs are in this configuration, make their disks refer to the image "+
			"(image = virtplane_image.<name>.name) or add depends_on, so that Terraform destroys or changes them first.")
}

// setState writes img as state, keeping the provider-only settings and
// the spellings of prior (the plan or the previous state).
func (r *imageResource) setState(ctx context.Context, st stateSetter, diags *diag.Diagnostics, img *apiv1.Image, prior *imageResourceModel) {
	m, d := imageToModel(img, &prior.imageModel, false)
	diags.Append(d...)
	if d.HasError() {
		return
	}
	out := imageResourceModel{imageModel: m, WaitForNodes: prior.WaitForNodes, Timeouts: prior.Timeouts}
	if out.WaitForNodes.IsNull() || out.WaitForNodes.IsUnknown() {
		out.WaitForNodes = types.BoolValue(true) // after import
	}
	diags.Append(st.Set(ctx, &out)...)
}
