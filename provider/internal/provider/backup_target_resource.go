package provider

import (
	"context"
	"strconv"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// The virtplane_backup_target resource: an admin's BackupTarget, where
// backups go (a directory mounted on the servers and the nodes, or an S3
// bucket prefix; docs/backups.md). Its parts are in backup_target_*.go, as
// the package doc says; like a storage class's cephx key, the S3 secret
// key is write-only on the API and the state keeps the configured value.

var (
	_ resource.Resource                   = (*backupTargetResource)(nil)
	_ resource.ResourceWithConfigure      = (*backupTargetResource)(nil)
	_ resource.ResourceWithImportState    = (*backupTargetResource)(nil)
	_ resource.ResourceWithModifyPlan     = (*backupTargetResource)(nil)
	_ resource.ResourceWithValidateConfig = (*backupTargetResource)(nil)
)

// NewBackupTargetResource returns the virtplane_backup_target resource.
func NewBackupTargetResource() resource.Resource {
	return &backupTargetResource{configuredResource{kind: backupTargetKind}}
}

type backupTargetResource struct {
	configuredResource
}

func (r *backupTargetResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_backup_target"
}

// ImportState takes the target's name. The secret key stays null until
// the next apply writes the configured one.
func (r *backupTargetResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	if req.ID == "" || strings.Contains(req.ID, "/") {
		resp.Diagnostics.AddError("Invalid import ID",
			"Import a backup target by its name (nfs); backup targets have no namespace. Got "+strconv.Quote(req.ID)+".")
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), req.ID)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("name"), req.ID)...)
}

// ModifyPlan keeps the state's key_set, ready and message when the plan
// changes nothing else (as a storage class's).
func (r *backupTargetResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() || req.State.Raw.IsNull() {
		return
	}
	keepComputedWhenUnchanged(ctx, req, resp, path.Root("key_set"), path.Root("ready"), path.Root("message"))
}

// backupTargetModel is the resource's state: exactly one of Directory
// and S3 (ValidateConfig).
type backupTargetModel struct {
	ID           types.String          `tfsdk:"id"`
	Name         types.String          `tfsdk:"name"`
	Directory    *backupDirectoryModel `tfsdk:"directory"`
	S3           *backupS3Model        `tfsdk:"s3"`
	NodeSelector types.Map             `tfsdk:"node_selector"`
	UID          types.String          `tfsdk:"uid"`
	KeySet       types.Bool            `tfsdk:"key_set"`
	Ready        types.Bool            `tfsdk:"ready"`
	Message      types.String          `tfsdk:"message"`
}

type backupDirectoryModel struct {
	Path types.String `tfsdk:"path"`
}

type backupS3Model struct {
	Endpoint  types.String `tfsdk:"endpoint"`
	Bucket    types.String `tfsdk:"bucket"`
	Prefix    types.String `tfsdk:"prefix"`
	Region    types.String `tfsdk:"region"`
	AccessKey types.String `tfsdk:"access_key"`
	SecretKey types.String `tfsdk:"secret_key"`
	CACert    types.String `tfsdk:"ca_cert"`
}
