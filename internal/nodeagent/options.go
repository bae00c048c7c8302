package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"runtime"
	"time"

	"google.golang.org/grpc"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/clock"

	"github.com/virtplane/terraform-provider-virtplane/internal/adopt"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/migrationdest"
	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client/remotestore"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/adoption"
	nodebackup "github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/backup"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/console"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/disks"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/imagepull"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/restore"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/snapshot"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/state"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/storage"
)

// Defaults of Options.
const (
	DefaultReservedMemory   = "512Mi"
	DefaultResyncPeriod     = 30 * time.Second
	DefaultLivenessInterval = 2 * time.Second
	// DefaultLauncherGrace is how long a VMI's launcher may be unreachable
	// before the VMI is failed: KubeVirt's 3 minutes, which it extended to
	// Running VMIs after they were failed during handler restarts (pain
	// point #9).
	DefaultLauncherGrace = 3 * time.Minute
	// DefaultACPIInterval is how often ACPI shutdown is re-sent: a booting
	// guest may miss the first press (KubeVirt: every ≤5 s).
	DefaultACPIInterval = 5 * time.Second
	// DefaultSlowStartWindow is how long a Scheduled VMI's defined but
	// stopped domain counts as still starting (KubeVirt: 5 minutes).
	DefaultSlowStartWindow = 5 * time.Minute
	// DefaultStorageStartTimeout bounds the start of a domain with an
	// rbd disk: a start takes under a second, a monitor that does not
	// answer fails it in about ceph.ConnectTimeout, and only an OSD that
	// does not answer holds it longer (docs/notes/storage-probes.md).
	DefaultStorageStartTimeout = time.Minute
)

// API is the control plane as the node agent uses it, each service
// narrowed to the calls the agent makes.
type API struct {
	// VMIs is watched (through an informer) for the VMIs placed on this
	// node, and takes their status writes; required.
	VMIs apiv1.VirtualMachineInstancesClient
	// Nodes registers the node and takes its heartbeats; required.
	Nodes NodeReporter
	// VMs tells whether a VM still exists, before its files are removed;
	// required.
	VMs VMReader
	// Consoles carry console sessions, one per server of the control
	// plane (console.Options.APIs); none serves none.
	Consoles []console.API
	// Images are watched and pulled (package imagepull); nil pulls none.
	Images imagepull.WatchAPI
	// ImageUploads serves the images sent by `image upload`; nil pulls
	// none of them.
	ImageUploads imagepull.Uploads
	// SnapshotContents labelled with this node are copied here (package
	// snapshot) and Restores labelled with it staged and swapped here
	// (package restore); nil takes no part in snapshots or restores.
	SnapshotContents snapshot.API
	Restores         restore.API
	// StorageClasses are the classes volumes may live on (package
	// storage); nil makes every volume on a class fail on this node.
	StorageClasses storage.API
	// Exports labelled with this node are served here (package export);
	// required with Options.ExportAddress.
	Exports remotestore.ExportWatcher
	// Backups and BackupRestores labelled with this node are uploaded
	// and written here, to and from the BackupTargets it connects to
	// (package backup); nil (any of the three) takes no part in backups.
	Backups        nodebackup.BackupAPI
	BackupRestores nodebackup.RestoreAPI
	BackupTargets  nodebackup.TargetAPI
	// Adoptions labelled with this node are mapped and taken over here
	// (package adoption); nil adopts nothing.
	Adoptions adoption.API
}

// VolumeCopier copies and merges the qcow2 files of snapshots and
// restores (disks.QemuImg).
type VolumeCopier interface {
	snapshot.Copier
}

var _ VolumeCopier = disks.QemuImg{}

// MigrationOptions are where this node receives live migrations: the
// address it registers, which QEMU's stream and the sources' libvirtds
// (on the cluster's transport and port, the server's configuration)
// connect to. Without an address the node takes no migrations.
type MigrationOptions struct {
	// Address is an IP of this node the other nodes reach: a unicast IP
	// literal (migrationdest.ParseAddress).
	Address string
}

// NodeReporter is what registration and heartbeats need of the node
// service.
type NodeReporter interface {
	Register(ctx context.Context, in *apiv1.RegisterNodeRequest, opts ...grpc.CallOption) (*apiv1.Node, error)
	Heartbeat(ctx context.Context, in *apiv1.HeartbeatRequest, opts ...grpc.CallOption) (*apiv1.HeartbeatResponse, error)
}

// VMReader is what the VM directory collector needs of the VM service.
type VMReader interface {
	Get(ctx context.Context, in *apiv1.GetVirtualMachineRequest, opts ...grpc.CallOption) (*apiv1.VirtualMachine, error)
}

// Timing are the agent's periods and timeouts; a zero field takes its
// default.
type Timing struct {
	// ResyncPeriod: every VMI is handled again this often.
	ResyncPeriod time.Duration
	// LivenessInterval is how often launchers are pinged.
	LivenessInterval time.Duration
	// PingTimeout is how long a ping may take before the launcher counts
	// as hung; default LivenessInterval.
	PingTimeout time.Duration
	// LauncherGrace is how long a launcher may be unreachable before its
	// VMI fails.
	LauncherGrace time.Duration
	// ACPIInterval is how often ACPI shutdown is re-sent.
	ACPIInterval time.Duration
	// SlowStartWindow is how long a Scheduled VMI's defined but stopped
	// domain counts as still starting.
	SlowStartWindow time.Duration
	// ReattachTimeout bounds a reattach: a launcher that does not answer
	// quickly is treated as gone (fail fast). Default 2 s.
	ReattachTimeout time.Duration
	// CallTimeout bounds launcher calls other than Sync; default 10 s.
	CallTimeout time.Duration
	// SyncTimeout bounds Sync, which may define and boot a domain;
	// default 2 min.
	SyncTimeout time.Duration
	// StorageStartTimeout bounds the start of a domain with an rbd disk,
	// after which its launcher destroys it: librados waits for an OSD
	// without end. Default DefaultStorageStartTimeout; under SyncTimeout.
	StorageStartTimeout time.Duration
	// VMDirGCPeriod is how often the files of deleted VMs are looked
	// for; default DefaultVMDirGCPeriod.
	VMDirGCPeriod time.Duration
	// ImageRefreshPeriod is how often ImageDir is looked at for the
	// node's image list; zero leaves the image inventory's default
	// (disks.DefaultImageRefreshPeriod).
	ImageRefreshPeriod time.Duration
	// NetworkRefreshPeriod is how often the node's bridges and libvirt
	// networks are listed; zero leaves netinventory.DefaultRefreshPeriod.
	NetworkRefreshPeriod time.Duration
	// MigrationPoll is how often a running migration is looked at (its
	// progress reported, a target's receiving domain renewed); default 1s.
	MigrationPoll time.Duration
	// IncomingLease is how long a receiving domain outlives its agent's
	// last renewal; default 10s.
	IncomingLease time.Duration
	// DetachWait is how long one pass waits for a guest to release an
	// unplugged disk (DefaultDetachWait), DetachTimeout how long a guest
	// may hold it before its volume status says it does not
	// (DefaultDetachTimeout).
	DetachWait, DetachTimeout time.Duration
}

func (t *Timing) complete() {
	setDefault(&t.ResyncPeriod, DefaultResyncPeriod)
	setDefault(&t.LivenessInterval, DefaultLivenessInterval)
	setDefault(&t.PingTimeout, t.LivenessInterval)
	setDefault(&t.LauncherGrace, DefaultLauncherGrace)
	setDefault(&t.ACPIInterval, DefaultACPIInterval)
	setDefault(&t.SlowStartWindow, DefaultSlowStartWindow)
	setDefault(&t.ReattachTimeout, 2*time.Second)
	setDefault(&t.CallTimeout, 10*time.Second)
	setDefault(&t.SyncTimeout, 2*time.Minute)
	setDefault(&t.StorageStartTimeout, DefaultStorageStartTimeout)
	setDefault(&t.DetachWait, DefaultDetachWait)
	setDefault(&t.DetachTimeout, DefaultDetachTimeout)
	setDefault(&t.VMDirGCPeriod, DefaultVMDirGCPeriod)
	setDefault(&t.MigrationPoll, time.Second)
	setDefault(&t.IncomingLease, 10*time.Second)
}

// Options configure an Agent.
type Options struct {
	// NodeName is this node's name; required.
	NodeName string
	// API is the control plane; required but for Consoles.
	API API
	// Launchers starts and reattaches launcher processes; required.
	Launchers launcher.Manager
	// Tools runs `virtplane-launcher probe|list-domains|list-networks`;
	// nil runs LauncherPath.
	Tools LauncherTools
	// Images inspects images and creates disks; nil runs qemu-img.
	Images disks.ImageTool
	// Copier copies the volumes of snapshots and restores; nil runs
	// qemu-img.
	Copier VolumeCopier
	// State is the local database; nil opens <NodeDataDir>/state.db.
	State state.StateDB
	// NodeDataDir holds the state database and per-VMI directories;
	// required.
	NodeDataDir string
	// ImageDir is the node image directory images are resolved in;
	// required, absolute.
	ImageDir string
	// LibvirtURI is handed to the launcher tools; default qemu:///system.
	LibvirtURI string
	// BridgeNetNS is the network namespace whose Linux bridges the node
	// advertises (/proc/PID/ns/net, /run/netns/NAME): the one its
	// libvirtd and QEMU use. Empty: the namespace of the daemon listening
	// on LibvirtURI's socket (package hostns), else the agent's own.
	BridgeNetNS string
	// ListBridges replaces listing BridgeNetNS's bridges (tests).
	ListBridges func(ctx context.Context) ([]string, error)
	// Migration says where this node receives live migrations.
	Migration MigrationOptions
	// ExportAddress is the IP:port this node serves VM exports at
	// (package export, docs/export.md); empty serves none.
	ExportAddress string
	// ImageSourceDirs are the directories Images' file:// URLs may name;
	// none refuses file:// sources.
	ImageSourceDirs []string
	// AdoptDirs are the directories whose files adopted domains' disks may
	// be (docs/adopt.md; the agent's --adopt-dir): none refuses every
	// disk. They are resolved when the agent starts, and may not overlap
	// NodeDataDir or ImageDir.
	AdoptDirs []string
	// AdoptNVRAMDirs are where an adopted domain's EFI variables may be
	// copied from besides AdoptDirs; nil is libvirt's own directory
	// (adoption.DefaultNVRAMDir).
	AdoptNVRAMDirs []string
	// LauncherPath is the virtplane-launcher binary for the default Tools.
	LauncherPath string
	// QEMUPidDir is where the node's libvirtd writes QEMU pid files, as
	// the launchers are told (launcher.ManagerOptions.QEMUPidDir); ""
	// is launcher.DefaultQEMUPidDir. The inspection of a domain to adopt
	// reads its QEMU pid there.
	QEMUPidDir string
	// ReservedMemory is kept from guests: allocatable = capacity minus
	// this; nil means DefaultReservedMemory.
	ReservedMemory *resource.Quantity
	AgentVersion   string
	// Labels are what the node registers with besides LabelKVM, which
	// the agent sets: only the node's own, under apiv1.NodeLabelPrefix
	// (CheckLabels). The others of its Node are set by admins.
	Labels map[string]string
	// Host overrides what is read from /proc and /dev (tests).
	Host *HostFacts

	// Workers is how many VMIs are handled at once; default
	// DefaultWorkers.
	Workers int
	Timing  Timing

	// Clock times what the agent times itself (see the package doc):
	// leases, the launcher grace and pings, the shutdown grace period,
	// registration retries and its loops; the real clock when nil. Lease
	// arithmetic uses its monotonic reading. The work queue's requeues
	// and backoff, and deadlines of calls (Timing's timeouts but
	// PingTimeout), are real time.
	Clock  clock.WithTickerAndDelayedExecution
	Logger *slog.Logger
}

func (o *Options) complete() error {
	switch {
	case o.NodeName == "":
		return errors.New("node name is required")
	case o.API.VMIs == nil || o.API.Nodes == nil || o.API.VMs == nil:
		return errors.New("API VMIs, Nodes and VMs are required")
	case o.Launchers == nil:
		return errors.New("launcher manager is required")
	case o.NodeDataDir == "":
		return errors.New("node data dir is required")
	case !filepath.IsAbs(o.ImageDir):
		return fmt.Errorf("image dir %q must be an absolute path", o.ImageDir)
	}
	if err := CheckLabels(o.Labels); err != nil {
		return err
	}
	dirs, err := adopt.CheckDirs(o.AdoptDirs, o.NodeDataDir, o.ImageDir)
	if err != nil {
		return err
	}
	o.AdoptDirs = dirs
	if o.LibvirtURI == "" {
		o.LibvirtURI = launcher.DefaultLibvirtURI
	}
	if a := o.Migration.Address; a != "" {
		// Registration would refuse it; saying so at start is clearer.
		if _, err := migrationdest.ParseAddress(a); err != nil {
			return fmt.Errorf("migration address %q %w", a, err)
		}
	}
	if o.Tools == nil {
		o.Tools = ExecTools{Path: o.LauncherPath}
	}
	if o.Copier == nil {
		o.Copier = disks.QemuImg{}
	}
	if o.ReservedMemory == nil {
		q := resource.MustParse(DefaultReservedMemory)
		o.ReservedMemory = &q
	}
	setDefault(&o.Workers, DefaultWorkers)
	o.Timing.complete()
	if o.Timing.StorageStartTimeout >= o.Timing.SyncTimeout {
		return fmt.Errorf("the storage start timeout (%s) must be under the Sync timeout (%s)", o.Timing.StorageStartTimeout, o.Timing.SyncTimeout)
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return nil
}

// DefaultWorkers is how many VMIs the agent handles at once: twice the
// host's CPUs, at least 4. Starting a guest is CPU-bound (QEMU, libvirtd,
// the launcher): on two cores, 100 VMs created 100 ms apart reached
// Running with P50 0.88–1.10× raw libvirt at 2–4 workers and 1.20× at 8,
// 1.31× at 16, which only adds contention (docs/performance.md).
var DefaultWorkers = max(4, 2*runtime.NumCPU())

func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}
