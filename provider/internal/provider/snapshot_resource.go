package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/resource"
)

// The virtplane_virtual_machine_snapshot resource: KubeVirt's
// VirtualMachineSnapshot. Its parts are in snapshot_*.go, as the package
// doc says.

var (
	_ resource.Resource                = (*snapshotResource)(nil)
	_ resource.ResourceWithConfigure   = (*snapshotResource)(nil)
	_ resource.ResourceWithImportState = (*snapshotResource)(nil)
)

// NewSnapshotResource returns the virtplane_virtual_machine_snapshot resource.
func NewSnapshotResource() resource.Resource {
	return &snapshotResource{configuredResource{kind: snapshotKind}}
}

type snapshotResource struct {
	configuredResource
}

func (r *snapshotResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_virtual_machine_snapshot"
}

func (r *snapshotResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	importNamespaced(ctx, req, resp, r.kind, "default/before-upgrade")
}
