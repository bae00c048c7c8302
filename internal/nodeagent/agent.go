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
// The agent owns registration, heartbeats and the node lease with its
// self-fencing; the handler (decide, then shutdown, delete or update, and
// the VMI status it writes); the launcher connections (launch, reattach,
// liveness); and the collector of deleted VMs' files. Its rooms own the
// rest, each behind a narrow interface declared here: package console
// serves consoles, package disks prepares a VMI's files and lists the
// node's images, package nodedir lays out the node data directory, and
// package state keeps the local database.
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
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client/remotestore"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller"
	"github.com/virtplane/terraform-provider-virtplane/internal/informer"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/console"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/disks"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/nodedir"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/state"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// Agent is a node agent.
type Agent struct {
	opts   Options // completed: defaults filled in
	log    *slog.Logger
	status vmiStatusWriter
	nodes  NodeReporter
	vms    VMReader
	db     state.StateDB
	ownsDB bool
	queue  controller.Queue
	vmis   *informer.Informer[*apiv1.VirtualMachineInstance]
	// targets are the instances migrating to this node (by the
	// migration-target label), which are not this node's yet.
	targets *informer.Informer[*apiv1.VirtualMachineInstance]

	launchers *launcherTable
	lease     leaseTracker
	layout    nodedir.Layout
	console   consoleRoom
	images    imageList
	networks  networkList
	disks     diskRoom
	pulls     *imagePulls // nil without Options.API.Images
	// snaps and restores are the node's part of snapshots and restores;
	// nil without Options.API.SnapshotContents / Restores.
	snaps    *snapshotWork
	restores *restoreWork
	copier   VolumeCopier
	// host is what registration reported; set by Run before the
	// handler starts.
	host HostFacts

	mu sync.Mutex
	// unreachable records, per VMI key, since when its launcher could not
	// be reached, for the launcher grace.
	unreachable map[string]time.Time

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
		opts: opts, status: opts.API.VMIs, nodes: opts.API.Nodes, vms: opts.API.VMs,
		log:         opts.Logger.With("component", "nodeagent", "node", opts.NodeName),
		queue:       controller.NewQueue("nodeagent"),
		launchers:   newLauncherTable(),
		unreachable: map[string]time.Time{},
		gcKick:      make(chan struct{}, 1),
		db:          opts.State,
		layout:      nodedir.Layout{Root: opts.NodeDataDir},
		copier:      opts.Copier,
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
	a.console = console.New(console.Options{NodeName: opts.NodeName, APIs: opts.API.Consoles, Instances: consoleInstances{a},
		Layout: a.layout, Clock: opts.Clock, Logger: a.log})
	a.disks = disks.New(disks.Options{ImageDir: opts.ImageDir, Layout: a.layout, Images: opts.Images,
		Progress: diskProgress{a}, Clock: opts.Clock, Logger: a.log})
	a.images = disks.NewInventory(disks.InventoryOptions{ImageDir: opts.ImageDir, RefreshPeriod: opts.Timing.ImageRefreshPeriod,
		Clock: opts.Clock, Logger: a.log})
	a.networks = newNetworkInventory(opts, a)
	if err := a.newImagePulls(); err != nil {
		return nil, fmt.Errorf("node agent: %w", err)
	}
	a.newSnapshotWork()
	a.newRestoreWork()
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
	return a, nil
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
	uids, err := a.qemuUsers(ctx)
	if err != nil {
		return fmt.Errorf("preflight: %w", err)
	}
	if err := a.preflight(uids); err != nil {
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
	if err := a.register(ctx); err != nil {
		return a.stopped(ctx, err)
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
	stopPulls := a.runImagePulls(ctx)
	defer stopPulls()
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
	stopSnapshots := a.runSnapshots(ctx)
	defer stopSnapshots()
	stopRestores := a.runRestores(ctx)
	defer stopRestores()

	goRun(func() { a.heartbeatLoop(ctx, interval) })
	goRun(func() { a.every(ctx, a.opts.Timing.LivenessInterval, a.pingLaunchers) })
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
	for _, e := range a.launchers.drain() {
		e.stopWatching()
		e.client.Detach()
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

// markUnreachable records the first time key's launcher could not be
// reached and returns it.
func (a *Agent) markUnreachable(key string) time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	since, ok := a.unreachable[key]
	if !ok {
		since = a.now()
		a.unreachable[key] = since
	}
	return since
}

func (a *Agent) markReachable(key string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.unreachable, key)
}
