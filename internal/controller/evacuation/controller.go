// Package evacuation is the evacuation controller: KubeVirt's
// pkg/virt-controller/watch/drain/evacuation over virtplane's objects,
// keyed by node. While a node drains (spec.drain), every instance on it
// leaves by its eviction strategy: marked and live-migrated (LiveMigrate,
// LiveMigrateIfPossible when migratable), shut down (None,
// LiveMigrateIfPossible when not), marked and left to an outside actor
// (External), or kept, blocking the drain (LiveMigrate and not
// migratable). Instances marked by the Evict call migrate the same way on
// any node. The migration controller's cluster and per-node limits pace
// the migrations; a failed one is retried after a doubling delay. The
// node's status.evacuation says what is left and why; uncordoning cancels
// what has not left. docs/operations.md describes the workflow.
package evacuation

import (
	"context"
	"log/slog"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller"
	"github.com/virtplane/terraform-provider-virtplane/internal/eviction"
	"github.com/virtplane/terraform-provider-virtplane/internal/informer"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// Options tune the controller; zero values get the defaults.
type Options struct {
	// DefaultEvictionStrategy applies to instances that set none
	// (--default-eviction-strategy). Default apiv1.DefaultEvictionStrategy.
	DefaultEvictionStrategy string
	// RetryBase is the wait after an evacuation migration failed, doubled
	// after each further failure up to RetryMax (KubeVirt: 20 s doubling).
	// Defaults 20s and 5m.
	RetryBase, RetryMax time.Duration
	Clock               func() time.Time
}

func (o *Options) complete() {
	if o.DefaultEvictionStrategy == "" {
		o.DefaultEvictionStrategy = apiv1.DefaultEvictionStrategy
	}
	if o.RetryBase <= 0 {
		o.RetryBase = 20 * time.Second
	}
	if o.RetryMax <= 0 {
		o.RetryMax = 5 * time.Minute
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
}

// NodeStatusWriter records a drain's progress on the node.
type NodeStatusWriter interface {
	GuaranteedUpdate(ctx context.Context, namespace, name string, fn func(*apiv1.Node) (*apiv1.Node, error)) (*apiv1.Node, error)
}

// MigrationWriter creates evacuation migrations and cancels them when a
// drain is.
type MigrationWriter interface {
	Create(ctx context.Context, m *apiv1.VirtualMachineInstanceMigration) (*apiv1.VirtualMachineInstanceMigration, error)
	Delete(ctx context.Context, namespace, name string, opts store.DeleteOptions) (*apiv1.VirtualMachineInstanceMigration, bool, error)
}

// Informer indexes the controller registers.
const (
	// markIndex: instances by status.evacuation_node_name.
	markIndex = "evacuation"
	// evacuationIndex: migrations by the node they evacuate.
	evacuationIndex = "evacuation-node"
)

// Controller evacuates draining nodes.
type Controller struct {
	opts    Options
	nodeInf *informer.Informer[*apiv1.Node]
	vmiInf  *informer.Informer[*apiv1.VirtualMachineInstance]
	migInf  *informer.Informer[*apiv1.VirtualMachineInstanceMigration]
	nodes   NodeStatusWriter
	vmis    eviction.VMIWriter
	migs    MigrationWriter
	log     *slog.Logger
	queue   controller.Queue
	// exp holds a node back until the cache shows the migrations made for
	// it, so that one instance never gets two.
	exp *controller.Expectations
}

// New registers the controller's indexes and handlers on the shared
// informers; call it before they run.
func New(opts Options, nodes *informer.Informer[*apiv1.Node], vmis *informer.Informer[*apiv1.VirtualMachineInstance],
	migs *informer.Informer[*apiv1.VirtualMachineInstanceMigration], nodeStore NodeStatusWriter,
	vmiStore eviction.VMIWriter, migStore MigrationWriter, log *slog.Logger) *Controller {
	if nodes.HasSynced() || vmis.HasSynced() || migs.HasSynced() {
		panic("evacuation.New: informers already populated; create controllers before running their informers")
	}
	opts.complete()
	if log == nil {
		log = slog.Default()
	}
	c := &Controller{
		opts: opts, nodeInf: nodes, vmiInf: vmis, migInf: migs,
		nodes: nodeStore, vmis: vmiStore, migs: migStore,
		log: log.With("controller", "evacuation"), queue: controller.NewQueue("evacuation"),
		exp: controller.NewExpectations(opts.Clock),
	}
	vmis.AddIndex(controller.VMINodeIndex, controller.IndexVMIByNode)
	vmis.AddIndex(markIndex, func(v *apiv1.VirtualMachineInstance) []string {
		if n := v.GetStatus().GetEvacuationNodeName(); n != "" {
			return []string{n}
		}
		return nil
	})
	migs.AddIndex(controller.MigrationVMIIndex, controller.IndexMigrationByVMI)
	migs.AddIndex(evacuationIndex, func(m *apiv1.VirtualMachineInstanceMigration) []string {
		if n := evacuates(m); n != "" {
			return []string{n}
		}
		return nil
	})
	nodes.AddHandler(informer.Handler[*apiv1.Node]{
		OnAdd: func(n *apiv1.Node) { c.queue.Add(informer.Key(n)) },
		OnUpdate: func(old, n *apiv1.Node) {
			if old.GetSpec().GetDrain() != n.GetSpec().GetDrain() || n.GetSpec().GetDrain() {
				c.queue.Add(informer.Key(n))
			}
		},
		OnDelete: func(n *apiv1.Node) { c.queue.Add(informer.Key(n)) },
	})
	vmis.AddHandler(informer.Handler[*apiv1.VirtualMachineInstance]{
		OnAdd: c.enqueueNodesOf,
		OnUpdate: func(old, v *apiv1.VirtualMachineInstance) {
			c.enqueueNodesOf(old)
			c.enqueueNodesOf(v)
		},
		OnDelete: c.enqueueNodesOf,
	})
	migs.AddHandler(informer.Handler[*apiv1.VirtualMachineInstanceMigration]{
		OnAdd: func(m *apiv1.VirtualMachineInstanceMigration) {
			if n := evacuates(m); n != "" {
				c.exp.CreationObserved(n)
				c.queue.Add(n)
			}
		},
		OnUpdate: func(_, m *apiv1.VirtualMachineInstanceMigration) { c.enqueueEvacuated(m) },
		OnDelete: c.enqueueEvacuated,
	})
	return c
}

// Run waits for the caches and processes nodes until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	if !controller.WaitForSynced(ctx, c.queue, c.nodeInf.Synced(), c.vmiInf.Synced(), c.migInf.Synced()) {
		return
	}
	c.log.Info("starting", "workers", workers, "default_eviction_strategy", c.opts.DefaultEvictionStrategy)
	controller.Run(ctx, "evacuation", c.queue, workers, c, c.log)
}

// enqueueNodesOf looks again at the node an instance is marked to leave,
// and at the one it runs on if a drain is on there or being called off.
// Instance status writes are frequent; the other nodes have nothing to do.
func (c *Controller) enqueueNodesOf(v *apiv1.VirtualMachineInstance) {
	if n := v.GetStatus().GetEvacuationNodeName(); n != "" {
		c.queue.Add(n)
	}
	if n := v.GetStatus().GetNodeName(); n != "" {
		if node, ok := c.nodeInf.GetByKey(n); ok && (node.GetSpec().GetDrain() || node.GetStatus().GetEvacuation() != nil) {
			c.queue.Add(n)
		}
	}
}

func (c *Controller) enqueueEvacuated(m *apiv1.VirtualMachineInstanceMigration) {
	if n := evacuates(m); n != "" {
		c.queue.Add(n)
	}
}

// evacuates is the node an evacuation migration was made to empty.
func evacuates(m *apiv1.VirtualMachineInstanceMigration) string {
	return m.GetMetadata().GetLabels()[apiv1.LabelEvacuationNode]
}
