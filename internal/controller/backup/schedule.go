package backup

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/robfig/cron/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/backup/repo"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller"
	"github.com/virtplane/terraform-provider-virtplane/internal/informer"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// ScheduleWriter writes a schedule's status, keeping every other
// writer's change.
type ScheduleWriter interface {
	GuaranteedUpdate(ctx context.Context, namespace, name string,
		fn func(*apiv1.VirtualMachineBackupSchedule) (*apiv1.VirtualMachineBackupSchedule, error)) (*apiv1.VirtualMachineBackupSchedule, error)
}

// scheduleIndex indexes backups by the schedule that made them.
const scheduleIndex = "backup.schedule" // "namespace/schedule"

// Reasons of a schedule's Ready condition.
const (
	reasonScheduled    = "Scheduled"
	reasonBadSchedule  = "InvalidSchedule"
	reasonRetention    = "RetentionFailed"
	reasonGCFailed     = "GCFailed"
	reasonSuspended    = "Suspended"
	maxMissedSchedules = 10000
)

// Schedules is the schedule controller: one backup at a time per
// schedule, on time (a time missed while no leader ran is made up once,
// not once per missed time), then retention over the backups it made.
type Schedules struct {
	opts      Options
	schedules *informer.Informer[*apiv1.VirtualMachineBackupSchedule]
	backups   *informer.Informer[*apiv1.VirtualMachineBackup]
	targetInf informer.Lister[*apiv1.BackupTarget]
	sSt       ScheduleWriter
	bSt       BackupWriter
	targets   Targets
	queue     controller.Queue
	log       *slog.Logger
	synced    []<-chan struct{}
}

// NewSchedules registers the controller's index and handlers.
func NewSchedules(opts Options, sInf *informer.Informer[*apiv1.VirtualMachineBackupSchedule],
	bInf *informer.Informer[*apiv1.VirtualMachineBackup], targetInf *informer.Informer[*apiv1.BackupTarget],
	sSt ScheduleWriter, bSt BackupWriter, targets Targets, log *slog.Logger) *Schedules {
	opts.complete()
	if log == nil {
		log = slog.Default()
	}
	c := &Schedules{
		opts: opts, schedules: sInf, backups: bInf, targetInf: targetInf, sSt: sSt, bSt: bSt, targets: targets,
		queue:  controller.NewQueue("backup-schedule"),
		log:    log.With("controller", "backup-schedule"),
		synced: []<-chan struct{}{sInf.Synced(), bInf.Synced(), targetInf.Synced()},
	}
	bInf.AddIndex(scheduleIndex, func(b *apiv1.VirtualMachineBackup) []string {
		if s := b.GetMetadata().GetLabels()[apiv1.LabelBackupSchedule]; s != "" {
			return []string{apiv1.Ref(b.GetMetadata().GetNamespace(), s)}
		}
		return nil
	})
	enqueue := func(s *apiv1.VirtualMachineBackupSchedule) { c.queue.Add(informer.Key(s)) }
	sInf.AddHandler(informer.Handler[*apiv1.VirtualMachineBackupSchedule]{
		OnAdd: enqueue,
		OnUpdate: func(old, s *apiv1.VirtualMachineBackupSchedule) {
			// Its own status writes need no pass; spec and deletion do.
			if !proto.Equal(old.GetSpec(), s.GetSpec()) {
				enqueue(s)
			}
		},
	})
	byBackup := func(b *apiv1.VirtualMachineBackup) {
		if s := b.GetMetadata().GetLabels()[apiv1.LabelBackupSchedule]; s != "" {
			c.queue.Add(apiv1.Ref(b.GetMetadata().GetNamespace(), s))
		}
	}
	bInf.AddHandler(informer.Handler[*apiv1.VirtualMachineBackup]{
		OnAdd: byBackup,
		OnUpdate: func(old, b *apiv1.VirtualMachineBackup) {
			if old.GetStatus().GetPhase() != b.GetStatus().GetPhase() || (old.GetMetadata().GetDeletionTimestamp() == nil) != (b.GetMetadata().GetDeletionTimestamp() == nil) {
				byBackup(b)
			}
		},
		OnDelete: byBackup,
	})
	return c
}

// Run processes schedules with workers goroutines until ctx ends.
func (c *Schedules) Run(ctx context.Context, workers int) {
	if !controller.WaitForSynced(ctx, c.queue, c.synced...) {
		return
	}
	controller.Run(ctx, "backup-schedule", c.queue, workers, c, c.log)
}

// Reconcile implements controller.Reconciler: retention, GC once the
// dropped backups are gone, then the next backup when it is due.
func (c *Schedules) Reconcile(ctx context.Context, key string) (controller.Result, error) {
	s, ok := c.schedules.GetByKey(key)
	if !ok || s.GetMetadata().GetDeletionTimestamp() != nil {
		return controller.Result{}, nil // its backups stay
	}
	now := c.opts.Clock.Now()
	cur := proto.Clone(s.GetStatus()).(*apiv1.VirtualMachineBackupScheduleStatus)
	if cur == nil {
		cur = &apiv1.VirtualMachineBackupScheduleStatus{}
	}
	next := proto.Clone(cur).(*apiv1.VirtualMachineBackupScheduleStatus)
	sched, err := validation.ParseBackupSchedule(s.GetSpec().GetSchedule())
	if err != nil {
		next.Conditions = apiv1.SetCondition(next.Conditions, &apiv1.Condition{Type: apiv1.ConditionReady, Status: apiv1.ConditionFalse,
			Reason: reasonBadSchedule, Message: "spec.schedule: " + err.Error()}, now)
		next.NextTime = nil
		return controller.Result{}, c.writeStatus(ctx, s, cur, next)
	}
	backups := c.backups.ByIndex(scheduleIndex, key)
	ready := &apiv1.Condition{Type: apiv1.ConditionReady, Status: apiv1.ConditionTrue, Reason: reasonScheduled}
	var errs []error

	// Retention, then GC once what it dropped is gone from the target.
	dropped, err := c.retain(ctx, s, backups, now)
	if err != nil {
		ready.Status, ready.Reason, ready.Message = apiv1.ConditionFalse, reasonRetention, err.Error()
		errs = append(errs, err)
	}
	if dropped {
		next.GcPending = true
	}
	if next.GcPending && !anyDeleting(backups) && !dropped {
		if err := c.gc(ctx, s); err != nil {
			ready.Status, ready.Reason, ready.Message = apiv1.ConditionFalse, reasonGCFailed, err.Error()
			errs = append(errs, err)
		} else {
			next.GcPending = false
			next.LastGcTime = timestamppb.New(now)
		}
	}
	if last := newestSucceeded(backups); last != nil {
		next.LastSuccessfulBackup = last.GetMetadata().GetName()
		next.LastSuccessTime = last.GetStatus().GetCompleted()
	}

	// The next backup.
	var requeue time.Duration
	switch {
	case s.GetSpec().GetSuspend():
		next.NextTime = nil
		if ready.Status == apiv1.ConditionTrue {
			ready.Reason, ready.Message = reasonSuspended, "spec.suspend: no new backups"
		}
	default:
		lastAt := s.GetMetadata().GetCreationTimestamp().AsTime()
		if t := next.GetLastScheduleTime(); t != nil {
			lastAt = t.AsTime()
		}
		due := sched.Next(lastAt)
		switch {
		case due.After(now):
			next.NextTime = timestamppb.New(due)
			requeue = due.Sub(now)
		case anyActive(backups):
			// One at a time: the running backup's end brings this back.
			next.NextTime = timestamppb.New(due)
		default:
			at := latestDue(sched, due, now)
			name := apiv1.ScheduledBackupName(s.GetMetadata().GetName(), at.Unix())
			if err := c.createBackup(ctx, s, name); err != nil {
				errs = append(errs, err)
				break
			}
			next.LastBackup = name
			next.LastScheduleTime = timestamppb.New(at)
			n := sched.Next(at)
			next.NextTime = timestamppb.New(n)
			requeue = n.Sub(now)
		}
		if ready.Status == apiv1.ConditionTrue && next.NextTime != nil {
			ready.Message = "next backup at " + next.NextTime.AsTime().UTC().Format(time.RFC3339)
		}
	}
	next.Conditions = apiv1.SetCondition(next.Conditions, ready, now)
	if err := c.writeStatus(ctx, s, cur, next); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return controller.Result{}, err
	}
	if requeue > 0 {
		return controller.Result{RequeueAfter: requeue}, nil
	}
	return controller.Result{}, nil
}

// latestDue is the latest time of sched at or before now, given due, the
// first one after the last backup (due ≤ now): the times missed in
// between are made up by one backup, not one each.
func latestDue(sched cron.Schedule, due, now time.Time) time.Time {
	if every, ok := sched.(cron.ConstantDelaySchedule); ok && every.Delay > 0 {
		n := now.Sub(due) / every.Delay
		return due.Add(n * every.Delay)
	}
	at := due
	for range maxMissedSchedules {
		n := sched.Next(at)
		if n.IsZero() || n.After(now) {
			break
		}
		at = n
	}
	return at
}

func anyActive(backups []*apiv1.VirtualMachineBackup) bool {
	for _, b := range backups {
		if b.GetMetadata().GetDeletionTimestamp() == nil && !apiv1.BackupFinal(b.GetStatus().GetPhase()) {
			return true
		}
	}
	return false
}

func anyDeleting(backups []*apiv1.VirtualMachineBackup) bool {
	for _, b := range backups {
		if b.GetMetadata().GetDeletionTimestamp() != nil {
			return true
		}
	}
	return false
}

// newestSucceeded is the newest succeeded backup of backups not being
// deleted, or nil.
func newestSucceeded(backups []*apiv1.VirtualMachineBackup) *apiv1.VirtualMachineBackup {
	var best *apiv1.VirtualMachineBackup
	for _, b := range backups {
		if b.GetStatus().GetPhase() == apiv1.BackupSucceeded && b.GetMetadata().GetDeletionTimestamp() == nil && (best == nil || newer(b, best)) {
			best = b
		}
	}
	return best
}

// createBackup makes the schedule's backup name. Its data goes with it
// (deletion policy Delete): retention deletes backups to free the
// target. One made by an earlier pass whose status write was lost is
// found by its name.
func (c *Schedules) createBackup(ctx context.Context, s *apiv1.VirtualMachineBackupSchedule, name string) error {
	md := s.GetMetadata()
	_, err := c.bSt.Create(ctx, &apiv1.VirtualMachineBackup{
		Metadata: &apiv1.ObjectMeta{Namespace: md.GetNamespace(), Name: name, Labels: map[string]string{apiv1.LabelBackupSchedule: md.GetName()}},
		Spec: &apiv1.VirtualMachineBackupSpec{
			Source: s.GetSpec().GetSource(), Target: s.GetSpec().GetTarget(), DeletionPolicy: apiv1.DeletionPolicyDelete,
		},
	})
	if err != nil && !errors.Is(err, store.ErrAlreadyExists) {
		return fmt.Errorf("creating backup %s of schedule %s: %w", name, informer.Key(s), err)
	}
	c.log.Info("scheduled backup created", "schedule", informer.Key(s), "backup", name)
	return nil
}

// retain deletes the succeeded backups of the schedule its retention
// drops (the backups' deletion deletes their manifests); dropped says
// whether it deleted any.
func (c *Schedules) retain(ctx context.Context, s *apiv1.VirtualMachineBackupSchedule, backups []*apiv1.VirtualMachineBackup, now time.Time) (dropped bool, err error) {
	r := s.GetSpec().GetRetention()
	p := repo.Retention{KeepLast: int(r.GetKeepLast()), KeepDaily: int(r.GetKeepDaily()), KeepWeekly: int(r.GetKeepWeekly())}
	byName := map[string]*apiv1.VirtualMachineBackup{}
	var infos []repo.ManifestInfo
	for _, b := range backups {
		if b.GetStatus().GetPhase() != apiv1.BackupSucceeded || b.GetMetadata().GetDeletionTimestamp() != nil {
			continue
		}
		byName[b.GetMetadata().GetName()] = b
		infos = append(infos, repo.ManifestInfo{ID: b.GetMetadata().GetName(), Created: b.GetMetadata().GetCreationTimestamp().AsTime()})
	}
	_, drop := repo.SelectRetention(infos, p, now.UTC())
	var errs []error
	for _, d := range drop {
		b := byName[d.ID]
		_, _, err := c.bSt.Delete(ctx, b.GetMetadata().GetNamespace(), b.GetMetadata().GetName(), store.DeleteOptions{UID: b.GetMetadata().GetUid()})
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			errs = append(errs, fmt.Errorf("deleting backup %s dropped by retention: %w", informer.Key(b), err))
			continue
		}
		dropped = true
		c.log.Info("retention deleted a backup", "schedule", informer.Key(s), "backup", b.GetMetadata().GetName(), "manifest", b.GetStatus().GetManifestId())
	}
	return dropped, errors.Join(errs...)
}

// gc runs the target's GC: the chunks of the backups retention deleted
// go once they are older than the repository's grace.
func (c *Schedules) gc(ctx context.Context, s *apiv1.VirtualMachineBackupSchedule) error {
	t, ok := c.targetInf.Get("", s.GetSpec().GetTarget())
	if !ok {
		return fmt.Errorf("backup target %q does not exist", s.GetSpec().GetTarget())
	}
	st, err := c.targets.Store(ctx, t)
	if err != nil {
		return fmt.Errorf("GC of target %s: %w", t.GetMetadata().GetName(), err)
	}
	stats, err := repo.New(st, c.opts.Repo).GC(ctx, 0)
	if err != nil {
		return fmt.Errorf("GC of target %s: %w", t.GetMetadata().GetName(), err)
	}
	c.log.Info("backup target GC", "schedule", informer.Key(s), "target", t.GetMetadata().GetName(), "manifests", stats.Manifests,
		"chunks_deleted", stats.ChunksDeleted, "bytes_deleted", stats.BytesDeleted, "chunks_within_grace", stats.ChunksKept)
	return nil
}

// writeStatus writes next unless it equals cur.
func (c *Schedules) writeStatus(ctx context.Context, s *apiv1.VirtualMachineBackupSchedule, cur, next *apiv1.VirtualMachineBackupScheduleStatus) error {
	if proto.Equal(cur, next) {
		return nil
	}
	uid := s.GetMetadata().GetUid()
	_, err := c.sSt.GuaranteedUpdate(ctx, s.GetMetadata().GetNamespace(), s.GetMetadata().GetName(), func(o *apiv1.VirtualMachineBackupSchedule) (*apiv1.VirtualMachineBackupSchedule, error) {
		if o.GetMetadata().GetUid() != uid {
			return nil, store.ErrNotFound
		}
		o.Status = next
		return o, nil
	})
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("writing the status of schedule %s: %w", informer.Key(s), err)
	}
	return nil
}
