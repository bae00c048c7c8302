// Package migration is the migration controller: KubeVirt's
// pkg/virt-controller/watch/migration over virtplane's objects. It drives
// a VirtualMachineInstanceMigration through Pending, Scheduling,
// Scheduled, PreparingTarget, TargetReady and Running to Succeeded or
// Failed: it enforces the parallelism limits, places the target (through
// the VMI controller's placement), hands the migration to the nodes by
// writing the instance's migration_state, follows what the target and
// source node agents report there, cancels on deletion, times out targets
// that never get ready, and keeps the newest finalized migrations per
// instance. docs/migration.md describes the whole flow.
package migration

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/virtplane/terraform-provider-virtplane/internal/api/migrationdest"
	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller"
	"github.com/virtplane/terraform-provider-virtplane/internal/informer"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// Options are the cluster's migration settings (KubeVirt's
// spec.configuration.migrations); zero values get KubeVirt's defaults.
type Options struct {
	// ParallelMigrationsPerCluster bounds migrations between Scheduling
	// and Running. Default 5.
	ParallelMigrationsPerCluster int
	// ParallelOutboundMigrationsPerNode bounds them per source node.
	// Default 2.
	ParallelOutboundMigrationsPerNode int
	// BandwidthMiBPerSecond caps each migration's stream; 0 is unlimited.
	BandwidthMiBPerSecond int64
	// CompletionTimeoutPerGiB and ProgressTimeout are the source
	// launcher's abort rules. Default 150s each.
	CompletionTimeoutPerGiB time.Duration
	ProgressTimeout         time.Duration
	// MaxDowntime is libvirt's tolerated switch-over downtime; 0 keeps
	// libvirt's default (300 ms).
	MaxDowntime       time.Duration
	AllowAutoConverge bool
	AllowPostCopy     bool
	// TLS encrypts QEMU's migration stream (libvirt's migrate_tls; the
	// nodes need libvirt's TLS certificates).
	TLS bool
	// Destinations is how sources reach targets (libvirtd's transport and
	// port) and which addresses nodes may register: every migration's
	// destination is built by it from the target's registration.
	Destinations migrationdest.Policy
	// UnschedulableTimeout fails a migration whose target fits nowhere
	// for this long (KubeVirt: 5 minutes for an unschedulable target pod).
	UnschedulableTimeout time.Duration
	// TargetTimeout fails a migration whose target is not ready this long
	// after the handoff (KubeVirt: 15 minutes for a pending target pod).
	TargetTimeout time.Duration
	// KeepFinalized is how many ended migrations are kept per instance.
	// Default 5.
	KeepFinalized int
	// LockedBy names the snapshot or restore that holds VM ns/name (its
	// status.snapshot_in_progress or restore_in_progress), or "". A
	// migration of that VM's instance waits in Pending meanwhile: an
	// online snapshot's overlay and copy are the source node's, and the
	// launcher refuses a freeze during a migration the other way round.
	// Nil: no VM is ever locked.
	LockedBy func(namespace, name string) string
	Clock    func() time.Time
}

func (o *Options) complete() {
	if o.ParallelMigrationsPerCluster <= 0 {
		o.ParallelMigrationsPerCluster = 5
	}
	if o.ParallelOutboundMigrationsPerNode <= 0 {
		o.ParallelOutboundMigrationsPerNode = 2
	}
	if o.CompletionTimeoutPerGiB <= 0 {
		o.CompletionTimeoutPerGiB = 150 * time.Second
	}
	if o.ProgressTimeout <= 0 {
		o.ProgressTimeout = 150 * time.Second
	}
	if o.UnschedulableTimeout <= 0 {
		o.UnschedulableTimeout = 5 * time.Minute
	}
	if o.TargetTimeout <= 0 {
		o.TargetTimeout = 15 * time.Minute
	}
	if o.KeepFinalized <= 0 {
		o.KeepFinalized = 5
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
}

// configuration is what the nodes run a migration with.
func (o *Options) configuration() *apiv1.MigrationConfiguration {
	return &apiv1.MigrationConfiguration{
		BandwidthMibPerSecond:          o.BandwidthMiBPerSecond,
		CompletionTimeoutPerGibSeconds: int64(o.CompletionTimeoutPerGiB / time.Second),
		ProgressTimeoutSeconds:         int64(o.ProgressTimeout / time.Second),
		AllowAutoConverge:              o.AllowAutoConverge,
		AllowPostCopy:                  o.AllowPostCopy,
		MaxDowntimeMs:                  o.MaxDowntime.Milliseconds(),
		Tls:                            o.TLS,
	}
}

// TargetPlacer chooses the target node: the VMI controller's placement
// (resources, node selectors, images) over every node but the source.
type TargetPlacer interface {
	PlaceMigrationTarget(vmi *apiv1.VirtualMachineInstance, addedSelector map[string]string) (node, message string)
}

// MigrationWriter is what the controller writes to migrations:
// compare-and-swap updates of what it read from the cache, and deletions
// of old finalized ones.
type MigrationWriter interface {
	Update(ctx context.Context, m *apiv1.VirtualMachineInstanceMigration) (*apiv1.VirtualMachineInstanceMigration, error)
	Delete(ctx context.Context, namespace, name string, opts store.DeleteOptions) (*apiv1.VirtualMachineInstanceMigration, bool, error)
}

// VMIWriter is the instance write it makes: the handoff, an abort
// request, a failure before the source started.
type VMIWriter interface {
	Update(ctx context.Context, vmi *apiv1.VirtualMachineInstance) (*apiv1.VirtualMachineInstance, error)
}

// Controller runs migrations.
type Controller struct {
	opts    Options
	migInf  *informer.Informer[*apiv1.VirtualMachineInstanceMigration]
	vmiInf  *informer.Informer[*apiv1.VirtualMachineInstance]
	nodeInf *informer.Informer[*apiv1.Node]
	placer  TargetPlacer
	migs    MigrationWriter
	vmis    VMIWriter
	log     *slog.Logger
	queue   controller.Queue

	// admitMu serialises the Pending → Scheduling decision, and promoted
	// counts the migrations it let through that the cache does not show
	// past Pending yet, so that two workers never both take the last slot.
	admitMu  sync.Mutex
	promoted map[string]string // migration uid → source node

	// vmiWrites and migWrites keep a reconcile from deciding on a cached
	// instance or migration older than this controller's own write of it
	// (the handoff not yet in the cache would read as a lost state).
	vmiWrites, migWrites *controller.WrittenVersions
}

// New registers the controller's index and handlers on the shared
// informers; call it before they run.
func New(opts Options, migs *informer.Informer[*apiv1.VirtualMachineInstanceMigration],
	vmis *informer.Informer[*apiv1.VirtualMachineInstance], nodes *informer.Informer[*apiv1.Node],
	placer TargetPlacer, migStore MigrationWriter, vmiStore VMIWriter, log *slog.Logger) *Controller {
	if migs.HasSynced() || vmis.HasSynced() || nodes.HasSynced() {
		panic("migration.New: informers already populated; create controllers before running their informers")
	}
	opts.complete()
	if log == nil {
		log = slog.Default()
	}
	c := &Controller{
		opts: opts, migInf: migs, vmiInf: vmis, nodeInf: nodes, placer: placer,
		migs: migStore, vmis: vmiStore, log: log.With("controller", "migration"),
		queue: controller.NewQueue("migration"), promoted: map[string]string{},
		vmiWrites: controller.NewWrittenVersions(), migWrites: controller.NewWrittenVersions(),
	}
	migs.AddIndex(controller.MigrationVMIIndex, controller.IndexMigrationByVMI)
	migs.AddHandler(informer.Handler[*apiv1.VirtualMachineInstanceMigration]{
		OnAdd:    func(m *apiv1.VirtualMachineInstanceMigration) { c.enqueue(m) },
		OnUpdate: c.migrationUpdated,
		OnDelete: c.migrationDeleted,
	})
	vmis.AddHandler(informer.Handler[*apiv1.VirtualMachineInstance]{
		OnAdd:    c.enqueueForVMI,
		OnUpdate: func(_, v *apiv1.VirtualMachineInstance) { c.enqueueForVMI(v) },
		OnDelete: c.enqueueForVMI,
	})
	nodes.AddHandler(informer.Handler[*apiv1.Node]{
		OnUpdate: func(old, n *apiv1.Node) {
			if nodeDown(old) != nodeDown(n) {
				c.enqueueActive()
			}
		},
		OnDelete: func(*apiv1.Node) { c.enqueueActive() },
	})
	return c
}

// Run waits for the caches and processes migrations until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	if !controller.WaitForSynced(ctx, c.queue, c.migInf.Synced(), c.vmiInf.Synced(), c.nodeInf.Synced()) {
		return
	}
	c.log.Info("starting", "workers", workers, "parallel_per_cluster", c.opts.ParallelMigrationsPerCluster,
		"parallel_outbound_per_node", c.opts.ParallelOutboundMigrationsPerNode)
	controller.Run(ctx, "migration", c.queue, workers, c, c.log)
}

func (c *Controller) enqueue(m *apiv1.VirtualMachineInstanceMigration) { c.queue.Add(informer.Key(m)) }

func (c *Controller) migrationUpdated(old, m *apiv1.VirtualMachineInstanceMigration) {
	c.enqueue(m)
	if !apiv1.IsMigrationFinal(old.GetStatus().GetPhase()) && apiv1.IsMigrationFinal(m.GetStatus().GetPhase()) {
		// A slot is free: the waiting ones may go.
		c.enqueuePending()
	}
}

func (c *Controller) migrationDeleted(m *apiv1.VirtualMachineInstanceMigration) {
	c.admitMu.Lock()
	delete(c.promoted, m.GetMetadata().GetUid())
	c.admitMu.Unlock()
	c.enqueuePending()
}

func (c *Controller) enqueueForVMI(v *apiv1.VirtualMachineInstance) {
	for _, m := range c.migInf.ByIndex(controller.MigrationVMIIndex, informer.Key(v)) {
		c.enqueue(m)
	}
}

func (c *Controller) enqueuePending() {
	for _, m := range c.migInf.List() {
		if p := m.GetStatus().GetPhase(); p == "" || p == apiv1.MigrationPending {
			c.enqueue(m)
		}
	}
}

func (c *Controller) enqueueActive() {
	for _, m := range c.migInf.List() {
		if !apiv1.IsMigrationFinal(m.GetStatus().GetPhase()) {
			c.enqueue(m)
		}
	}
}

// nodeDown reports a node the node controller marked not Ready (its
// agent stopped heartbeating).
func nodeDown(n *apiv1.Node) bool {
	return apiv1.FindCondition(n.GetStatus().GetConditions(), apiv1.ConditionReady).GetStatus() == apiv1.ConditionFalse
}
