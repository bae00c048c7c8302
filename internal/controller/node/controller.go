// Package node is the node controller: it notices nodes whose agent
// stopped heartbeating (KubeVirt's pkg/virt-controller/watch/node), marks
// them NotReady, and fails the VMIs on them whose VM asked for
// RestartElsewhere, late enough that the node's own agent has destroyed
// them first. See docs/failover.md for the timeline and why it is safe.
package node

import (
	"context"
	"log/slog"
	"sync"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller"
	"github.com/virtplane/terraform-provider-virtplane/internal/informer"
)

// Options tune failure detection. Zero values get the defaults.
type Options struct {
	// Lease is the node lease the API grants per heartbeat (--node-lease);
	// it must be the same figure, or the controller acts before the node
	// has fenced itself. Default 40s.
	Lease time.Duration
	// FenceMargin is how much longer than Lease the controller waits before
	// failing RestartElsewhere VMIs (--fence-margin). It absorbs clock-rate
	// drift between the controller and the node and the time the node
	// needs to destroy its domains. Default 10s.
	FenceMargin time.Duration
	// Clock is the controller's clock; every deadline is measured on it.
	Clock func() time.Time
	// Fencer cuts a silent node off the storage classes of the instances
	// about to run elsewhere (package storage); nil: instances with
	// volumes on a storage class never fail over.
	Fencer Fencer
	// FenceRetry is how soon a fence that failed is tried again (default
	// 10s).
	FenceRetry time.Duration
}

// Fencer fences a node's access to storage classes; nil error means done.
type Fencer interface {
	Fence(ctx context.Context, node *apiv1.Node, classes []string) error
}

func (o *Options) complete() {
	if o.Lease <= 0 {
		o.Lease = 40 * time.Second
	}
	if o.FenceMargin <= 0 {
		o.FenceMargin = 10 * time.Second
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.FenceRetry <= 0 {
		o.FenceRetry = 10 * time.Second
	}
}

// NodeStore is what the controller does to nodes in the store: a
// linearizable read before it fails a silent node's VMIs (the cache may
// lag), and condition updates.
type NodeStore interface {
	Get(ctx context.Context, namespace, name string) (*apiv1.Node, error)
	GuaranteedUpdate(ctx context.Context, namespace, name string, fn func(*apiv1.Node) (*apiv1.Node, error)) (*apiv1.Node, error)
}

// VMIWriter is how the controller fails the VMIs of a silent node.
type VMIWriter interface {
	GuaranteedUpdate(ctx context.Context, namespace, name string,
		fn func(*apiv1.VirtualMachineInstance) (*apiv1.VirtualMachineInstance, error)) (*apiv1.VirtualMachineInstance, error)
}

// Controller watches node heartbeats.
type Controller struct {
	opts      Options
	nodeInf   *informer.Informer[*apiv1.Node]
	vmiInf    *informer.Informer[*apiv1.VirtualMachineInstance]
	vmInf     *informer.Informer[*apiv1.VirtualMachine]
	nodes     informer.Lister[*apiv1.Node]
	vmis      informer.Lister[*apiv1.VirtualMachineInstance]
	vms       informer.Lister[*apiv1.VirtualMachine]
	nodeStore NodeStore
	vmiStore  VMIWriter
	log       *slog.Logger
	queue     controller.Queue

	mu   sync.Mutex
	seen map[string]observation // node name → last heartbeat change seen
}

// New registers the controller's index and handlers on the shared
// informers; call it before the informers run. The caller runs them.
func New(opts Options, nodes *informer.Informer[*apiv1.Node], vmis *informer.Informer[*apiv1.VirtualMachineInstance],
	vms *informer.Informer[*apiv1.VirtualMachine], nodeStore NodeStore,
	vmiStore VMIWriter, log *slog.Logger) *Controller {
	if nodes.HasSynced() || vmis.HasSynced() || vms.HasSynced() {
		panic("node.New: informers already populated; create controllers before running their informers")
	}
	opts.complete()
	if log == nil {
		log = slog.Default()
	}
	c := &Controller{
		opts: opts, nodeInf: nodes, vmiInf: vmis, vmInf: vms, nodes: nodes, vmis: vmis, vms: vms,
		nodeStore: nodeStore, vmiStore: vmiStore, log: log.With("controller", "node"),
		queue: controller.NewQueue("node"), seen: map[string]observation{},
	}
	// Same name and function as the VMI controller's: whichever registers
	// last wins, and both run before the informer fills.
	vmis.AddIndex(controller.VMINodeIndex, controller.IndexVMIByNode)
	nodes.AddHandler(informer.Handler[*apiv1.Node]{
		OnAdd:    func(n *apiv1.Node) { c.queue.Add(informer.Key(n)) },
		OnUpdate: func(_, n *apiv1.Node) { c.queue.Add(informer.Key(n)) },
		OnDelete: func(n *apiv1.Node) { c.queue.Add(informer.Key(n)) },
	})
	vmis.AddHandler(informer.Handler[*apiv1.VirtualMachineInstance]{
		OnAdd: c.enqueueNodeOf,
		OnUpdate: func(old, v *apiv1.VirtualMachineInstance) {
			if old.GetStatus().GetNodeName() != v.GetStatus().GetNodeName() {
				c.enqueueNodeOf(v)
			}
		},
	})
	vms.AddHandler(informer.Handler[*apiv1.VirtualMachine]{
		OnAdd: c.vmChanged,
		OnUpdate: func(old, vm *apiv1.VirtualMachine) {
			if old.GetSpec().GetNodeFailurePolicy() != vm.GetSpec().GetNodeFailurePolicy() {
				c.vmChanged(vm)
			}
		},
	})
	return c
}

// Run waits for the caches and processes nodes until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	if !controller.WaitForSynced(ctx, c.queue, c.nodeInf.Synced(), c.vmiInf.Synced(), c.vmInf.Synced()) {
		return
	}
	c.log.Info("starting", "workers", workers, "lease", c.opts.Lease, "fenceMargin", c.opts.FenceMargin)
	controller.Run(ctx, "node", c.queue, workers, c, c.log)
}

// enqueueNodeOf looks at v's node again: a VMI that lands on (or is
// listed for) an unresponsive node may be due for failing.
func (c *Controller) enqueueNodeOf(v *apiv1.VirtualMachineInstance) {
	if n := v.GetStatus().GetNodeName(); n != "" {
		c.queue.Add(n)
	}
}

// vmChanged follows a node_failure_policy change to the VM's instance.
func (c *Controller) vmChanged(vm *apiv1.VirtualMachine) {
	m := vm.GetMetadata()
	if v, ok := c.vmis.Get(m.GetNamespace(), m.GetName()); ok {
		c.enqueueNodeOf(v)
	}
}
