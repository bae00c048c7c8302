package provider

import (
	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

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
