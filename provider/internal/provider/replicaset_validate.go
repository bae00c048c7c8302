package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
)

// Configuration checks of virtplane_virtual_machine_replica_set.

// ValidateConfig checks what single attributes cannot: the template as
// the VM resource checks its settings, no persistent disks, and the
// selector against the template's labels.
func (r *replicaSetResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	base := path.Root("template")
	if !validateTemplate(ctx, req.Config, base, &resp.Diagnostics) {
		return
	}
	var disks []diskModel
	if d := req.Config.GetAttribute(ctx, base.AtName("disk"), &disks); d.HasError() {
		return // unknown blocks: the API checks at apply
	}
	for i, d := range disks {
		if d.Persistent != nil {
			resp.Diagnostics.AddAttributeError(base.AtName("disk").AtListIndex(i).AtName("persistent"), "Persistent disk in a replica set",
				"A persistent disk belongs to a VM (the node keeps it under the VM's uid and deletes it with the VM), "+
					"and the instances of a replica set have none. Use virtplane_virtual_machine_pool for replicas "+
					"with disks of their own, or an image disk here.")
		}
	}
}
