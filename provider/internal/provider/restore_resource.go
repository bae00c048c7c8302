package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// The virtplane_virtual_machine_restore resource: KubeVirt's
// VirtualMachineRestore, an event rather than a setting. Creating it
// restores the VM; destroying it deletes only the record. Its parts are
// in restore_*.go, as the package doc says; its model and errors, short,
// are here.

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

// The virtplane_virtual_machine_restore model.

type restoreModel struct {
	ID                    types.String   `tfsdk:"id"`
	Namespace             types.String   `tfsdk:"namespace"`
	Name                  types.String   `tfsdk:"name"`
	VirtualMachine        types.String   `tfsdk:"virtual_machine"`
	Snapshot              types.String   `tfsdk:"snapshot"`
	TargetReadinessPolicy types.String   `tfsdk:"target_readiness_policy"`
	UID                   types.String   `tfsdk:"uid"`
	Phase                 types.String   `tfsdk:"phase"`
	Complete              types.Bool     `tfsdk:"complete"`
	RestoreTime           types.String   `tfsdk:"restore_time"`
	RestoredVolumes       types.List     `tfsdk:"restored_volumes"`
	Timeouts              timeouts.Value `tfsdk:"timeouts"`
}

// How virtplane_virtual_machine_restore words what goes wrong: its
// objectKind, and the attribute an agent's validation error is about.

// restoreKind words the diagnostics about restores.
var restoreKind = objectKind{noun: "virtual machine restore", title: "Virtual machine restore", one: "a restore",
	short: "restore", logKey: "restore", importID: "namespace/name", attribute: restoreAttributePath}

// restoreAttributePath maps a field of a rejected restore to its attribute.
func restoreAttributePath(field string) (path.Path, bool) {
	switch field {
	case "metadata.name":
		return path.Root("name"), true
	case "metadata.namespace":
		return path.Root("namespace"), true
	case "spec.target":
		return path.Root("virtual_machine"), true
	case "spec.snapshot":
		return path.Root("snapshot"), true
	case "spec.target_readiness_policy":
		return path.Root("target_readiness_policy"), true
	}
	return path.Empty(), false
}
