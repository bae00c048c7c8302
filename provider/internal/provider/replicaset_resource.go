package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/resource"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// The virtplane_virtual_machine_replica_set resource: KubeVirt's
// VirtualMachineInstanceReplicaSet. Its parts are in replicaset_*.go, as
// the package doc says; what it shares with the pool in replicas_*.go.

var (
	_ resource.Resource                   = (*replicaSetResource)(nil)
	_ resource.ResourceWithConfigure      = (*replicaSetResource)(nil)
	_ resource.ResourceWithImportState    = (*replicaSetResource)(nil)
	_ resource.ResourceWithModifyPlan     = (*replicaSetResource)(nil)
	_ resource.ResourceWithValidateConfig = (*replicaSetResource)(nil)
)

// NewReplicaSetResource returns the virtplane_virtual_machine_replica_set
// resource.
func NewReplicaSetResource() resource.Resource {
	return &replicaSetResource{newReplicaResource(replicaSetKind, replicaSetOps)}
}

type replicaSetResource struct {
	replicaResource[*apiv1.VirtualMachineInstanceReplicaSet, replicaSetView, replicaSetResourceModel]
}

func (r *replicaSetResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_virtual_machine_replica_set"
}
