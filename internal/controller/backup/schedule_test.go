package backup

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/robfig/cron/v3"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

func (f *fixture) newSchedule(schedule string, keepLast int32) {
	f.t.Helper()
	if _, err := f.scheds.Store.Create(context.Background(), &apiv1.VirtualMachineBackupSchedule{
		Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: "nightly"},
		Spec: &apiv1.VirtualMachineBackupScheduleSpec{Source: "web", Target: "nfs", Schedule: schedule,
			Retention: &apiv1.BackupRetention{KeepLast: keepLast}},
	}); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) reconcileSchedule() time.Duration {
	f.t.Helper()
	f.sync()
	res, err := f.sc.Reconcile(context.Background(), "default/nightly")
	if err != nil {
		f.t.Fatalf("reconcile schedule: %v", err)
	}
	f.sync()
	return res.RequeueAfter
}

func (f *fixture) scheduleBackups() []*apiv1.VirtualMachineBackup {
	f.t.Helper()
	items, _, err := f.backups.Store.List(context.Background(), store.ListOptions{LabelSelector: apiv1.LabelBackupSchedule + "=nightly"})
	if err != nil {
		f.t.Fatal(err)
	}
	return items
}

// A schedule makes its backup when it is due, one at a time, and a
// backup's name says the time it was made for.
func TestScheduleMakesOneBackupAtATime(t *testing.T) {
	f := newFixture(t)
	f.newSchedule("@every 1m", 0)
	if d := f.reconcileSchedule(); d != time.Minute || len(f.scheduleBackups()) != 0 {
		t.Fatalf("before the first time: requeue %v, backups %d", d, len(f.scheduleBackups()))
	}
	f.clock.Step(time.Minute)
	f.reconcileSchedule()
	bs := f.scheduleBackups()
	if len(bs) != 1 || bs[0].Metadata.Name != apiv1.ScheduledBackupName("nightly", t0.Add(time.Minute).Unix()) ||
		bs[0].Spec.DeletionPolicy != apiv1.DeletionPolicyDelete || bs[0].Spec.Target != "nfs" {
		t.Fatalf("at the first time: %v", bs)
	}
	s := f.scheds.Get(t, "default", "nightly")
	if s.Status.LastBackup != bs[0].Metadata.Name || !s.Status.NextTime.AsTime().Equal(t0.Add(2*time.Minute)) {
		t.Fatalf("status after the first backup: %v", s.Status)
	}
	// The first still runs when the second is due: none made.
	f.clock.Step(90 * time.Second)
	f.reconcileSchedule()
	if n := len(f.scheduleBackups()); n != 1 {
		t.Fatalf("%d backups while the first runs, want 1", n)
	}
	// It ends: the one due is made, for the latest time that passed.
	f.backups.Update(t, "default", bs[0].Metadata.Name, func(b *apiv1.VirtualMachineBackup) {
		b.Status = &apiv1.VirtualMachineBackupStatus{Phase: apiv1.BackupFailed}
	})
	f.reconcileSchedule()
	if bs = f.scheduleBackups(); len(bs) != 2 {
		t.Fatalf("%d backups after the first ended, want 2", len(bs))
	}
}

// Times missed while no leader ran are made up by one backup, for the
// latest of them, not one each.
func TestScheduleMakesUpMissedTimesOnce(t *testing.T) {
	f := newFixture(t)
	f.newSchedule("*/5 * * * *", 0)
	f.reconcileSchedule()
	f.clock.Step(47 * time.Minute) // 10:47: 9 times missed
	f.reconcileSchedule()
	bs := f.scheduleBackups()
	want := apiv1.ScheduledBackupName("nightly", time.Date(2026, 11, 23, 10, 45, 0, 0, time.UTC).Unix())
	if len(bs) != 1 || bs[0].Metadata.Name != want {
		t.Fatalf("after 47 minutes down: %d backups %v, want one, %s", len(bs), bs, want)
	}
	if at := latestDue(cron.Every(10*time.Second), t0.Add(10*time.Second), t0.Add(time.Hour+3*time.Second)); !at.Equal(t0.Add(time.Hour)) {
		t.Fatalf("latest due of @every 10s an hour later: %v", at)
	}
}

// Retention deletes the schedule's succeeded backups it drops (their
// manifests go with them, policy Delete), never a backup a user made;
// the target's GC runs once they are gone.
func TestScheduleRetentionDeletesAndCollects(t *testing.T) {
	f := newFixture(t)
	f.newSchedule("@every 1h", 2)
	var names []string
	for i := range 3 {
		name := apiv1.ScheduledBackupName("nightly", f.clock.Now().Unix())
		if _, err := f.backups.Store.Create(context.Background(), &apiv1.VirtualMachineBackup{
			Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: name, Labels: map[string]string{apiv1.LabelBackupSchedule: "nightly"}},
			Spec:     &apiv1.VirtualMachineBackupSpec{Source: "web", Target: "nfs", DeletionPolicy: apiv1.DeletionPolicyDelete},
			Status:   &apiv1.VirtualMachineBackupStatus{Phase: apiv1.BackupSucceeded, ManifestId: "x"},
		}); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
		f.clock.Step(time.Duration(i+1) * time.Minute)
	}
	f.newBackup("by-hand")
	f.backups.Update(t, "default", "by-hand", func(b *apiv1.VirtualMachineBackup) { b.Status.Phase = apiv1.BackupSucceeded })
	f.reconcileSchedule()
	var left []string
	for _, b := range f.scheduleBackups() {
		left = append(left, b.Metadata.Name)
	}
	if strings.Join(left, ",") != strings.Join(names[1:], ",") {
		t.Fatalf("after retention keep_last 2: %v, want %v", left, names[1:])
	}
	f.backup("by-hand")
	s := f.scheds.Get(t, "default", "nightly")
	if !s.Status.GcPending || s.Status.LastGcTime != nil {
		t.Fatalf("status after retention: %v", s.Status)
	}
	// The dropped backup is gone (no finalizer here): GC runs.
	f.reconcileSchedule()
	if s = f.scheds.Get(t, "default", "nightly"); s.Status.GcPending || s.Status.LastGcTime == nil {
		t.Fatalf("status after GC: %v", s.Status)
	}
}
