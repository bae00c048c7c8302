package server

import (
	"context"
	"log/slog"

	"k8s.io/utils/clock"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/backup/target"
	backupctl "github.com/virtplane/terraform-provider-virtplane/internal/controller/backup"
	"github.com/virtplane/terraform-provider-virtplane/internal/informer"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// backupInformers are the informers the backup controllers share with
// the others.
type backupInformers struct {
	snaps    *informer.Informer[*apiv1.VirtualMachineSnapshot]
	contents *informer.Informer[*apiv1.VirtualMachineSnapshotContent]
	vms      *informer.Informer[*apiv1.VirtualMachine]
	nodes    *informer.Informer[*apiv1.Node]
	classes  *informer.Informer[*apiv1.StorageClass]
}

// newBackupControllers builds the backup kinds' informers and
// controllers (docs/backups.md) for one leadership term; the returned
// func runs them with run, as runControllers runs its own.
func newBackupControllers(deps Deps, o Options, shared backupInformers, nodeGone func(string) bool, log *slog.Logger) func(ctx context.Context, run func(func())) {
	st := deps.Stores
	if st.Backups == nil || st.BackupTargets == nil || st.BackupSchedules == nil || st.BackupRestores == nil {
		return func(context.Context, func(func())) {}
	}
	targetInf := informer.New(st.BackupTargets, store.ListOptions{}, log.With("informer", "backuptarget"))
	backupInf := informer.New(st.Backups, store.ListOptions{}, log.With("informer", "backup"))
	schedInf := informer.New(st.BackupSchedules, store.ListOptions{}, log.With("informer", "backupschedule"))
	restoreInf := informer.New(st.BackupRestores, store.ListOptions{}, log.With("informer", "backuprestore"))
	opts := backupctl.Options{Clock: clock.RealClock{}, Cluster: o.ControllerOptions.ClusterName, NodeGone: nodeGone}
	// One cache of open targets for the term: the probes, retention's GC,
	// manifest deletes and restores' reads share connections.
	cache := target.NewCache()
	bc := backupctl.NewBackups(opts, backupInf, shared.snaps, shared.contents, shared.vms, shared.nodes, targetInf, shared.classes,
		st.Backups, st.Snapshots, cache, log)
	sc := backupctl.NewSchedules(opts, schedInf, backupInf, targetInf, st.BackupSchedules, st.Backups, cache, log)
	rc := backupctl.NewRestores(opts, validation.Options{ImageDir: o.ImageDir, HostPolicy: o.HostPolicy}, restoreInf, shared.vms, shared.nodes,
		targetInf, shared.classes, st.BackupRestores, st.VMs, cache, log)
	tc := backupctl.NewTargetProbes(opts, 0, targetInf, st.BackupTargets, cache, log)
	return func(ctx context.Context, run func(func())) {
		run(func() { targetInf.Run(ctx) })
		run(func() { backupInf.Run(ctx) })
		run(func() { schedInf.Run(ctx) })
		run(func() { restoreInf.Run(ctx) })
		// Backups are rare and their work is the nodes' and the targets':
		// two workers each.
		run(func() { bc.Run(ctx, 2) })
		run(func() { sc.Run(ctx, 2) })
		run(func() { rc.Run(ctx, 2) })
		run(func() { tc.Run(ctx, 2) })
	}
}
