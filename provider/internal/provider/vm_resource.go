package provider

import (
	"context"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
)

// The virtplane_virtual_machine resource. Its parts are in vm_*.go, as the
// package doc says; what it is made from, which pools and replica sets
// share, in template_*.go.

var (
	_ resource.Resource                   = (*vmResource)(nil)
	_ resource.ResourceWithConfigure      = (*vmResource)(nil)
	_ resource.ResourceWithImportState    = (*vmResource)(nil)
	_ resource.ResourceWithModifyPlan     = (*vmResource)(nil)
	_ resource.ResourceWithValidateConfig = (*vmResource)(nil)
)

// NewVMResource returns the virtplane_virtual_machine resource.
func NewVMResource() resource.Resource { return &vmResource{configuredResource{kind: vmKind}} }

type vmResource struct {
	configuredResource
}

func (r *vmResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_virtual_machine"
}

func (r *vmResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	if id, ok := strings.CutPrefix(req.ID, adoptImportPrefix); ok {
		r.importAdopted(ctx, id, resp) // vm_resource_adopt.go
		return
	}
	if importNamespaced(ctx, req, resp, r.kind, "default/web") {
		resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("update_policy"), defaultUpdatePolicy)...)
	}
}
