package remotestore

import (
	"context"

	"google.golang.org/grpc"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// Backups watches VirtualMachineBackups over the API (a node agent:
// those labelled with its node).
type Backups struct {
	c BackupWatcher
}

// BackupWatcher is the watch of the backup service.
type BackupWatcher interface {
	Watch(ctx context.Context, in *apiv1.WatchBackupsRequest, opts ...grpc.CallOption) (apiv1.Backups_WatchClient, error)
}

// NewBackups returns the adapter over c.
func NewBackups(c BackupWatcher) *Backups { return &Backups{c: c} }

// Watch is as VMIs.Watch.
func (r *Backups) Watch(ctx context.Context, opts store.WatchOptions) (<-chan store.Event[*apiv1.VirtualMachineBackup], error) {
	stream, err := r.c.Watch(ctx, &apiv1.WatchBackupsRequest{Options: watchOptions(opts)})
	if err != nil {
		return nil, fromStatus(err)
	}
	return events[*apiv1.VirtualMachineBackup](ctx, stream.Recv), nil
}

// BackupRestores watches VirtualMachineBackupRestores over the API (a
// node agent: those labelled with its node).
type BackupRestores struct {
	c BackupRestoreWatcher
}

// BackupRestoreWatcher is the watch of the backup restore service.
type BackupRestoreWatcher interface {
	Watch(ctx context.Context, in *apiv1.WatchBackupRestoresRequest, opts ...grpc.CallOption) (apiv1.BackupRestores_WatchClient, error)
}

// NewBackupRestores returns the adapter over c.
func NewBackupRestores(c BackupRestoreWatcher) *BackupRestores { return &BackupRestores{c: c} }

// Watch is as VMIs.Watch.
func (r *BackupRestores) Watch(ctx context.Context, opts store.WatchOptions) (<-chan store.Event[*apiv1.VirtualMachineBackupRestore], error) {
	stream, err := r.c.Watch(ctx, &apiv1.WatchBackupRestoresRequest{Options: watchOptions(opts)})
	if err != nil {
		return nil, fromStatus(err)
	}
	return events[*apiv1.VirtualMachineBackupRestore](ctx, stream.Recv), nil
}
