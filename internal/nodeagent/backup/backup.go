// Package backup is the node's part of backups (docs/backups.md): for a
// backup labelled with this node it uploads the snapshot's volumes to the
// target — a local (or shared filesystem) qcow2 copy read in place
// (repo.OpenQCOW2: holes are never read) and written with repo.WriteRaw
// (chunk dedup against the base backup and the target), an rbd volume's
// RBD snapshot streamed by `rbd export-diff` (from the base backup's RBD
// snapshot when it still exists) into repo.WriteRBDDiff — then writes
// the manifest, last, and removes the snapshot's local copies. For a
// backup restore labelled with it, it writes each volume of the manifest
// for the new VM: a file restored into a raw sparse file and converted to
// qcow2 beside the volume's path, an rbd image imported under a scratch
// name; each made visible (renamed) only when complete, and everything
// removed when anything fails.
package backup

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"sync"
	"time"

	"google.golang.org/grpc"
	"k8s.io/utils/clock"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/backup/repo"
	"github.com/virtplane/terraform-provider-virtplane/internal/client/remotestore"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/disks"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/nodedir"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/nodework"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/storage"
)

// BackupAPI is the backup service as the node uses it: it watches the
// backups of its node and writes their status.
type BackupAPI interface {
	remotestore.BackupWatcher
	UpdateStatus(ctx context.Context, in *apiv1.UpdateBackupStatusRequest, opts ...grpc.CallOption) (*apiv1.VirtualMachineBackup, error)
}

// RestoreAPI is the backup restore service as the node uses it.
type RestoreAPI interface {
	remotestore.BackupRestoreWatcher
	UpdateStatus(ctx context.Context, in *apiv1.UpdateBackupRestoreStatusRequest, opts ...grpc.CallOption) (*apiv1.VirtualMachineBackupRestore, error)
}

// TargetAPI hands the node a target with its secret key, for a backup or
// restore of its own.
type TargetAPI interface {
	Connect(ctx context.Context, in *apiv1.ConnectBackupTargetRequest, opts ...grpc.CallOption) (*apiv1.BackupTargetConnection, error)
}

// Classes is what backups need of the node's storage room: the rbd and
// shared filesystem classes of the volumes.
type Classes interface {
	Lookup(ctx context.Context, name string) (*storage.Class, error)
}

// Images reads the size of a qcow2 volume and converts a restored raw
// sparse file to one (disks.QemuImg).
type Images interface {
	ConvertRaw(ctx context.Context, raw, qcow2 string) error
	Info(ctx context.Context, path string) (disks.ImageInfo, error)
}

// Options configure the role.
type Options struct {
	NodeName string
	Backups  BackupAPI
	Restores RestoreAPI
	Targets  TargetAPI
	Layout   nodedir.Layout
	// Classes are the storage classes the node uses; nil when it has none.
	Classes Classes
	// Images converts volumes; nil is disks.QemuImg{}.
	Images Images
	// Repo are the options of the repositories opened (chunk size,
	// concurrency); its Clock defaults to Clock.
	Repo repo.Options
	// ProgressInterval is how often progress is written at most
	// (default 2 s).
	ProgressInterval time.Duration
	// CallTimeout bounds a status write.
	CallTimeout time.Duration
	// GCPeriod is how often scratch directories of objects that are gone
	// are looked for (default 1 m).
	GCPeriod time.Duration
	Clock    clock.WithTicker
	Logger   *slog.Logger
}

func (o *Options) complete() {
	if o.Images == nil {
		o.Images = disks.QemuImg{}
	}
	if o.ProgressInterval <= 0 {
		o.ProgressInterval = 2 * time.Second
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = 30 * time.Second
	}
	if o.GCPeriod <= 0 {
		o.GCPeriod = time.Minute
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Repo.Clock == nil {
		o.Repo.Clock = o.Clock
	}
	o.Repo.Logger = o.Logger
}

// Role is the node's part of backups and backup restores.
type Role struct {
	opts     Options
	log      *slog.Logger
	uploads  *nodework.Worker[*apiv1.VirtualMachineBackup]
	restores *nodework.Worker[*apiv1.VirtualMachineBackupRestore]
	// working holds the uids whose transfer runs now: their scratch
	// directories are not collected.
	working sync.Map
}

// workers: one transfer of each kind at a time; they read or write
// whole volumes.
const workers = 1

// New returns the role; Run starts it.
func New(opts Options) *Role {
	opts.complete()
	r := &Role{opts: opts, log: opts.Logger.With("role", "backup")}
	r.uploads = nodework.New(nodework.Options[*apiv1.VirtualMachineBackup]{
		Name: "backup", Kind: "backup",
		Watch:    remotestore.NewBackups(opts.Backups),
		Selector: apiv1.LabelNodeName + "=" + opts.NodeName,
		Stops:    backupStops,
		UpdateStatus: func(ctx context.Context, b *apiv1.VirtualMachineBackup) (*apiv1.VirtualMachineBackup, error) {
			return opts.Backups.UpdateStatus(ctx, &apiv1.UpdateBackupStatusRequest{Backup: b})
		},
		InitStatus: func(b *apiv1.VirtualMachineBackup) {
			if b.Status == nil {
				b.Status = &apiv1.VirtualMachineBackupStatus{}
			}
		},
		CallTimeout: opts.CallTimeout, Logger: r.log,
	})
	r.restores = nodework.New(nodework.Options[*apiv1.VirtualMachineBackupRestore]{
		Name: "backup-restore", Kind: "backup restore",
		Watch:    remotestore.NewBackupRestores(opts.Restores),
		Selector: apiv1.LabelNodeName + "=" + opts.NodeName,
		Stops:    restoreStops,
		UpdateStatus: func(ctx context.Context, rs *apiv1.VirtualMachineBackupRestore) (*apiv1.VirtualMachineBackupRestore, error) {
			return opts.Restores.UpdateStatus(ctx, &apiv1.UpdateBackupRestoreStatusRequest{BackupRestore: rs})
		},
		InitStatus: func(rs *apiv1.VirtualMachineBackupRestore) {
			if rs.Status == nil {
				rs.Status = &apiv1.VirtualMachineBackupRestoreStatus{}
			}
		},
		CallTimeout: opts.CallTimeout, Logger: r.log,
	})
	return r
}

// backupStops: the node must stop uploading b and keep nothing.
func backupStops(b *apiv1.VirtualMachineBackup) bool {
	return b.GetMetadata().GetDeletionTimestamp() != nil || b.GetStatus().GetPhase() == apiv1.BackupFailed
}

// restoreStops: the node must stop writing for r and keep nothing.
func restoreStops(r *apiv1.VirtualMachineBackupRestore) bool {
	return r.GetMetadata().GetDeletionTimestamp() != nil || r.GetStatus().GetPhase() == apiv1.BackupFailed
}

// Run runs both workers and the collection of scratch directories; the
// returned func stops them.
func (r *Role) Run(ctx context.Context) (stop func()) {
	stopUploads := r.uploads.Run(ctx, workers, controller.ReconcileFunc(r.ReconcileBackup), r.gcLoop)
	stopRestores := r.restores.Run(ctx, workers, controller.ReconcileFunc(r.ReconcileRestore))
	return func() {
		stopUploads()
		stopRestores()
	}
}

func (r *Role) gcLoop(ctx context.Context) {
	t := r.opts.Clock.NewTicker(r.opts.GCPeriod)
	defer t.Stop()
	for {
		r.CollectDirs()
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

// CollectDirs removes the scratch directories of backups and restores
// this node no longer has, once both informers have synced.
func (r *Role) CollectDirs() {
	if !r.uploads.Inf.HasSynced() || !r.restores.Inf.HasSynced() {
		return
	}
	entries, err := os.ReadDir(r.opts.Layout.BackupsDir())
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			r.log.Warn("listing backup scratch directories", "err", err)
		}
		return
	}
	known := map[string]bool{}
	for _, b := range r.uploads.Inf.List() {
		known[b.GetMetadata().GetUid()] = true
	}
	for _, rs := range r.restores.Inf.List() {
		known[rs.GetMetadata().GetUid()] = true
	}
	for _, e := range entries {
		if known[e.Name()] || r.busy(e.Name()) {
			continue
		}
		if err := r.opts.Layout.RemoveBackupWorkDir(e.Name()); err != nil {
			r.log.Warn("removing a backup scratch directory", "name", e.Name(), "err", err)
		}
	}
}

func (r *Role) busy(uid string) bool { _, ok := r.working.Load(uid); return ok }
