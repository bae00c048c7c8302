// Package launcher is the node agent's side of the launcher protocol: it
// starts virtplane-launcher processes through hashicorp/go-plugin,
// reattaches to them after the node agent restarts, and talks to them.
// libvirtd owns QEMU, and launchers run in their own session, so neither a
// node agent nor a launcher crash stops a guest.
package launcher

import (
	"context"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
)

// HandleVersion is the current Handle format; older ones are upgraded or
// refused by Manager.Reattach.
const HandleVersion = 1

// Handle is what the node agent persists to find a launcher again: the
// go-plugin reattach data plus the domain it manages.
type Handle struct {
	Version    int    `json:"version"`
	VMIUID     string `json:"vmi_uid"`
	VMIKey     string `json:"vmi_key"` // namespace/name
	DomainName string `json:"domain_name"`
	DomainUUID string `json:"domain_uuid,omitempty"`
	// go-plugin ReattachConfig, serialisable.
	Protocol        string `json:"protocol"`
	ProtocolVersion int    `json:"protocol_version"`
	Network         string `json:"network"` // "unix"
	Addr            string `json:"addr"`
	Pid             int    `json:"pid"`
}

// Manager starts and finds launchers.
type Manager interface {
	// Launch starts a new launcher for vmi. The domain is not touched
	// until Sync.
	Launch(ctx context.Context, vmi *apiv1.VirtualMachineInstance, domainName string) (Client, Handle, error)
	// Reattach connects to a running launcher; it fails fast (and does
	// not start anything) when the launcher is gone.
	Reattach(ctx context.Context, h Handle) (Client, error)
	// KillLauncher ends, with SIGKILL, the launcher process of a handle
	// that could not be reattached. Such a launcher may still run (hung):
	// it holds the domain's lock, so a replacement would be refused, and
	// its lease watchdog may be armed. The pid is checked first to be a
	// virtplane-launcher serving h's domain, so a reused pid is never
	// signalled; a process that is gone is not an error. It returns once
	// the process has exited. The domain is not touched.
	KillLauncher(ctx context.Context, h Handle) error
}

// Client talks to one launcher. Every call takes a context: a launcher
// that does not answer must not hang the node agent.
type Client interface {
	Sync(ctx context.Context, vmi *apiv1.VirtualMachineInstance, opts *launcherpb.SyncOptions) (*launcherpb.DomainStatus, error)
	Shutdown(ctx context.Context) (*launcherpb.DomainStatus, error)
	Kill(ctx context.Context) (*launcherpb.DomainStatus, error)
	Delete(ctx context.Context) (*launcherpb.DomainStatus, error)
	Pause(ctx context.Context) (*launcherpb.DomainStatus, error)
	Unpause(ctx context.Context) (*launcherpb.DomainStatus, error)
	GetDomain(ctx context.Context) (*launcherpb.DomainStatus, error)
	Ping(ctx context.Context) error
	// RenewLease arms or renews the launcher's self-fencing watchdog: the
	// domain is destroyed if validFor passes without another renewal.
	// 0 disarms it.
	RenewLease(ctx context.Context, validFor time.Duration) error
	// Events streams domain changes until ctx ends or the launcher goes.
	Events(ctx context.Context) (<-chan *launcherpb.DomainEvent, error)
	// Detach drops the connection and leaves the launcher running.
	Detach()
	// Stop ends the launcher process (after the domain was deleted).
	Stop(ctx context.Context) error
	Migrations
	Snapshots
	Hotplug
}

// Hotplug is a launcher's part in plugging disks into its running domain
// and unplugging them (docs/hotplug.md).
type Hotplug interface {
	// AttachDisk plugs the disk in; one plugged already is reported.
	AttachDisk(ctx context.Context, req *launcherpb.AttachDiskRequest) (*launcherpb.DiskAttachment, error)
	// DetachDisk asks the guest to release the disk (once) and waits up
	// to the request's wait for it to.
	DetachDisk(ctx context.Context, req *launcherpb.DetachDiskRequest) (*launcherpb.DiskAttachment, error)
	// Disks lists the live domain's disks.
	Disks(ctx context.Context) (*launcherpb.DiskList, error)
}

// Snapshots is a launcher's part in an online snapshot of its domain's
// persistent volumes (docs/snapshots.md): SnapshotDisks moves QEMU's
// writes to overlays, freezing the guest around it when a guest agent
// answers, so the volume files stand still to be copied; CommitDisks
// merges the overlays back and removes them, and is safe to repeat.
type Snapshots interface {
	SnapshotDisks(ctx context.Context, req *launcherpb.SnapshotDisksRequest) (*launcherpb.SnapshotDisksResponse, error)
	CommitDisks(ctx context.Context, req *launcherpb.CommitDisksRequest) error
	// Freeze and Thaw bracket snapshots the node agent takes itself (RBD
	// snapshots of volumes on a storage class): the guest's file systems
	// are frozen when a guest agent answers, and thawed by the launcher
	// itself if no Thaw comes in time.
	Freeze(ctx context.Context, req *launcherpb.FreezeRequest) (*launcherpb.SnapshotDisksResponse, error)
	Thaw(ctx context.Context) error
}

// Migrations is a launcher's part in a live migration: as the source it
// runs libvirt's job (Migrate, GetMigration, AbortMigration); as the
// target it defines the receiving domain (Incoming).
type Migrations interface {
	Migrate(ctx context.Context, req *launcherpb.MigrateRequest) (*launcherpb.MigrationStatus, error)
	GetMigration(ctx context.Context) (*launcherpb.MigrationStatus, error)
	AbortMigration(ctx context.Context) (*launcherpb.MigrationStatus, error)
	// Incoming defines the receiving domain (opts are needed only the
	// first time) and renews it for validFor (0: no expiry).
	Incoming(ctx context.Context, migrationUID string, vmi *apiv1.VirtualMachineInstance, opts *launcherpb.SyncOptions, validFor time.Duration) (*launcherpb.MigrationStatus, error)
}
