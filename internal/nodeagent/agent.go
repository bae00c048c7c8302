// Package nodeagent is virtplane's node agent, KubeVirt's virt-handler
// without Kubernetes: it registers the node and keeps its fencing lease,
// watches the VMIs placed on the node, and drives one launcher process per
// VMI (internal/launcher) to converge the libvirt domain on the VMI, in
// KubeVirt's order: shutdown, then delete, then update.
//
// Nothing is lost when the agent restarts: every launcher handle is saved
// in a local database (package state) before the VMI is reported Running,
// and a restarted agent reattaches to its launchers instead of starting
// guests again. The agent is built without cgo; libvirt lives in the
// launchers.
//
// The Agent owns registration, heartbeats and the node lease with its
// self-fencing, reattaching after a restart, the launcher connections
// (package launchers) and the state database, the collector of deleted
// VMs' files, and Run, which starts its roles. The roles, as KubeVirt
// splits virt-handler into controllers, each take narrow interfaces and
// never import this package:
//
//   - the handler (handler.go, update.go, shutdown.go): decide, then
//     shutdown, delete or update one VMI;
//   - the migration source and target (package migration), which take
//     over an instance while a migration decides what this node does;
//   - snapshots and restores (packages snapshot and restore, on package
//     nodework), copying and swapping volume files;
//   - image pulls (imagepull.Controller).
//
// Below them: package vmistatus writes VMI statuses for all of them,
// package console serves consoles, package disks prepares a VMI's files
// and lists the node's images, package nodedir lays out the node data
// directory, and package state keeps the local database.
//
// The agent reads and waits on Options.Clock for what it times itself:
// the node lease and the launchers' leases, the launcher grace, the
// slow-start window, the shutdown grace period, liveness pings and their
// timeout, registration retries, and its periodic loops (heartbeats,
// resync, VM directory collection, image listing, console reconnection
// and log polling); tests step a fake clock instead of sleeping. Two
// things run on real time: the work queue (controller.NewQueue) waits out
// a pass's RequeueAfter and the per-key failure backoff on its own clock,
// so a requeued VMI is handled again after real time (tests drive those
// passes themselves), and call deadlines (Timing's timeouts but
// PingTimeout) are context deadlines.
package nodeagent

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client/remotestore"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller"
	"github.com/virtplane/terraform-provider-virtplane/internal/guestnet"
	"github.com/virtplane/terraform-provider-virtplane/internal/imagepolicy"
	"github.com/virtplane/terraform-provider-virtplane/internal/informer"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/adoption"
	nodebackup "github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/backup"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/console"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/disks"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/export"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/imagepull"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/launchers"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/migration"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/nodedir"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/restore"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/snapshot"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/state"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/storage"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/vmistatus"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// Agent is a node agent.
type Agent struct {
	opts   Options // completed: defaults filled in
	log    *slog.Logger
	nodes  NodeReporter
	vms    VMReader
	db     state.StateDB
	ownsDB bool
	queue  controller.Queue
	vmis   *informer.Informer[*apiv1.VirtualMachineInstance]
	// targets are the instances migrating to this node (by the
	// migration-target label), which are not this node's yet.
	targets *informer.Informer[*apiv1.VirtualMachineInstance]

	launchers *launchers.Set
	lease     leaseTracker
	layout    nodedir.Layout
	status    *vmistatus.Writer
	console   consoleRoom
	images    imageList
	networks  networkList
	// storage is the storage classes of the node (nil without
	// Options.API.StorageClasses).
	storage *storage.Classes
	// firewall is the guest firewall, once Run started it (nil when the
	// node's guests are not QEMU processes on this host).
	firewall atomic.Pointer[guestnet.Firewall]
	// imagePolicy is the server's image download policy, from the last
	// heartbeat that carried one.
	imagePolicy imagepolicy.Current

	// The roles: the handler and the migration source and target work on
	// the VMI queue; the others have queues of their own. pulls, snaps
	// and restores are nil without Options.API.Images, SnapshotContents
	// and Restores.
	handler    *handler
	migrations *migration.Roles
	pulls      *imagepull.Controller
	snaps      *snapshot.Contents
	restores   *restore.Restores
	// exports serves VM exports (nil without Options.ExportAddress), with
	// the certificate registered as exportCert.
	exports    *export.Server
	exportCert []byte
	backups    *nodebackup.Role
	// adoptions is nil without Options.API.Adoptions (adoptions.go).
	adoptions *adoption.Role

	// host is what registration reported; set by Run before the
	// handler starts.
	host HostFacts

	// gcKick asks the VM directory collector for an early pass.
	gcKick chan struct{}

	closeOnce sync.Once
}

// New checks opts and opens the state database; call Run next, or Close
// if Run is never called.
func New(opts Options) (*Agent, error) {
	if err := opts.complete(); err != nil {
		return nil, fmt.Errorf("node agent: %w", err)
	}
	a := &Agent{
		opts: opts, nodes: opts.API.Nodes, vms: opts.API.VMs,
		log:    opts.Logger.With("component", "nodeagent", "node", opts.NodeName),
		queue:  controller.NewQueue("nodeagent"),
		gcKick: make(chan struct{}, 1),
		db:     opts.State,
		layout: nodedir.Layout{Root: opts.NodeDataDir},
		status: &vmistatus.Writer{API: opts.API.VMIs, Clock: opts.Clock},
	}
	if opts.Host != nil {
		a.host = *opts.Host
	}
	// Before the state database creates it 0700: QEMU must traverse it.
	if err := nodedir.MkdirTraversable(opts.NodeDataDir); err != nil {
		return nil, fmt.Errorf("node agent: creating %s: %w", opts.NodeDataDir, err)
	}
	if err := os.Chmod(opts.NodeDataDir, 0o711); err != nil {
		return nil, fmt.Errorf("node agent: %w", err)
	}
	if a.db == nil {
		db, err := state.OpenBolt(a.layout.StateDBPath())
		if err != nil {
			return nil, fmt.Errorf("node agent: %w", err)
		}
		a.db, a.ownsDB = db, true
	}
	a.launchers = launchers.New(launchers.Options{
		Manager: opts.Launchers, Records: a.db, Enqueue: a.queue.Add, Arm: a.renewLease,
		ReattachTimeout: opts.Timing.ReattachTimeout, CallTimeout: opts.Timing.CallTimeout, PingTimeout: opts.Timing.PingTimeout,
		Clock: opts.Clock, Logger: a.log,
	})
	a.console = console.New(console.Options{NodeName: opts.NodeName, APIs: opts.API.Consoles, Instances: consoleInstances{a},
		Layout: a.layout, Clock: opts.Clock, Logger: a.log})
	a.images = disks.NewInventory(disks.InventoryOptions{ImageDir: opts.ImageDir, RefreshPeriod: opts.Timing.ImageRefreshPeriod,
		Clock: opts.Clock, Logger: a.log})
	a.networks = newNetworkInventory(opts, a)
	a.vmis = informer.New[*apiv1.VirtualMachineInstance](remotestore.NewVMIs(opts.API.VMIs),
		store.ListOptions{LabelSelector: apiv1.LabelNodeName + "=" + opts.NodeName}, a.log.With("informer", "vmi"))
	a.targets = informer.New[*apiv1.VirtualMachineInstance](remotestore.NewVMIs(opts.API.VMIs),
		store.ListOptions{LabelSelector: apiv1.LabelMigrationTargetNode + "=" + opts.NodeName}, a.log.With("informer", "migration-target"))
	enqueue := func(v *apiv1.VirtualMachineInstance) { a.queue.Add(informer.Key(v)) }
	for _, inf := range []*informer.Informer[*apiv1.VirtualMachineInstance]{a.vmis, a.targets} {
		inf.AddHandler(informer.Handler[*apiv1.VirtualMachineInstance]{
			OnAdd:    enqueue,
			OnUpdate: func(_, v *apiv1.VirtualMachineInstance) { enqueue(v) },
			OnDelete: enqueue,
		})
	}
	if err := a.newRoles(); err != nil {
		return nil, fmt.Errorf("node agent: %w", err)
	}
	return a, nil
}

// newRoles makes the agent's roles (see the package doc), each given
// the parts of the agent it works with.
func (a *Agent) newRoles() error {
	o := a.opts
	progress := diskProgress{a.status}
	var classes disks.Classes
	if api := o.API.StorageClasses; api != nil {
		a.storage = storage.New(storage.Options{API: api, Dir: a.layout.StorageDir(), NetNS: func() string { return bridgeNetNS(o) },
			ConfDir: a.cephConfDir(), Firewall: storageFirewall{a}, Clock: o.Clock, Logger: a.log})
		classes = a.storage
	}
	a.newAdoptionRole()
	h := &handler{
		node: o.NodeName, timing: &a.opts.Timing, clock: o.Clock, log: a.log,
		db: a.db, launchers: a.launchers, status: a.status, api: o.API.VMIs, vmis: a.vmis,
		lease: &a.lease, arm: a.renewLease, layout: a.layout, console: a.console, host: &a.host, vmEnded: a.kickVMDirGC,
		disks: disks.New(disks.Options{ImageDir: o.ImageDir, Layout: a.layout, Images: o.Images,
			MaxVirtualSize: a.maxVirtualSize, Progress: progress, Classes: classes, NodeName: o.NodeName,
			StorageStartTimeout: o.Timing.StorageStartTimeout, Adopted: a.adoptedSources(), Clock: o.Clock, Logger: a.log}),
		unreachable: map[string]time.Time{},
	}
	if a.adoptions != nil {
		h.adopt = a.adoptions
	}
	a.handler = h
	if api := o.API.Images; api != nil {
		p, err := imagepull.NewController(imagepull.ControllerOptions{
			NodeName: o.NodeName, API: api, ImageDir: o.ImageDir, NodeDataDir: o.NodeDataDir, FileRoots: o.ImageSourceDirs,
			Uploads:   o.API.ImageUploads,
			Policy:    &a.imagePolicy,
			Inventory: a.images, Instances: a.vmis, Reporter: progress, ResyncPeriod: o.Timing.ResyncPeriod,
			Clock: o.Clock, Logger: a.log,
		})
		if err != nil {
			return err
		}
		a.pulls, h.pulls = p, p
	}
	mo := migration.Options{
		NodeName: o.NodeName, Address: o.Migration.Address,
		KVM:  func() bool { return a.host.KVMUsable },
		Poll: o.Timing.MigrationPoll, IncomingLease: o.Timing.IncomingLease, CallTimeout: o.Timing.CallTimeout,
		Records: h, Launchers: a.launchers, Handler: h, Disks: h.disks,
		Status: a.status, Targets: a.targets, Layout: a.layout, Logger: a.log,
	}
	if a.pulls != nil {
		mo.Images = a.pulls
	}
	a.migrations = migration.New(mo)
	a.newDataRoles()
	return a.newExportServer()
}

// newDataRoles makes the roles of snapshots and restores, when the agent
// takes part in them.
func (a *Agent) newDataRoles() {
	o := a.opts
	if api := o.API.SnapshotContents; api != nil {
		so := snapshot.Options{NodeName: o.NodeName, API: api, Layout: a.layout, Copier: o.Copier,
			Domains: a.handler, CallTimeout: o.Timing.CallTimeout, GCPeriod: o.Timing.VMDirGCPeriod, Clock: o.Clock, Logger: a.log}
		if a.storage != nil {
			so.Classes = a.storage
		}
		a.snaps = snapshot.New(so)
	}
	if api := o.API.Restores; api != nil {
		ro := restore.Options{NodeName: o.NodeName, API: api, Layout: a.layout, Copier: o.Copier,
			Domains: a.handler, VMs: o.API.VMs, CallTimeout: o.Timing.CallTimeout, Logger: a.log}
		if a.snaps != nil {
			ro.Contents = a.snaps
		}
		if a.storage != nil {
			ro.Classes = a.storage
		}
		a.restores = restore.New(ro)
	}
	if o.API.Backups != nil && o.API.BackupRestores != nil && o.API.BackupTargets != nil {
		bo := nodebackup.Options{NodeName: o.NodeName, Backups: o.API.Backups, Restores: o.API.BackupRestores, Targets: o.API.BackupTargets,
			Layout: a.layout, CallTimeout: o.Timing.CallTimeout, Clock: o.Clock, Logger: a.log}
		if a.storage != nil {
			bo.Classes = a.storage
		}
		a.backups = nodebackup.New(bo)
	}
}

// Close releases the state database if the agent opened it. Run calls it
// when it returns.
func (a *Agent) Close() error {
	var err error
	a.closeOnce.Do(func() {
		if a.ownsDB {
			err = a.db.Close()
		}
	})
	return err
}

func (a *Agent) now() time.Time { return a.opts.Clock.Now() }

// Run registers the node, reattaches to the launchers of an earlier run,
// and handles VMIs until ctx ends. It then reports the node unschedulable
// and detaches from the launchers, leaving them and their guests running
// (a stopping agent is not a stopping node). It returns nil on a clean stop.
func (a *Agent) Run(ctx context.Context) error {
	defer a.Close()
	defer a.queue.ShutDown()
	uids, gids, err := a.qemuUsers(ctx)
	if err != nil {
		return fmt.Errorf("preflight: %w", err)
	}
	if err := a.preflight(uids); err != nil {
		return err
	}
	if err := a.shareImages(gids); err != nil {
		return err
	}
	// Before anything else: guests of an earlier run may be up already.
	stopFirewall, err := a.startGuestFirewall(ctx, uids)
	if err != nil {
		return err
	}
	defer stopFirewall()
	// Started first, so that registration finds listings if they are
	// quick.
	inventoryCtx, stopInventories := context.WithCancel(ctx)
	var inventories sync.WaitGroup
	inventories.Go(func() { a.images.Run(inventoryCtx) })
	inventories.Go(func() { a.networks.Run(inventoryCtx) })
	defer func() { stopInventories(); inventories.Wait() }()
	if a.opts.Host == nil {
		h, err := ReadHostFacts("/")
		if err != nil {
			return fmt.Errorf("reading host facts: %w", err)
		}
		a.host = h
	}

	// Launchers of the previous run first: the lease check and the
	// handler both need them.
	if err := a.restore(ctx); err != nil {
		return err
	}
	a.fenceIfLeaseExpired(ctx)
	if a.exports != nil {
		// Before registering the address: a port taken fails the start.
		if err := a.exports.Listen(); err != nil {
			return err
		}
	}
	if err := a.register(ctx); err != nil {
		return a.stopped(ctx, err)
	}
	if a.storage != nil {
		// After registering: a class selects the node by the labels the
		// server holds for it.
		inventories.Go(func() { a.storage.Run(inventoryCtx) })
	}
	interval, err := a.firstHeartbeat(ctx)
	if err != nil {
		return a.stopped(ctx, err)
	}

	var wg sync.WaitGroup
	goRun := func(fn func()) {
		wg.Add(1)
		go func() { defer wg.Done(); fn() }()
	}
	goRun(func() { a.vmis.Run(ctx) })
	goRun(func() { a.targets.Run(ctx) })
	if a.pulls != nil {
		defer a.pulls.Run(ctx)()
	}
	for _, synced := range []<-chan struct{}{a.vmis.Synced(), a.targets.Synced(), a.imagesSynced()} {
		select {
		case <-synced:
		case <-ctx.Done():
			wg.Wait()
			return a.stopped(ctx, nil)
		}
	}
	a.cleanupOrphans(ctx)
	a.enqueueAll()
	// After the launchers were reattached: an online snapshot left by an
	// earlier run is committed through its launcher.
	if a.snaps != nil {
		defer a.snaps.Run(ctx)()
	}
	if a.restores != nil {
		defer a.restores.Run(ctx)()
	}
	if a.exports != nil {
		defer a.exports.Run(ctx)()
	}
	if a.backups != nil {
		defer a.backups.Run(ctx)()
	}
	if a.adoptions != nil {
		defer a.adoptions.Run(ctx)()
	}

	goRun(func() { a.heartbeatLoop(ctx, interval) })
	goRun(func() { a.every(ctx, a.opts.Timing.LivenessInterval, a.launchers.Ping) })
	goRun(func() { a.every(ctx, a.opts.Timing.ResyncPeriod, func(context.Context) { a.enqueueAll() }) })
	goRun(func() { a.console.Run(ctx) })
	goRun(func() { a.vmDirGCLoop(ctx) })
	a.log.Info("node agent running", "kvm", a.host.KVMUsable)
	controller.Run(ctx, "nodeagent", a.queue, a.opts.Workers, controller.ReconcileFunc(a.Reconcile), a.log)
	wg.Wait()
	return a.stopped(ctx, nil)
}

// stopped ends a run: a last heartbeat marks the node unschedulable, and
// every launcher is detached, never stopped.
func (a *Agent) stopped(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		// Shutting down, not failing: whatever was under way stopped
		// because of it.
		err = nil
		hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		if _, herr := a.heartbeat(hctx, false); herr != nil {
			a.log.Warn("could not report the node unschedulable", "err", herr)
		}
		cancel()
	}
	for _, e := range a.launchers.Drain() {
		e.StopWatching()
		e.Client.Detach()
	}
	a.log.Info("node agent stopped; launchers and guests keep running")
	return err
}

// enqueueAll queues every VMI placed here and every VMI with a record.
func (a *Agent) enqueueAll() {
	for _, v := range append(a.vmis.List(), a.targets.List()...) {
		a.queue.Add(informer.Key(v))
	}
	recs, err := a.db.ListVMIs()
	if err != nil {
		a.log.Error("listing state records", "err", err)
		return
	}
	for _, r := range recs {
		a.queue.Add(r.Key())
	}
}

// every calls fn each period on the agent's clock until ctx ends.
func (a *Agent) every(ctx context.Context, period time.Duration, fn func(context.Context)) {
	t := a.opts.Clock.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			fn(ctx)
		}
	}
}

// Reconcile handles one VMI key (namespace/name): a migration's role when
// one decides what this node does with the instance, the handler
// otherwise.
func (a *Agent) Reconcile(ctx context.Context, key string) (controller.Result, error) {
	vmi := a.handler.cached(key)
	res, vmi, handled, err := a.migrations.Pass(ctx, key, vmi)
	if handled || err != nil {
		return res, err
	}
	return a.handler.handle(ctx, key, vmi)
}

// imagesSynced is closed once the agent knows the Images.
func (a *Agent) imagesSynced() <-chan struct{} {
	if a.pulls == nil {
		c := make(chan struct{})
		close(c)
		return c
	}
	return a.pulls.Synced()
}
