package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// The conversions between the virtplane_backup_target model and the
// BackupTarget API object.

func backupTargetFromModel(ctx context.Context, m *backupTargetModel) (*apiv1.BackupTarget, diag.Diagnostics) {
	var diags diag.Diagnostics
	t := &apiv1.BackupTarget{
		Metadata: &apiv1.ObjectMeta{Name: m.Name.ValueString()},
		Spec:     &apiv1.BackupTargetSpec{NodeSelector: stringMap(ctx, m.NodeSelector, &diags)},
	}
	if d := m.Directory; d != nil {
		t.Spec.Directory = &apiv1.DirectoryBackupTarget{Path: d.Path.ValueString()}
	}
	if s := m.S3; s != nil {
		t.Spec.S3 = &apiv1.S3BackupTarget{
			Endpoint: s.Endpoint.ValueString(), Bucket: s.Bucket.ValueString(), Prefix: s.Prefix.ValueString(),
			Region: s.Region.ValueString(), AccessKey: s.AccessKey.ValueString(), SecretKey: s.SecretKey.ValueString(),
			CaCert: s.CACert.ValueString(),
		}
	}
	return t, diags
}

// backupTargetToModel renders t as the model; prior (the plan or the
// previous state; nil for imports) gives the secret key, which no read
// returns, and the spellings of what the user left unset.
func backupTargetToModel(t *apiv1.BackupTarget, prior *backupTargetModel) (backupTargetModel, diag.Diagnostics) {
	var diags diag.Diagnostics
	meta, spec, st := t.GetMetadata(), t.GetSpec(), t.GetStatus()
	priorSelector := types.MapNull(types.StringType)
	if prior != nil {
		priorSelector = prior.NodeSelector
	}
	m := backupTargetModel{
		ID: types.StringValue(meta.GetName()), Name: types.StringValue(meta.GetName()),
		NodeSelector: mapFromAPI(spec.GetNodeSelector(), priorSelector, false, &diags),
		UID:          types.StringValue(meta.GetUid()), KeySet: types.BoolValue(st.GetKeySet()),
		Ready: types.BoolValue(false), Message: types.StringNull(),
	}
	for _, c := range st.GetConditions() {
		if c.GetType() == apiv1.ConditionReady {
			m.Ready, m.Message = types.BoolValue(c.GetStatus() == apiv1.ConditionTrue), optString(c.GetMessage())
			if c.GetStatus() == apiv1.ConditionTrue {
				m.Message = types.StringNull()
			}
		}
	}
	if d := spec.GetDirectory(); d != nil {
		m.Directory = &backupDirectoryModel{Path: types.StringValue(d.GetPath())}
	}
	if s := spec.GetS3(); s != nil {
		out := &backupS3Model{Endpoint: types.StringValue(s.GetEndpoint()), Bucket: types.StringValue(s.GetBucket()),
			Prefix: optString(s.GetPrefix()), Region: optString(s.GetRegion()), AccessKey: types.StringValue(s.GetAccessKey()),
			SecretKey: types.StringNull(), CACert: optString(s.GetCaCert())}
		if prior != nil && prior.S3 != nil {
			out.SecretKey = prior.S3.SecretKey
		}
		m.S3 = out
	}
	return m, diags
}

// mergeBackupTarget applies the configuration's spec onto the stored
// target, keeping labels and annotations.
func mergeBackupTarget(cur, want *apiv1.BackupTarget) *apiv1.BackupTarget {
	next := proto.Clone(cur).(*apiv1.BackupTarget)
	next.Spec = proto.Clone(want.GetSpec()).(*apiv1.BackupTargetSpec)
	return next
}
