package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// The virtplane_virtual_machine_backup_schedule resource: a
// VirtualMachineBackupSchedule, backups of a VM to a target on a cron
// schedule with retention (docs/backups.md). Its parts are in
// backup_schedule_*.go; its model and errors, short, are here.

var (
	_ resource.Resource                = (*backupScheduleResource)(nil)
	_ resource.ResourceWithConfigure   = (*backupScheduleResource)(nil)
	_ resource.ResourceWithImportState = (*backupScheduleResource)(nil)
	_ resource.ResourceWithModifyPlan  = (*backupScheduleResource)(nil)
)

// NewBackupScheduleResource returns the
// virtplane_virtual_machine_backup_schedule resource.
func NewBackupScheduleResource() resource.Resource {
	return &backupScheduleResource{configuredResource{kind: backupScheduleKind}}
}

type backupScheduleResource struct {
	configuredResource
}

func (r *backupScheduleResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_virtual_machine_backup_schedule"
}

func (r *backupScheduleResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	importNamespaced(ctx, req, resp, r.kind, "default/db-nightly")
}

// ModifyPlan keeps what the controller reports (the last backup, the
// next time) when the plan changes nothing else.
func (r *backupScheduleResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() || req.State.Raw.IsNull() {
		return
	}
	keepComputedWhenUnchanged(ctx, req, resp, path.Root("last_backup"), path.Root("last_successful_backup"), path.Root("next_time"))
}

type backupScheduleModel struct {
	ID                   types.String          `tfsdk:"id"`
	Namespace            types.String          `tfsdk:"namespace"`
	Name                 types.String          `tfsdk:"name"`
	VirtualMachine       types.String          `tfsdk:"virtual_machine"`
	Target               types.String          `tfsdk:"target"`
	Schedule             types.String          `tfsdk:"schedule"`
	Suspend              types.Bool            `tfsdk:"suspend"`
	Retention            *backupRetentionModel `tfsdk:"retention"`
	UID                  types.String          `tfsdk:"uid"`
	LastBackup           types.String          `tfsdk:"last_backup"`
	LastSuccessfulBackup types.String          `tfsdk:"last_successful_backup"`
	NextTime             types.String          `tfsdk:"next_time"`
}

type backupRetentionModel struct {
	KeepLast   types.Int64 `tfsdk:"keep_last"`
	KeepDaily  types.Int64 `tfsdk:"keep_daily"`
	KeepWeekly types.Int64 `tfsdk:"keep_weekly"`
}

// backupScheduleKind words the diagnostics about backup schedules.
var backupScheduleKind = objectKind{noun: "backup schedule", title: "Backup schedule", one: "a backup schedule",
	short: "backup schedule", logKey: "backup_schedule", importID: "namespace/name", attribute: backupScheduleAttributePath}

func backupScheduleAttributePath(field string) (path.Path, bool) {
	switch field {
	case "metadata.name":
		return path.Root("name"), true
	case "metadata.namespace":
		return path.Root("namespace"), true
	case "spec.source":
		return path.Root("virtual_machine"), true
	case "spec.target":
		return path.Root("target"), true
	case "spec.schedule":
		return path.Root("schedule"), true
	case "spec.retention.keep_last", "spec.retention.keep_daily", "spec.retention.keep_weekly":
		return path.Root("retention").AtName(field[len("spec.retention."):]), true
	}
	return path.Empty(), false
}
