package provider

import (
	"context"
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
)

// Plan-time checks of virtplane_backup_target: each asks the agent's own
// validation (validation.ValidateBackupTarget) about one field, set into
// an otherwise valid target, and keeps what it says about that field.

// backupTargetFieldErrors validates a target that set made, and returns
// the errors about fieldPath.
func backupTargetFieldErrors(set func(*apiv1.BackupTarget), fieldPath string) field.ErrorList {
	t := &apiv1.BackupTarget{Metadata: &apiv1.ObjectMeta{Name: "x"}, Spec: &apiv1.BackupTargetSpec{S3: &apiv1.S3BackupTarget{}}}
	if strings.HasPrefix(fieldPath, "spec.directory.") {
		t.Spec = &apiv1.BackupTargetSpec{Directory: &apiv1.DirectoryBackupTarget{}}
	}
	set(t)
	var out field.ErrorList
	for _, e := range validation.ValidateBackupTarget(t, false) {
		if e.Field == fieldPath || strings.HasPrefix(e.Field, fieldPath+".") || strings.HasPrefix(e.Field, fieldPath+"[") {
			out = append(out, e)
		}
	}
	return out
}

// backupTargetFieldValidator checks one string attribute, the API's
// field fieldPath. The CA certificate is checked as an https endpoint's.
func backupTargetFieldValidator(fieldPath string) validator.String {
	set := map[string]func(*apiv1.BackupTarget, string){
		"metadata.name":       func(t *apiv1.BackupTarget, s string) { t.Metadata.Name = s },
		"spec.directory.path": func(t *apiv1.BackupTarget, s string) { t.Spec.Directory.Path = s },
		"spec.s3.endpoint":    func(t *apiv1.BackupTarget, s string) { t.Spec.S3.Endpoint = s },
		"spec.s3.bucket":      func(t *apiv1.BackupTarget, s string) { t.Spec.S3.Bucket = s },
		"spec.s3.prefix":      func(t *apiv1.BackupTarget, s string) { t.Spec.S3.Prefix = s },
		"spec.s3.region":      func(t *apiv1.BackupTarget, s string) { t.Spec.S3.Region = s },
		"spec.s3.access_key":  func(t *apiv1.BackupTarget, s string) { t.Spec.S3.AccessKey = s },
		"spec.s3.secret_key":  func(t *apiv1.BackupTarget, s string) { t.Spec.S3.SecretKey = s },
		"spec.s3.ca_cert": func(t *apiv1.BackupTarget, s string) {
			t.Spec.S3.Endpoint, t.Spec.S3.CaCert = "https://s3.example.com", s
		},
	}[fieldPath]
	return stringCheck{
		describedAs: describedAs("must be what the agent accepts as " + fieldPath),
		check: func(p path.Path, s string, diags *diag.Diagnostics) {
			for _, e := range backupTargetFieldErrors(func(t *apiv1.BackupTarget) { set(t, s) }, fieldPath) {
				addFieldErrors(diags, p, fmt.Sprint(e.BadValue), field.ErrorList{e})
			}
		},
	}
}

// ValidateConfig checks what involves the blocks: exactly one kind, and
// the required attributes of the block set.
func (r *backupTargetResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var dir, s3 types.Object
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("directory"), &dir)...)
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("s3"), &s3)...)
	if resp.Diagnostics.HasError() || dir.IsUnknown() || s3.IsUnknown() {
		return
	}
	if dir.IsNull() == s3.IsNull() {
		resp.Diagnostics.AddError("Invalid backup target", "A virtplane_backup_target must set exactly one of the directory and s3 blocks.")
		return
	}
	required := func(block string, obj types.Object, attrs ...string) {
		for _, a := range attrs {
			if v, ok := obj.Attributes()[a]; ok && v.IsNull() {
				resp.Diagnostics.AddAttributeError(path.Root(block).AtName(a), "Missing "+a,
					fmt.Sprintf("%s.%s is required in the %s block.", block, a, block))
			}
		}
	}
	if !dir.IsNull() {
		required("directory", dir, "path")
	}
	if !s3.IsNull() {
		required("s3", s3, "endpoint", "bucket", "access_key", "secret_key")
	}
}
