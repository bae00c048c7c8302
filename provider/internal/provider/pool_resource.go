package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/resource"
)

// The virtplane_virtual_machine_pool resource: KubeVirt's
// VirtualMachinePool. Its parts are in pool_*.go, as the package doc
// says; what it shares with the replica set in replicas_*.go.

var (
	_ resource.Resource                   = (*poolResource)(nil)
	_ resource.ResourceWithConfigure      = (*poolResource)(nil)
	_ resource.ResourceWithImportState    = (*poolResource)(nil)
	_ resource.ResourceWithModifyPlan     = (*poolResource)(nil)
	_ resource.ResourceWithValidateConfig = (*poolResource)(nil)
)

// NewPoolResource returns the virtplane_virtual_machine_pool resource.
func NewPoolResource() resource.Resource { return &poolResource{configuredResource{kind: poolKind}} }

type poolResource struct {
	configuredResource
}

func (r *poolResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_virtual_machine_pool"
}

func (r *poolResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	importReplicas(ctx, req, resp, "a virtual machine pool")
}
