package provider

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
)

// What plan refuses of a template's persistent volumes, with the agent's
// own rules (internal/api/validation), so that a change the agent would
// refuse fails the plan on the attribute that makes it, not the apply.

// refuseVolumeClassChanges refuses a plan that moves a persistent disk the
// state has (by name) to another storage class
// (validation.ValidateVolumeStorageClassUpdate), on the disk's
// storage_class under base (path.Empty() for the VM resource,
// virtual_machine_template for a pool). A class still unknown is the
// apply's to check. It reports whether it refused.
func refuseVolumeClassChanges(ctx context.Context, diags *diag.Diagnostics, state, plan *instanceSpecModel, base path.Path) bool {
	var d diag.Diagnostics
	from := instanceSpecFromModel(ctx, state, &d)
	to := instanceSpecFromModel(ctx, plan, &d)
	if d.HasError() {
		return false
	}
	was := map[string]string{}
	for _, v := range from.GetVolumes() {
		if pv := v.GetPersistent(); pv != nil {
			was[v.GetName()] = pv.GetStorageClass()
		}
	}
	// Volumes are written in disk order, one per disk.
	for i, disk := range plan.Disks {
		if p := disk.Persistent; p != nil && p.StorageClass.IsUnknown() && i < len(to.Volumes) && to.Volumes[i].Persistent != nil {
			to.Volumes[i].Persistent.StorageClass = was[to.Volumes[i].GetName()]
		}
	}
	errs := validation.ValidateVolumeStorageClassUpdate(to, from, field.NewPath("spec", "template", "spec"))
	for _, e := range errs {
		p, ok := vmAttributePath(e.Field)
		if !ok {
			continue // unreachable: every volume is a disk block's
		}
		p = underPath(base, p)
		diags.AddAttributeError(p, "Storage class of a persistent disk cannot change",
			fmt.Sprintf("%s %q: %s. The agent refuses the change too.", p, fmt.Sprint(e.BadValue), e.Detail))
	}
	return len(errs) > 0
}
