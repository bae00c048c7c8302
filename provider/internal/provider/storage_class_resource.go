package provider

import (
	"context"
	"strconv"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
)

// The virtplane_storage_class resource: an admin's StorageClass, where
// persistent volumes live when they must outlive a node (an rbd pool of
// an existing Ceph cluster, or a filesystem mounted on every node it
// selects). Its parts are in storage_class_*.go, as the package doc says.
//
// The rbd key is write-only on the API: no read returns it
// (status.key_set says whether one is stored). The state keeps the
// configured key, as Terraform keeps every sensitive value; a refresh
// cannot see a key changed outside Terraform, and an import has none
// until the next apply sets it.

var (
	_ resource.Resource                   = (*storageClassResource)(nil)
	_ resource.ResourceWithConfigure      = (*storageClassResource)(nil)
	_ resource.ResourceWithImportState    = (*storageClassResource)(nil)
	_ resource.ResourceWithModifyPlan     = (*storageClassResource)(nil)
	_ resource.ResourceWithValidateConfig = (*storageClassResource)(nil)
)

// NewStorageClassResource returns the virtplane_storage_class resource.
func NewStorageClassResource() resource.Resource {
	return &storageClassResource{configuredResource{kind: storageClassKind}}
}

type storageClassResource struct {
	configuredResource
}

func (r *storageClassResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_storage_class"
}

// ImportState takes the class's name. The key stays null until the next
// apply writes the configured one (a planned in-place update).
func (r *storageClassResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	if req.ID == "" || strings.Contains(req.ID, "/") {
		resp.Diagnostics.AddError("Invalid import ID",
			"Import a storage class by its name (ceph); storage classes have no namespace. Got "+strconv.Quote(req.ID)+".")
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), req.ID)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("name"), req.ID)...)
}
