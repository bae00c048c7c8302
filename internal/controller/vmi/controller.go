// Package vmi is the VMI controller: the part of KubeVirt's VMI controller
// that, with Kubernetes, creates a launcher pod and lets kube-scheduler
// place it. Here it places VMIs on nodes itself (phase "" or Pending →
// Scheduled with status.node_name), reports why none fits, and fails VMIs
// that cannot run anymore (deleted before placement, node deleted).
package vmi

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/api/resource"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller"
	"github.com/virtplane/terraform-provider-virtplane/internal/informer"
)

// Options tune placement. Zero values get the defaults.
type Options struct {
	// MemoryOverhead is added to every VMI's guest memory: what QEMU,
	// libvirt and the launcher use beyond the guest (KubeVirt computes
	// it per VM, §8.1 of the reference). Default 160Mi, the
	// --vm-memory-overhead flag. Measured under TCG with a 32 MiB
	// tb-cache (internal/e2e memory_test.go): QEMU beyond guest RAM
	// 132 MiB RSS (51 MiB private) plus the launcher's 5 MiB private, so
	// 160Mi leaves headroom; KVM guests need less.
	MemoryOverhead resource.Quantity
	// CPUAllocationRatio is vCPUs per host CPU: a VMI requests
	// vCPUs/ratio CPUs. Default 10 (KubeVirt's 100m per vCPU).
	CPUAllocationRatio int64
	// UnschedulableRetry is how often a VMI that fits nowhere is tried
	// again even without node events. Default 30s.
	UnschedulableRetry time.Duration
	Clock              func() time.Time
	// Images, when set, says which images nodes can pull (an Image object
	// names them): a node without such an image still fits.
	Images ImageLister
	// HostPolicy is the operator's host-resource policy, which placement
	// applies too (an instance written before it changed, or past the
	// API); nil is validation.DefaultHostPolicy().
	HostPolicy *validation.HostPolicy
	// StorageClasses, when set, are read for the classes of instances'
	// persistent volumes; nil places no instance with such a volume.
	StorageClasses StorageClassLister
	// Namespaces, when set, are read for the host resources each
	// namespace allows (validation.CheckNamespaceAllowed), which
	// placement applies on top of HostPolicy: an instance its namespace
	// no longer allows one of is not placed. Nil applies none.
	Namespaces NamespaceLister
}

// NamespaceLister reads Namespace objects from a cache.
type NamespaceLister interface {
	Get(namespace, name string) (*apiv1.Namespace, bool)
}

// StorageClassLister reads StorageClass objects from a cache.
type StorageClassLister interface {
	Get(namespace, name string) (*apiv1.StorageClass, bool)
}

// ImageLister reads Image objects from a cache.
type ImageLister interface {
	Get(namespace, name string) (*apiv1.Image, bool)
}

// DefaultMemoryOverhead is the default Options.MemoryOverhead.
const DefaultMemoryOverhead = "160Mi"

func (o *Options) complete() {
	if o.MemoryOverhead.IsZero() {
		o.MemoryOverhead = resource.MustParse(DefaultMemoryOverhead)
	}
	if o.CPUAllocationRatio <= 0 {
		o.CPUAllocationRatio = 10
	}
	if o.UnschedulableRetry <= 0 {
		o.UnschedulableRetry = 30 * time.Second
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.HostPolicy == nil {
		o.HostPolicy = validation.DefaultHostPolicy()
	}
}

// VMIWriter is the one write the controller makes: a compare-and-swap
// update of a VMI it read from the cache (placement, failure).
type VMIWriter interface {
	Update(ctx context.Context, vmi *apiv1.VirtualMachineInstance) (*apiv1.VirtualMachineInstance, error)
}

// Controller places VMIs on nodes.
type Controller struct {
	opts    Options
	vmiInf  *informer.Informer[*apiv1.VirtualMachineInstance]
	nodeInf *informer.Informer[*apiv1.Node]
	vmis    informer.Lister[*apiv1.VirtualMachineInstance]
	nodes   informer.Lister[*apiv1.Node]
	store   VMIWriter
	log     *slog.Logger
	queue   controller.Queue
	assumed *assumeCache
	usage   *usage
	placeMu sync.Mutex // one placement decision at a time, see place
	// Reused by every decision under placeMu (candidates): a decision
	// among 1,000 nodes would otherwise allocate 80 KB of garbage.
	nodeBuf []*apiv1.Node
	candBuf []candidate
}

// New registers the controller's index and handlers on the shared
// informers; call it before the informers run (an index added later would
// miss the objects already cached). The caller runs the informers.
func New(opts Options, vmis *informer.Informer[*apiv1.VirtualMachineInstance], nodes *informer.Informer[*apiv1.Node],
	vmiStore VMIWriter, log *slog.Logger) *Controller {
	if vmis.HasSynced() || nodes.HasSynced() {
		panic("vmi.New: informers already populated; create controllers before running their informers")
	}
	opts.complete()
	if log == nil {
		log = slog.Default()
	}
	c := &Controller{
		opts: opts, vmiInf: vmis, nodeInf: nodes, vmis: vmis, nodes: nodes,
		store: vmiStore, log: log.With("controller", "vmi"),
		queue: controller.NewQueue("vmi"), assumed: newAssumeCache(),
	}
	c.usage = newUsage(c.opts, c.log)
	vmis.AddIndex(controller.VMINodeIndex, controller.IndexVMIByNode)
	// Registered before the handler that enqueues, so a reconcile never
	// sees a VMI in the cache that the totals do not count yet.
	vmis.AddHandler(informer.Handler[*apiv1.VirtualMachineInstance]{
		OnAdd:    c.usage.observe,
		OnUpdate: func(_, v *apiv1.VirtualMachineInstance) { c.usage.observe(v) },
		OnDelete: c.usage.forget,
	})
	vmis.AddHandler(informer.Handler[*apiv1.VirtualMachineInstance]{
		OnAdd:    c.vmiAdded,
		OnUpdate: c.vmiUpdated,
		OnDelete: c.vmiDeleted,
	})
	nodes.AddHandler(informer.Handler[*apiv1.Node]{
		OnAdd:    func(*apiv1.Node) { c.enqueueUnplaced() },
		OnUpdate: c.nodeUpdated,
		OnDelete: c.nodeDeleted,
	})
	return c
}

// pullable says whether nodes can pull image name.
func (c *Controller) pullable(name string) bool {
	if c.opts.Images == nil {
		return false
	}
	_, ok := c.opts.Images.Get("", name)
	return ok
}

// Run waits for the caches and processes VMIs until ctx ends. Placement
// decisions are serialised internally, so several workers are safe.
func (c *Controller) Run(ctx context.Context, workers int) {
	synced := []<-chan struct{}{c.vmiInf.Synced(), c.nodeInf.Synced()}
	if s, ok := c.opts.StorageClasses.(interface{ Synced() <-chan struct{} }); ok {
		// A class not listed yet would read as one that does not exist.
		synced = append(synced, s.Synced())
	}
	if !controller.WaitForSynced(ctx, c.queue, synced...) {
		return
	}
	c.log.Info("starting", "workers", workers)
	controller.Run(ctx, "vmi", c.queue, workers, c, c.log)
}

// Handlers only enqueue keys; Reconcile reads the latest state.

func (c *Controller) vmiAdded(v *apiv1.VirtualMachineInstance) {
	if !apiv1.IsFinal(v.GetStatus().GetPhase()) {
		c.queue.Add(informer.Key(v))
	}
}

func (c *Controller) vmiUpdated(old, v *apiv1.VirtualMachineInstance) {
	key := informer.Key(v)
	if v.GetStatus().GetNodeName() != "" {
		// The cache shows the placement now; it is counted from there.
		c.assumed.forget(key)
	}
	if holdsCapacity(old) && !holdsCapacity(v) {
		c.enqueueUnplaced()
	}
	if !apiv1.IsFinal(v.GetStatus().GetPhase()) {
		c.queue.Add(key)
	}
}

func (c *Controller) vmiDeleted(v *apiv1.VirtualMachineInstance) {
	c.assumed.forget(informer.Key(v))
	if holdsCapacity(v) {
		c.enqueueUnplaced()
	}
}

// holdsCapacity reports whether v counts against its node.
func holdsCapacity(v *apiv1.VirtualMachineInstance) bool {
	return v.GetStatus().GetNodeName() != "" && !apiv1.IsFinal(v.GetStatus().GetPhase())
}

func (c *Controller) nodeUpdated(old, n *apiv1.Node) {
	if placementRelevantChange(old, n) {
		c.enqueueUnplaced()
	}
}

func (c *Controller) nodeDeleted(n *apiv1.Node) {
	for _, v := range c.vmis.ByIndex(controller.VMINodeIndex, n.GetMetadata().GetName()) {
		c.queue.Add(informer.Key(v))
	}
	c.enqueueUnplaced()
}

// ImagesChanged re-tries placement of the VMIs not placed yet: an Image
// or a storage class created or changed since may make a node fit.
func (c *Controller) ImagesChanged() { c.enqueueUnplaced() }

// enqueueUnplaced retries every VMI still waiting for a node, as
// kube-scheduler moves unschedulable pods back to its active queue on
// cluster events.
func (c *Controller) enqueueUnplaced() {
	for _, v := range c.vmis.List() {
		if needsPlacement(v) {
			c.queue.Add(informer.Key(v))
		}
	}
}

func needsPlacement(v *apiv1.VirtualMachineInstance) bool {
	st := v.GetStatus()
	return st.GetNodeName() == "" && (st.GetPhase() == apiv1.PhaseUnset || st.GetPhase() == apiv1.PhasePending)
}

// placementRelevantChange ignores what every heartbeat rewrites (the
// heartbeat and lease timestamps, the Ready probe times), so a fleet of
// beating nodes does not re-run every unplaced VMI every few seconds; the
// periodic retry covers the rest.
func placementRelevantChange(old, n *apiv1.Node) bool {
	return !proto.Equal(placementView(old), placementView(n))
}

func placementView(n *apiv1.Node) *apiv1.Node {
	st := n.GetStatus()
	view := &apiv1.Node{
		Metadata: &apiv1.ObjectMeta{Labels: n.GetMetadata().GetLabels()},
		Spec:     n.GetSpec(),
		Status: &apiv1.NodeStatus{
			Capacity: st.GetCapacity(), Allocatable: st.GetAllocatable(), Schedulable: st.GetSchedulable(),
			// A new bridge or libvirt network may let a waiting VMI in.
			Bridges: st.GetBridges(), Networks: st.GetNetworks(),
		},
	}
	// Placement reads the names of the node's images (missingImages): a
	// new one may let a waiting VMI in, without waiting for the retry.
	for _, img := range st.GetImages() {
		view.Status.Images = append(view.Status.Images, &apiv1.NodeImage{Name: img.GetName()})
	}
	// A storage class the node reaches now may let a waiting VMI in; one
	// it reports a new cause for changes the VMI's message (storageReasons).
	for _, s := range st.GetStorage() {
		view.Status.Storage = append(view.Status.Storage, &apiv1.NodeStorage{Class: s.GetClass(), Ready: s.GetReady(), Message: causeOf(s.GetMessage())})
	}
	for _, t := range []string{apiv1.ConditionReady, apiv1.ConditionNodeFenced} {
		if cond := apiv1.FindCondition(st.GetConditions(), t); cond != nil {
			view.Status.Conditions = append(view.Status.Conditions, &apiv1.Condition{Type: t, Status: cond.GetStatus()})
		}
	}
	return view
}
