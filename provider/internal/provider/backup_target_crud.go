package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// Create, read, update and delete of virtplane_backup_target: one call
// each (the server probes the target on its own; ready and message say
// what it found at the last read). The secret key goes to the agent at
// create and whenever the configuration changes it, never otherwise.

func (r *backupTargetResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan backupTargetModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() || !r.ready(&resp.Diagnostics, "create a backup target") {
		return
	}
	want, d := backupTargetFromModel(ctx, &plan)
	resp.Diagnostics.Append(d...)
	if resp.Diagnostics.HasError() {
		return
	}
	name := want.GetMetadata().GetName()
	created, err := r.data.client.BackupTargets.Create(ctx, &apiv1.CreateBackupTargetRequest{BackupTarget: want})
	if err != nil {
		r.addError(&resp.Diagnostics, err, "create backup target "+name)
		return
	}
	tflog.Info(ctx, "backup target created", map[string]any{"backup_target": name, "uid": created.GetMetadata().GetUid()})
	r.setState(ctx, &resp.State, &resp.Diagnostics, created, &plan)
}

func (r *backupTargetResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state backupTargetModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	name := state.Name.ValueString()
	if !r.readyToRefresh(req, resp, "read backup target "+name) {
		return
	}
	t, err := r.data.client.BackupTargets.Get(ctx, &apiv1.GetBackupTargetRequest{Name: name})
	if !r.stillManaged(ctx, resp, name, state.UID.ValueString(), t.GetMetadata().GetUid(), err) {
		return
	}
	r.setState(ctx, &resp.State, &resp.Diagnostics, t, &state)
}

// Update writes the node selector, region, keys and CA by compare-and-
// swap; an unchanged secret key is not sent (the agent keeps its own).
func (r *backupTargetResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, state backupTargetModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() || !r.ready(&resp.Diagnostics, "update a backup target") {
		return
	}
	want, d := backupTargetFromModel(ctx, &plan)
	resp.Diagnostics.Append(d...)
	if resp.Diagnostics.HasError() {
		return
	}
	if s3 := want.GetSpec().GetS3(); s3 != nil && state.S3 != nil && !state.S3.SecretKey.IsNull() && state.S3.SecretKey.ValueString() == s3.SecretKey {
		s3.SecretKey = ""
	}
	name := want.GetMetadata().GetName()
	c := r.data.client
	t, written, err := updateCAS(tflog.SetField(ctx, "backup_target", name), "backup target "+name, state.UID.ValueString(),
		func(ctx context.Context) (*apiv1.BackupTarget, error) {
			return c.BackupTargets.Get(ctx, &apiv1.GetBackupTargetRequest{Name: name})
		},
		func(cur *apiv1.BackupTarget) *apiv1.BackupTarget { return mergeBackupTarget(cur, want) },
		func(ctx context.Context, next *apiv1.BackupTarget) (*apiv1.BackupTarget, error) {
			return c.BackupTargets.Update(ctx, &apiv1.UpdateBackupTargetRequest{BackupTarget: next})
		})
	if addCASError(&resp.Diagnostics, err, r.kind, name, r.addError) {
		return
	}
	if written {
		tflog.Info(ctx, "backup target updated", map[string]any{"backup_target": name, "key_sent": want.GetSpec().GetS3().GetSecretKey() != ""})
	}
	r.setState(ctx, &resp.State, &resp.Diagnostics, t, &plan)
}

// Delete deletes the target Terraform created (by uid), which the agent
// refuses while a backup, schedule or restore names it.
func (r *backupTargetResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state backupTargetModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() || !r.ready(&resp.Diagnostics, "delete a backup target") {
		return
	}
	name := state.Name.ValueString()
	c := r.data.client
	deleteCreated(ctx, &r.configuredResource, &resp.Diagnostics, name, state.UID.ValueString(),
		func(ctx context.Context) (*apiv1.BackupTarget, error) {
			return c.BackupTargets.Get(ctx, &apiv1.GetBackupTargetRequest{Name: name})
		},
		func(ctx context.Context) error {
			_, err := c.BackupTargets.Delete(ctx, &apiv1.DeleteBackupTargetRequest{Name: name})
			return err
		},
		"backup target deleted",
		"When those schedules are in this configuration, make them refer to the target "+
			"(target = virtplane_backup_target.<name>.name), so that Terraform destroys them first; backups with "+
			"deletion_policy Retain keep their data in the target after their objects are deleted.")
}

func (r *backupTargetResource) setState(ctx context.Context, st stateSetter, diags *diag.Diagnostics, t *apiv1.BackupTarget, prior *backupTargetModel) {
	m, d := backupTargetToModel(t, prior)
	diags.Append(d...)
	if d.HasError() {
		return
	}
	diags.Append(st.Set(ctx, &m)...)
}
