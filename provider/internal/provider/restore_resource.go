package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/resource"
)

// The virtplane_virtual_machine_restore resource: KubeVirt's
// VirtualMachineRestore, an event rather than a setting. Creating it
// restores the VM; destroying it deletes only the record. Its parts are
// in restore_*.go, as the package doc says.

var (
	_ resource.Resource                = (*restoreResource)(nil)
	_ resource.ResourceWithConfigure   = (*restoreResource)(nil)
	_ resource.ResourceWithImportState = (*restoreResource)(nil)
)

// NewRestoreResource returns the virtplane_virtual_machine_restore resource.
func NewRestoreResource() resource.Resource {
	return &restoreResource{configuredResource{kind: restoreKind}}
}

type restoreResource struct {
	configuredResource
}

func (r *restoreResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_virtual_machine_restore"
}

func (r *restoreResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	importNamespaced(ctx, req, resp, r.kind, "")
}
