package command

import (
	"context"
	"strconv"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/labels"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
)

// The kinds of backups_service.proto (docs/backups.md): backup targets
// (cluster-scoped, an admin's; reads never carry an S3 secret key),
// backups and backup restores (made by `backup create` and `backup
// restore`, or applied; their specs cannot change), and backup schedules
// (applied, updated in place).

var backupTargetResource = kind[*apiv1.BackupTarget, *apiv1.BackupTargetEvent]{
	resource: resource{
		Kind: apiv1.KindBackupTarget, Singular: "backuptarget",
		names:   []string{"backuptarget", "backuptargets", "bt"},
		columns: []string{"NAME", "KIND", "WHERE", "NODE-SELECTOR", "READY", "KEY-SET", "AGE"},
	},
	row: func(t *apiv1.BackupTarget, now time.Time) []string {
		kind, where, keySet := "directory", t.GetSpec().GetDirectory().GetPath(), none
		if s3 := t.GetSpec().GetS3(); s3 != nil {
			kind, where, keySet = "s3", s3.GetEndpoint()+"/"+s3.GetBucket(), boolString(t.GetStatus().GetKeySet())
			if p := s3.GetPrefix(); p != "" {
				where += "/" + p
			}
		}
		return []string{
			t.GetMetadata().GetName(), kind, cell(where),
			labels.FormatLabels(t.GetSpec().GetNodeSelector()),
			conditionStatus(t.GetStatus().GetConditions(), "Ready"),
			keySet,
			age(t.GetMetadata().GetCreationTimestamp(), now),
		}
	},
	get: func(ctx context.Context, c *client.Client, key *apiv1.ObjectKey) (*apiv1.BackupTarget, error) {
		return c.BackupTargets.Get(ctx, &apiv1.GetBackupTargetRequest{Name: key.GetName()})
	},
	list: func(ctx context.Context, c *client.Client, o *apiv1.ListOptions) ([]*apiv1.BackupTarget, error) {
		resp, err := c.BackupTargets.List(ctx, &apiv1.ListBackupTargetsRequest{LabelSelector: o.GetLabelSelector()})
		return resp.GetItems(), err
	},
	watch: func(ctx context.Context, c *client.Client, o *apiv1.WatchOptions) (client.Stream[*apiv1.BackupTargetEvent], error) {
		return c.BackupTargets.Watch(ctx, &apiv1.WatchBackupTargetsRequest{Options: o})
	},
	// An S3 target without its secret key cannot be created, yet is a
	// valid update that keeps the stored key (as a storage class's).
	create: func(ctx context.Context, c *client.Client, t *apiv1.BackupTarget) (*apiv1.BackupTarget, error) {
		if s3 := t.GetSpec().GetS3(); s3 != nil && s3.GetSecretKey() == "" {
			if _, err := c.BackupTargets.Get(ctx, &apiv1.GetBackupTargetRequest{Name: t.GetMetadata().GetName()}); err == nil {
				return nil, status.Errorf(codes.AlreadyExists, "backup target %q exists", t.GetMetadata().GetName())
			}
		}
		return c.BackupTargets.Create(ctx, &apiv1.CreateBackupTargetRequest{BackupTarget: t})
	},
	update: func(ctx context.Context, c *client.Client, t *apiv1.BackupTarget) (*apiv1.BackupTarget, error) {
		return c.BackupTargets.Update(ctx, &apiv1.UpdateBackupTargetRequest{BackupTarget: t})
	},
	delete: func(ctx context.Context, c *client.Client, key *apiv1.ObjectKey) (*apiv1.BackupTarget, error) {
		return c.BackupTargets.Delete(ctx, &apiv1.DeleteBackupTargetRequest{Name: key.GetName()})
	},
}.define()

var backupResource = kind[*apiv1.VirtualMachineBackup, *apiv1.BackupEvent]{
	resource: resource{
		Kind: apiv1.KindBackup, Singular: "virtualmachinebackup", Namespaced: true,
		names: []string{"vmbackup", "vmbackups", "backup", "backups",
			"virtualmachinebackup", "virtualmachinebackups"},
		columns: []string{"NAME", "SOURCE", "TARGET", "PHASE", "NODE", "INCREMENTAL", "WRITTEN", "AGE"},
		// The backup's id in the target (what a restore names) and its base.
		wideColumns: []string{"ID", "BASE"},
	},
	row: func(b *apiv1.VirtualMachineBackup, now time.Time) []string {
		st := b.GetStatus()
		written, incremental := none, none
		if vols := st.GetVolumes(); len(vols) > 0 {
			var w int64
			inc := true
			for _, v := range vols {
				w += v.GetBytesWritten()
				inc = inc && v.GetIncremental()
			}
			written, incremental = formatBytes(w), boolString(inc)
		}
		return []string{
			b.GetMetadata().GetName(), cell(b.GetSpec().GetSource()), cell(b.GetSpec().GetTarget()),
			backupPhase(st.GetPhase()), cell(st.GetNodeName()), incremental, written,
			age(b.GetMetadata().GetCreationTimestamp(), now),
		}
	},
	wide: func(b *apiv1.VirtualMachineBackup) []string {
		return []string{cell(b.GetStatus().GetManifestId()), cell(b.GetStatus().GetBaseBackup())}
	},
	get: func(ctx context.Context, c *client.Client, key *apiv1.ObjectKey) (*apiv1.VirtualMachineBackup, error) {
		return c.Backups.Get(ctx, &apiv1.GetBackupRequest{Key: key})
	},
	list: paged(func(ctx context.Context, c *client.Client, o *apiv1.ListOptions) (*apiv1.ListBackupsResponse, error) {
		return c.Backups.List(ctx, &apiv1.ListBackupsRequest{Options: o})
	}),
	watch: func(ctx context.Context, c *client.Client, o *apiv1.WatchOptions) (client.Stream[*apiv1.BackupEvent], error) {
		return c.Backups.Watch(ctx, &apiv1.WatchBackupsRequest{Options: o})
	},
	create: func(ctx context.Context, c *client.Client, b *apiv1.VirtualMachineBackup) (*apiv1.VirtualMachineBackup, error) {
		return c.Backups.Create(ctx, &apiv1.CreateBackupRequest{Backup: b})
	},
	specDefaults: validation.DefaultBackup,
	delete: func(ctx context.Context, c *client.Client, key *apiv1.ObjectKey) (*apiv1.VirtualMachineBackup, error) {
		return c.Backups.Delete(ctx, &apiv1.DeleteBackupRequest{Key: key})
	},
}.define()

var backupScheduleResource = kind[*apiv1.VirtualMachineBackupSchedule, *apiv1.BackupScheduleEvent]{
	resource: resource{
		Kind: apiv1.KindBackupSchedule, Singular: "virtualmachinebackupschedule", Namespaced: true,
		names: []string{"vmbackupschedule", "vmbackupschedules", "backupschedule", "backupschedules",
			"virtualmachinebackupschedule", "virtualmachinebackupschedules"},
		columns:     []string{"NAME", "SOURCE", "TARGET", "SCHEDULE", "SUSPEND", "LAST-BACKUP", "NEXT", "READY", "AGE"},
		wideColumns: []string{"KEEP-LAST", "KEEP-DAILY", "KEEP-WEEKLY", "LAST-SUCCESS"},
	},
	row: func(s *apiv1.VirtualMachineBackupSchedule, now time.Time) []string {
		st := s.GetStatus()
		return []string{
			s.GetMetadata().GetName(), cell(s.GetSpec().GetSource()), cell(s.GetSpec().GetTarget()), cell(s.GetSpec().GetSchedule()),
			boolString(s.GetSpec().GetSuspend()), cell(st.GetLastBackup()), timestampCell(st.GetNextTime()),
			conditionStatus(st.GetConditions(), "Ready"),
			age(s.GetMetadata().GetCreationTimestamp(), now),
		}
	},
	wide: func(s *apiv1.VirtualMachineBackupSchedule) []string {
		r := s.GetSpec().GetRetention()
		return []string{itoa32(r.GetKeepLast()), itoa32(r.GetKeepDaily()), itoa32(r.GetKeepWeekly()), cell(s.GetStatus().GetLastSuccessfulBackup())}
	},
	get: func(ctx context.Context, c *client.Client, key *apiv1.ObjectKey) (*apiv1.VirtualMachineBackupSchedule, error) {
		return c.BackupSchedules.Get(ctx, &apiv1.GetBackupScheduleRequest{Key: key})
	},
	list: paged(func(ctx context.Context, c *client.Client, o *apiv1.ListOptions) (*apiv1.ListBackupSchedulesResponse, error) {
		return c.BackupSchedules.List(ctx, &apiv1.ListBackupSchedulesRequest{Options: o})
	}),
	watch: func(ctx context.Context, c *client.Client, o *apiv1.WatchOptions) (client.Stream[*apiv1.BackupScheduleEvent], error) {
		return c.BackupSchedules.Watch(ctx, &apiv1.WatchBackupSchedulesRequest{Options: o})
	},
	create: func(ctx context.Context, c *client.Client, s *apiv1.VirtualMachineBackupSchedule) (*apiv1.VirtualMachineBackupSchedule, error) {
		return c.BackupSchedules.Create(ctx, &apiv1.CreateBackupScheduleRequest{BackupSchedule: s})
	},
	update: func(ctx context.Context, c *client.Client, s *apiv1.VirtualMachineBackupSchedule) (*apiv1.VirtualMachineBackupSchedule, error) {
		return c.BackupSchedules.Update(ctx, &apiv1.UpdateBackupScheduleRequest{BackupSchedule: s})
	},
	delete: func(ctx context.Context, c *client.Client, key *apiv1.ObjectKey) (*apiv1.VirtualMachineBackupSchedule, error) {
		return c.BackupSchedules.Delete(ctx, &apiv1.DeleteBackupScheduleRequest{Key: key})
	},
}.define()

var backupRestoreResource = kind[*apiv1.VirtualMachineBackupRestore, *apiv1.BackupRestoreEvent]{
	resource: resource{
		Kind: apiv1.KindBackupRestore, Singular: "virtualmachinebackuprestore", Namespaced: true,
		names: []string{"vmbackuprestore", "vmbackuprestores", "backuprestore", "backuprestores",
			"virtualmachinebackuprestore", "virtualmachinebackuprestores"},
		columns: []string{"NAME", "TARGET", "BACKUP", "VM", "PHASE", "NODE", "AGE"},
	},
	row: func(r *apiv1.VirtualMachineBackupRestore, now time.Time) []string {
		return []string{
			r.GetMetadata().GetName(), cell(r.GetSpec().GetTarget()), cell(r.GetSpec().GetBackupId()), cell(r.GetSpec().GetVmName()),
			backupPhase(r.GetStatus().GetPhase()), cell(r.GetStatus().GetNodeName()),
			age(r.GetMetadata().GetCreationTimestamp(), now),
		}
	},
	get: func(ctx context.Context, c *client.Client, key *apiv1.ObjectKey) (*apiv1.VirtualMachineBackupRestore, error) {
		return c.BackupRestores.Get(ctx, &apiv1.GetBackupRestoreRequest{Key: key})
	},
	list: paged(func(ctx context.Context, c *client.Client, o *apiv1.ListOptions) (*apiv1.ListBackupRestoresResponse, error) {
		return c.BackupRestores.List(ctx, &apiv1.ListBackupRestoresRequest{Options: o})
	}),
	watch: func(ctx context.Context, c *client.Client, o *apiv1.WatchOptions) (client.Stream[*apiv1.BackupRestoreEvent], error) {
		return c.BackupRestores.Watch(ctx, &apiv1.WatchBackupRestoresRequest{Options: o})
	},
	create: func(ctx context.Context, c *client.Client, r *apiv1.VirtualMachineBackupRestore) (*apiv1.VirtualMachineBackupRestore, error) {
		return c.BackupRestores.Create(ctx, &apiv1.CreateBackupRestoreRequest{BackupRestore: r})
	},
	specDefaults: validation.DefaultBackupRestore,
	delete: func(ctx context.Context, c *client.Client, key *apiv1.ObjectKey) (*apiv1.VirtualMachineBackupRestore, error) {
		return c.BackupRestores.Delete(ctx, &apiv1.DeleteBackupRestoreRequest{Key: key})
	},
}.define()

// backupPhase is a backup's or backup restore's phase, Pending before
// its controller set one.
func backupPhase(p string) string {
	if p == "" {
		return apiv1.BackupPending
	}
	return p
}

func itoa32(n int32) string { return strconv.Itoa(int(n)) }
