package provider

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
)

// The virtplane_image resource: an Image that nodes download by URL into
// their image directory. Its parts are in image_*.go, as the package doc
// says.

var (
	_ resource.Resource                   = (*imageResource)(nil)
	_ resource.ResourceWithConfigure      = (*imageResource)(nil)
	_ resource.ResourceWithImportState    = (*imageResource)(nil)
	_ resource.ResourceWithModifyPlan     = (*imageResource)(nil)
	_ resource.ResourceWithValidateConfig = (*imageResource)(nil)
)

// defaultImageTimeout bounds create and update waiting for every node's
// pull: room for a few GiB over a modest link.
const defaultImageTimeout = 20 * time.Minute

// NewImageResource returns the virtplane_image resource.
func NewImageResource() resource.Resource { return &imageResource{configuredResource{kind: imageKind}} }

type imageResource struct {
	configuredResource
}

func (r *imageResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_image"
}

// ImportState takes the image's name.
func (r *imageResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	if req.ID == "" || strings.Contains(req.ID, "/") {
		resp.Diagnostics.AddError("Invalid import ID",
			"Import an image by its name (debian-12.qcow2); images have no namespace. Got "+strconv.Quote(req.ID)+".")
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), req.ID)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("name"), req.ID)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("wait_for_nodes"), true)...)
}
