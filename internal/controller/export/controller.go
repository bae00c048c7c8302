// Package export is the export controller: KubeVirt's
// pkg/storage/export/export over virtplane's objects. It decides an
// export's phase (Pending while its VM runs or no node can serve it,
// Ready, Terminated when the TTL runs out or the VM starts, Skipped when
// there is nothing to export), picks the node that serves it (the one
// that holds the volumes), labels the export with it and writes the links,
// built from that node's registered export address. The node agent
// serves what it is labelled with (internal/nodeagent/export).
package export

import (
	"context"
	"log/slog"
	"slices"

	"google.golang.org/protobuf/proto"

	"k8s.io/utils/clock"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller"
	"github.com/virtplane/terraform-provider-virtplane/internal/informer"
)

// Options tune the controller; zero values get the defaults.
type Options struct {
	// Clock tells when an export expires; default the real one.
	Clock clock.PassiveClock
}

// Writer writes an export (its status and its node label).
type Writer interface {
	Update(ctx context.Context, e *apiv1.VirtualMachineExport) (*apiv1.VirtualMachineExport, error)
}

// sourceIndex: exports by namespace/source kind/source name.
const sourceIndex = "source"

// Controller drives exports.
type Controller struct {
	opts     Options
	expInf   *informer.Informer[*apiv1.VirtualMachineExport]
	vmInf    *informer.Informer[*apiv1.VirtualMachine]
	vmiInf   *informer.Informer[*apiv1.VirtualMachineInstance]
	nodeInf  *informer.Informer[*apiv1.Node]
	classInf *informer.Informer[*apiv1.StorageClass]
	snapInf  *informer.Informer[*apiv1.VirtualMachineSnapshot]
	contInf  *informer.Informer[*apiv1.VirtualMachineSnapshotContent]
	exports  Writer
	log      *slog.Logger
	queue    controller.Queue
}

// Informers are the caches the controller reads.
type Informers struct {
	Exports  *informer.Informer[*apiv1.VirtualMachineExport]
	VMs      *informer.Informer[*apiv1.VirtualMachine]
	VMIs     *informer.Informer[*apiv1.VirtualMachineInstance]
	Nodes    *informer.Informer[*apiv1.Node]
	Classes  *informer.Informer[*apiv1.StorageClass]
	Snaps    *informer.Informer[*apiv1.VirtualMachineSnapshot]
	Contents *informer.Informer[*apiv1.VirtualMachineSnapshotContent]
}

func sourceKey(ns, kind, name string) string { return ns + "/" + kind + "/" + name }

// New registers the controller's index and handlers on the informers;
// call it before they run.
func New(opts Options, inf Informers, exports Writer, log *slog.Logger) *Controller {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if log == nil {
		log = slog.Default()
	}
	c := &Controller{
		opts: opts, expInf: inf.Exports, vmInf: inf.VMs, vmiInf: inf.VMIs, nodeInf: inf.Nodes,
		classInf: inf.Classes, snapInf: inf.Snaps, contInf: inf.Contents, exports: exports,
		log: log.With("controller", "export"), queue: controller.NewQueue("export"),
	}
	c.expInf.AddIndex(sourceIndex, func(e *apiv1.VirtualMachineExport) []string {
		return []string{sourceKey(e.GetMetadata().GetNamespace(), e.GetSpec().GetSourceKind(), e.GetSpec().GetSourceName())}
	})
	c.expInf.AddHandler(informer.Handler[*apiv1.VirtualMachineExport]{
		OnAdd:    func(e *apiv1.VirtualMachineExport) { c.queue.Add(informer.Key(e)) },
		OnUpdate: func(_, e *apiv1.VirtualMachineExport) { c.queue.Add(informer.Key(e)) },
	})
	bySource := func(kind string) func(ns, name string) {
		return func(ns, name string) {
			for _, e := range c.expInf.ByIndex(sourceIndex, sourceKey(ns, kind, name)) {
				if !e.Terminal() {
					c.queue.Add(informer.Key(e))
				}
			}
		}
	}
	vm, snap := bySource(apiv1.KindVirtualMachine), bySource(apiv1.KindSnapshot)
	onMeta := func(f func(ns, name string)) func(md *apiv1.ObjectMeta) {
		return func(md *apiv1.ObjectMeta) { f(md.GetNamespace(), md.GetName()) }
	}
	vmMeta, snapMeta := onMeta(vm), onMeta(snap)
	c.vmInf.AddHandler(informer.Handler[*apiv1.VirtualMachine]{
		OnAdd:    func(o *apiv1.VirtualMachine) { vmMeta(o.GetMetadata()) },
		OnUpdate: func(_, o *apiv1.VirtualMachine) { vmMeta(o.GetMetadata()) },
		OnDelete: func(o *apiv1.VirtualMachine) { vmMeta(o.GetMetadata()) },
	})
	// An instance is named after its VM: one appearing is the VM starting.
	c.vmiInf.AddHandler(informer.Handler[*apiv1.VirtualMachineInstance]{
		OnAdd:    func(o *apiv1.VirtualMachineInstance) { vmMeta(o.GetMetadata()) },
		OnDelete: func(o *apiv1.VirtualMachineInstance) { vmMeta(o.GetMetadata()) },
	})
	c.snapInf.AddHandler(informer.Handler[*apiv1.VirtualMachineSnapshot]{
		OnAdd:    func(o *apiv1.VirtualMachineSnapshot) { snapMeta(o.GetMetadata()) },
		OnUpdate: func(_, o *apiv1.VirtualMachineSnapshot) { snapMeta(o.GetMetadata()) },
		OnDelete: func(o *apiv1.VirtualMachineSnapshot) { snapMeta(o.GetMetadata()) },
	})
	// Nodes, classes and contents change rarely: every live export is
	// looked at again.
	all := func() {
		for _, e := range c.expInf.List() {
			if !e.Terminal() {
				c.queue.Add(informer.Key(e))
			}
		}
	}
	c.nodeInf.AddHandler(informer.Handler[*apiv1.Node]{
		OnAdd: func(*apiv1.Node) { all() },
		OnUpdate: func(old, n *apiv1.Node) {
			if old.GetStatus().GetExportAddress() != n.GetStatus().GetExportAddress() ||
				old.GetStatus().GetExportCertificate() != n.GetStatus().GetExportCertificate() ||
				!slices.EqualFunc(old.GetStatus().GetStorage(), n.GetStatus().GetStorage(), func(a, b *apiv1.NodeStorage) bool { return proto.Equal(a, b) }) {
				all()
			}
		},
		OnDelete: func(*apiv1.Node) { all() },
	})
	c.contInf.AddHandler(informer.Handler[*apiv1.VirtualMachineSnapshotContent]{
		OnAdd:    func(*apiv1.VirtualMachineSnapshotContent) { all() },
		OnUpdate: func(*apiv1.VirtualMachineSnapshotContent, *apiv1.VirtualMachineSnapshotContent) { all() },
	})
	return c
}

// Run waits for the caches and processes exports until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	if !controller.WaitForSynced(ctx, c.queue, c.expInf.Synced(), c.vmInf.Synced(), c.vmiInf.Synced(),
		c.nodeInf.Synced(), c.classInf.Synced(), c.snapInf.Synced(), c.contInf.Synced()) {
		return
	}
	c.log.Info("starting", "workers", workers)
	controller.Run(ctx, "export", c.queue, workers, c, c.log)
}
