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
package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"google.golang.org/grpc"
	"k8s.io/apimachinery/pkg/api/resource"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client/remotestore"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller"
	"github.com/virtplane/terraform-provider-virtplane/internal/informer"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/console"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/disks"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/nodedir"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/state"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
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
)

// LabelKVM on a Node says whether guests there get KVM (true) or run in
// software emulation (false).
const LabelKVM = "virtplane.io/kvm"

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
	// Consoles carries console sessions; nil serves none.
	Consoles console.API
}

// VMIStatusWriter is what the handler needs of the VMI service: status
// writes with compare-and-swap, and a fresh read after a conflict.
type VMIStatusWriter interface {
	UpdateStatus(ctx context.Context, in *apiv1.UpdateVirtualMachineInstanceStatusRequest, opts ...grpc.CallOption) (*apiv1.VirtualMachineInstance, error)
	Get(ctx context.Context, in *apiv1.GetVirtualMachineInstanceRequest, opts ...grpc.CallOption) (*apiv1.VirtualMachineInstance, error)
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
	// VMDirGCPeriod is how often the files of deleted VMs are looked
	// for; default DefaultVMDirGCPeriod.
	VMDirGCPeriod time.Duration
	// ImageRefreshPeriod is how often ImageDir is looked at for the
	// node's image list; default disks.DefaultImageRefreshPeriod.
	ImageRefreshPeriod time.Duration
}

func (t *Timing) complete() {
	setDefault(&t.ResyncPeriod, DefaultResyncPeriod)
	setDefault(&t.LivenessInterval, DefaultLivenessInterval)
	setDefault(&t.PingTimeout, t.LivenessInterval)
	setDefault(&t.LauncherGrace, DefaultLauncherGrace)
	setDefault(&t.ACPIInterval, DefaultACPIInterval)
	setDefault(&t.SlowStartWindow, DefaultSlowStartWindow)
	setDefault(&t.ImageRefreshPeriod, disks.DefaultImageRefreshPeriod)
	setDefault(&t.ReattachTimeout, 2*time.Second)
	setDefault(&t.CallTimeout, 10*time.Second)
	setDefault(&t.SyncTimeout, 2*time.Minute)
	setDefault(&t.VMDirGCPeriod, DefaultVMDirGCPeriod)
}

// Options configure an Agent.
type Options struct {
	// NodeName is this node's name; required.
	NodeName string
	// API is the control plane; required but for Consoles.
	API API
	// Launchers starts and reattaches launcher processes; required.
	Launchers launcher.Manager
	// Tools runs `virtplane-launcher probe|list-domains`; nil runs
	// LauncherPath.
	Tools LauncherTools
	// Images inspects images and creates disks; nil runs qemu-img.
	Images disks.ImageTool
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
	// LauncherPath is the virtplane-launcher binary for the default Tools.
	LauncherPath string
	// ReservedMemory is kept from guests: allocatable = capacity minus
	// this; nil means DefaultReservedMemory.
	ReservedMemory *resource.Quantity
	AgentVersion   string
	// Host overrides what is read from /proc and /dev (tests).
	Host *HostFacts

	// Workers is how many VMIs are handled at once; default
	// DefaultWorkers.
	Workers int
	Timing  Timing

	// Clock is the agent's clock; time.Now when nil. Lease arithmetic uses
	// its monotonic reading.
	Clock  func() time.Time
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
	if o.LibvirtURI == "" {
		o.LibvirtURI = launcher.DefaultLibvirtURI
	}
	if o.Tools == nil {
		o.Tools = ExecTools{Path: o.LauncherPath}
	}
	if o.ReservedMemory == nil {
		q := resource.MustParse(DefaultReservedMemory)
		o.ReservedMemory = &q
	}
	setDefault(&o.Workers, DefaultWorkers)
	o.Timing.complete()
	if o.Clock == nil {
		o.Clock = time.Now
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

// Agent is a node agent.
type Agent struct {
	opts   Options
	timing Timing // opts.Timing, completed
	log    *slog.Logger
	status VMIStatusWriter
	nodes  NodeReporter
	vms    VMReader
	db     state.StateDB
	ownsDB bool
	queue  controller.Queue
	vmis   *informer.Informer[*apiv1.VirtualMachineInstance]

	launchers *launcherTable
	lease     leaseTracker
	layout    nodedir.Layout
	console   consoleRoom
	images    imageList
	disks     diskRoom
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
		opts: opts, timing: opts.Timing, status: opts.API.VMIs, nodes: opts.API.Nodes, vms: opts.API.VMs,
		log:         opts.Logger.With("component", "nodeagent", "node", opts.NodeName),
		queue:       controller.NewQueue("nodeagent"),
		launchers:   newLauncherTable(),
		unreachable: map[string]time.Time{},
		gcKick:      make(chan struct{}, 1),
		db:          opts.State,
		layout:      nodedir.Layout{Root: opts.NodeDataDir},
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
		db, err := state.OpenBolt(filepath.Join(opts.NodeDataDir, "state.db"))
		if err != nil {
			return nil, fmt.Errorf("node agent: %w", err)
		}
		a.db, a.ownsDB = db, true
	}
	a.console = console.New(console.Options{NodeName: opts.NodeName, API: opts.API.Consoles, Instances: consoleInstances{a},
		Layout: a.layout, Logger: a.log})
	a.disks = disks.New(disks.Options{ImageDir: opts.ImageDir, Layout: a.layout, Images: opts.Images,
		Progress: diskProgress{a}, Logger: a.log})
	a.images = disks.NewInventory(disks.InventoryOptions{ImageDir: opts.ImageDir, RefreshPeriod: opts.Timing.ImageRefreshPeriod, Logger: a.log})
	a.vmis = informer.New[*apiv1.VirtualMachineInstance](remotestore.NewVMIs(opts.API.VMIs),
		store.ListOptions{LabelSelector: apiv1.LabelNodeName + "=" + opts.NodeName}, a.log.With("informer", "vmi"))
	enqueue := func(v *apiv1.VirtualMachineInstance) { a.queue.Add(informer.Key(v)) }
	a.vmis.AddHandler(informer.Handler[*apiv1.VirtualMachineInstance]{
		OnAdd:    enqueue,
		OnUpdate: func(_, v *apiv1.VirtualMachineInstance) { enqueue(v) },
		OnDelete: enqueue,
	})
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

func (a *Agent) now() time.Time { return a.opts.Clock() }

// Run registers the node, reattaches to the launchers of an earlier run,
// and handles VMIs until ctx ends. It then reports the node unschedulable
// and detaches from the launchers, leaving them and their guests running
// (a stopping agent is not a stopping node). It returns nil on a clean stop.
func (a *Agent) Run(ctx context.Context) error {
	defer a.Close()
	defer a.queue.ShutDown()
	// Started first, so that registration finds a listing if one is quick.
	imagesCtx, stopImages := context.WithCancel(ctx)
	imagesDone := make(chan struct{})
	go func() { defer close(imagesDone); a.images.Run(imagesCtx) }()
	defer func() { stopImages(); <-imagesDone }()
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
	select {
	case <-a.vmis.Synced():
	case <-ctx.Done():
		wg.Wait()
		return a.stopped(ctx, nil)
	}
	a.cleanupOrphans(ctx)
	a.enqueueAll()

	goRun(func() { a.heartbeatLoop(ctx, interval) })
	goRun(func() { a.livenessLoop(ctx) })
	goRun(func() { a.resyncLoop(ctx) })
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
	for _, v := range a.vmis.List() {
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

func (a *Agent) resyncLoop(ctx context.Context) {
	t := time.NewTicker(a.timing.ResyncPeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			a.enqueueAll()
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
