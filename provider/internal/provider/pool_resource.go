package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/resource"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
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
func NewPoolResource() resource.Resource {
	return &poolResource{newReplicaResource(poolKind, poolOps)}
}

type poolResource struct {
	replicaResource[*apiv1.VirtualMachinePool, poolView, poolResourceModel]
}

func (r *poolResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_virtual_machine_pool"
}
