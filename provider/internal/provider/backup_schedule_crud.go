package provider

import (
	"context"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// Create, read, update and delete of
// virtplane_virtual_machine_backup_schedule: one call each; the schedule
// controller makes the backups.

func (r *backupScheduleResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan backupScheduleModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() || !r.ready(&resp.Diagnostics, "create a backup schedule") {
		return
	}
	want := backupScheduleFromModel(&plan)
	id := apiv1.Ref(want.Metadata.Namespace, want.Metadata.Name)
	created, err := r.data.client.BackupSchedules.Create(ctx, &apiv1.CreateBackupScheduleRequest{BackupSchedule: want})
	if err != nil {
		r.addError(&resp.Diagnostics, err, "create backup schedule "+id)
		return
	}
	tflog.Info(ctx, "backup schedule created", map[string]any{"backup_schedule": id, "uid": created.GetMetadata().GetUid()})
	r.setState(ctx, &resp.State, &resp.Diagnostics, created, &plan)
}

func (r *backupScheduleResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state backupScheduleModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	ns, name := namespaceOrDefault(state.Namespace), state.Name.ValueString()
	id := apiv1.Ref(ns, name)
	if !r.readyToRefresh(req, resp, "read backup schedule "+id) {
		return
	}
	s, err := r.data.client.BackupSchedules.Get(ctx, &apiv1.GetBackupScheduleRequest{Key: &apiv1.ObjectKey{Namespace: ns, Name: name}})
	if !r.stillManaged(ctx, resp, id, state.UID.ValueString(), s.GetMetadata().GetUid(), err) {
		return
	}
	r.setState(ctx, &resp.State, &resp.Diagnostics, s, &state)
}

// Update writes the schedule, retention and suspend by compare-and-swap.
func (r *backupScheduleResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, state backupScheduleModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() || !r.ready(&resp.Diagnostics, "update a backup schedule") {
		return
	}
	want := backupScheduleFromModel(&plan)
	key := &apiv1.ObjectKey{Namespace: want.Metadata.Namespace, Name: want.Metadata.Name}
	id := apiv1.Ref(key.Namespace, key.Name)
	c := r.data.client
	s, _, err := updateCAS(tflog.SetField(ctx, "backup_schedule", id), "backup schedule "+id, state.UID.ValueString(),
		func(ctx context.Context) (*apiv1.VirtualMachineBackupSchedule, error) {
			return c.BackupSchedules.Get(ctx, &apiv1.GetBackupScheduleRequest{Key: key})
		},
		func(cur *apiv1.VirtualMachineBackupSchedule) *apiv1.VirtualMachineBackupSchedule {
			next := proto.Clone(cur).(*apiv1.VirtualMachineBackupSchedule)
			next.Spec = want.Spec
			return next
		},
		func(ctx context.Context, next *apiv1.VirtualMachineBackupSchedule) (*apiv1.VirtualMachineBackupSchedule, error) {
			return c.BackupSchedules.Update(ctx, &apiv1.UpdateBackupScheduleRequest{BackupSchedule: next})
		})
	if addCASError(&resp.Diagnostics, err, r.kind, id, r.addError) {
		return
	}
	r.setState(ctx, &resp.State, &resp.Diagnostics, s, &plan)
}

// Delete deletes the schedule Terraform created (by uid); its backups
// stay.
func (r *backupScheduleResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state backupScheduleModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() || !r.ready(&resp.Diagnostics, "delete a backup schedule") {
		return
	}
	ns, name := namespaceOrDefault(state.Namespace), state.Name.ValueString()
	_, err := r.data.client.BackupSchedules.Delete(ctx, &apiv1.DeleteBackupScheduleRequest{
		Key: &apiv1.ObjectKey{Namespace: ns, Name: name}, Options: &apiv1.DeleteOptions{Uid: state.UID.ValueString()}})
	switch {
	case err == nil, status.Code(err) == codes.NotFound:
	case status.Code(err) == codes.FailedPrecondition:
		resp.Diagnostics.AddWarning("Backup schedule "+apiv1.Ref(ns, name)+" was replaced outside Terraform",
			"The schedule Terraform created is already gone; the one now of that name was left alone.")
	default:
		r.addError(&resp.Diagnostics, err, "delete backup schedule "+apiv1.Ref(ns, name))
	}
}

func backupScheduleFromModel(m *backupScheduleModel) *apiv1.VirtualMachineBackupSchedule {
	s := &apiv1.VirtualMachineBackupSchedule{
		Metadata: &apiv1.ObjectMeta{Namespace: namespaceOrDefault(m.Namespace), Name: m.Name.ValueString()},
		Spec: &apiv1.VirtualMachineBackupScheduleSpec{Source: m.VirtualMachine.ValueString(), Target: m.Target.ValueString(),
			Schedule: m.Schedule.ValueString(), Suspend: m.Suspend.ValueBool()},
	}
	if r := m.Retention; r != nil {
		s.Spec.Retention = &apiv1.BackupRetention{KeepLast: int32(r.KeepLast.ValueInt64()), KeepDaily: int32(r.KeepDaily.ValueInt64()),
			KeepWeekly: int32(r.KeepWeekly.ValueInt64())}
	}
	return s
}

// setState writes s as state; the retention block keeps the prior's
// spelling of unset rules.
func (r *backupScheduleResource) setState(ctx context.Context, st stateSetter, diags *diag.Diagnostics, s *apiv1.VirtualMachineBackupSchedule, prior *backupScheduleModel) {
	md, sp, ss := s.GetMetadata(), s.GetSpec(), s.GetStatus()
	m := backupScheduleModel{
		ID: types.StringValue(apiv1.Ref(md.GetNamespace(), md.GetName())), Namespace: types.StringValue(md.GetNamespace()),
		Name: types.StringValue(md.GetName()), VirtualMachine: types.StringValue(sp.GetSource()), Target: types.StringValue(sp.GetTarget()),
		Schedule: types.StringValue(sp.GetSchedule()), Suspend: types.BoolValue(sp.GetSuspend()), UID: types.StringValue(md.GetUid()),
		LastBackup: optString(ss.GetLastBackup()), LastSuccessfulBackup: optString(ss.GetLastSuccessfulBackup()), NextTime: types.StringNull(),
	}
	if t := ss.GetNextTime(); t != nil {
		m.NextTime = types.StringValue(t.AsTime().UTC().Format(time.RFC3339))
	}
	if prior != nil && prior.Retention != nil {
		rt := sp.GetRetention()
		keep := func(p types.Int64, v int32) types.Int64 {
			if p.IsNull() && v == 0 {
				return p
			}
			return types.Int64Value(int64(v))
		}
		m.Retention = &backupRetentionModel{KeepLast: keep(prior.Retention.KeepLast, rt.GetKeepLast()),
			KeepDaily: keep(prior.Retention.KeepDaily, rt.GetKeepDaily()), KeepWeekly: keep(prior.Retention.KeepWeekly, rt.GetKeepWeekly())}
	} else if rt := sp.GetRetention(); rt != nil && (rt.GetKeepLast() != 0 || rt.GetKeepDaily() != 0 || rt.GetKeepWeekly() != 0) {
		// An import: a rule left at 0 is one the configuration does not
		// set.
		rule := func(v int32) types.Int64 {
			if v == 0 {
				return types.Int64Null()
			}
			return types.Int64Value(int64(v))
		}
		m.Retention = &backupRetentionModel{KeepLast: rule(rt.GetKeepLast()), KeepDaily: rule(rt.GetKeepDaily()), KeepWeekly: rule(rt.GetKeepWeekly())}
	}
	diags.Append(st.Set(ctx, &m)...)
}
