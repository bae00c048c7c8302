package provider

import (
	"context"
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
)

// What plan refuses of a template's persistent volumes, with the agent's
// own rules (internal/api/validation), so that a change the agent would
// refuse fails the plan on the attribute that makes it, not the apply.

// refuseVolumeUpdates refuses a plan that does to a persistent disk the
// state has (by name) what the agent refuses of a VM's or a pool's
// update (ValidateVirtualMachineUpdate, ValidatePoolUpdate): shrink it or
// give it another image (validation.ValidatePersistentVolumeUpdate), or
// move it to another storage class
// (validation.ValidateVolumeStorageClassUpdate). Each error is on the
// disk's attribute under base (path.Empty() for the VM resource,
// virtual_machine_template for a pool). A size, image or class still
// unknown is the apply's to check. It reports whether it refused.
func refuseVolumeUpdates(ctx context.Context, diags *diag.Diagnostics, state, plan *instanceSpecModel, base path.Path) bool {
	var d diag.Diagnostics
	from := instanceSpecFromModel(ctx, state, &d)
	to := instanceSpecFromModel(ctx, plan, &d)
	if d.HasError() {
		return false
	}
	// As the agent has them: sizes in canonical spelling, which its
	// messages quote.
	validation.DefaultVirtualMachineInstance(&apiv1.VirtualMachineInstance{Spec: from})
	validation.DefaultVirtualMachineInstance(&apiv1.VirtualMachineInstance{Spec: to})
	was := map[string]*apiv1.PersistentVolume{}
	for _, v := range from.GetVolumes() {
		if pv := v.GetPersistent(); pv != nil {
			was[v.GetName()] = pv
		}
	}
	// Volumes are written in disk order, one per disk. What is not known
	// yet is taken as it was: no rule sees a change there.
	for i, disk := range plan.Disks {
		p, old := disk.Persistent, was[to.GetVolumes()[i].GetName()]
		if p == nil || old == nil || to.Volumes[i].Persistent == nil {
			continue
		}
		pv := to.Volumes[i].Persistent
		if p.Size.IsUnknown() {
			pv.Size = old.GetSize()
		}
		if p.Image.IsUnknown() {
			pv.Image = old.GetImage()
		}
		if p.StorageClass.IsUnknown() {
			pv.StorageClass = old.GetStorageClass()
		}
	}
	fp := field.NewPath("spec", "template", "spec")
	errs := append(validation.ValidatePersistentVolumeUpdate(to, from, fp), validation.ValidateVolumeStorageClassUpdate(to, from, fp)...)
	for _, e := range errs {
		p, ok := vmAttributePath(e.Field)
		if !ok {
			p = path.Root("disk") // unreachable: every volume is a disk block's
		}
		p = underPath(base, p)
		switch {
		case strings.HasSuffix(e.Field, ".storage_class"):
			diags.AddAttributeError(p, "Storage class of a persistent disk cannot change",
				fmt.Sprintf("%s %q: %s. The agent refuses the change too.", p, fmt.Sprint(e.BadValue), e.Detail))
		case strings.HasSuffix(e.Field, ".image"):
			diags.AddAttributeError(p, "Persistent disk image cannot change", fmt.Sprintf("%s: %s.", p, e.Detail))
		default:
			diags.AddAttributeError(p, "Persistent disk cannot shrink", fmt.Sprintf("%s: %s.", p, e.Detail))
		}
	}
	return len(errs) > 0
}
