// Package restore is the VirtualMachineRestore controller (KubeVirt's
// pkg/storage/snapshot/restore.go): it puts a snapshot's spec and volume
// data into a VM, the snapshot's own or a new one (docs/snapshots.md,
// "Restore flow").
//
// Pending checks the snapshot, makes or checks the target and locks it;
// one write then hands the volumes to the snapshot's node (Staging),
// which copies them beside the target's. Committing, written once the
// copies are staged, is the commit point: from there the restore only
// goes forward (the node swaps the volumes in, the controller writes the
// spec), so a crash anywhere leaves either the VM as it was or, once
// resumed, the VM restored. Before it every failure ends in Failed with
// the target as it was.
package restore

import (
	"context"
	"log/slog"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller"
	"github.com/virtplane/terraform-provider-virtplane/internal/informer"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// Options tune the controller.
type Options struct {
	// Clock is time.Now when nil: the readiness grace period, condition
	// and restore times.
	Clock func() time.Time
	// NodeGone reports whether node name is no longer registered (an
	// admin deleted it): a deleting restore's data finalizer is dropped
	// for it, as the staged copies went with its disk. Nil: every node is
	// there.
	NodeGone func(name string) bool
}

// RestoreWriter writes a restore (finalizer, labels, status) with
// compare-and-swap against the cached version.
type RestoreWriter interface {
	Update(ctx context.Context, r *apiv1.VirtualMachineRestore) (*apiv1.VirtualMachineRestore, error)
}

// VMStore is how the controller acts on the target: it makes a new one,
// locks, stops, restores and unlocks it with read-modify-writes that keep
// every other writer's change, and deletes one it made when the restore
// fails. Get reads a target the cache may not show yet.
type VMStore interface {
	Create(ctx context.Context, vm *apiv1.VirtualMachine) (*apiv1.VirtualMachine, error)
	Get(ctx context.Context, namespace, name string) (*apiv1.VirtualMachine, error)
	GuaranteedUpdate(ctx context.Context, namespace, name string,
		fn func(*apiv1.VirtualMachine) (*apiv1.VirtualMachine, error)) (*apiv1.VirtualMachine, error)
	Delete(ctx context.Context, namespace, name string, opts store.DeleteOptions) (*apiv1.VirtualMachine, bool, error)
}

// ContentReader reads a content fresh when the cache does not have it:
// after the commit point the target's spec must come from it.
type ContentReader interface {
	Get(ctx context.Context, namespace, name string) (*apiv1.VirtualMachineSnapshotContent, error)
}

// Requeue delays; events usually come first.
const (
	staleRequeue = time.Second
	// waitRequeue bounds a wait for the target to stop or unlock.
	waitRequeue = 5 * time.Second
)

// Informer indexes of restores.
const (
	targetIndex   = "restore.target"   // "namespace/target VM"
	snapshotIndex = "restore.snapshot" // "namespace/snapshot"
)

// Controller is the restore controller.
type Controller struct {
	opts     Options
	restores informer.Lister[*apiv1.VirtualMachineRestore]
	snaps    informer.Lister[*apiv1.VirtualMachineSnapshot]
	contents informer.Lister[*apiv1.VirtualMachineSnapshotContent]
	vms      informer.Lister[*apiv1.VirtualMachine]
	vmis     informer.Lister[*apiv1.VirtualMachineInstance]
	rSt      RestoreWriter
	vmSt     VMStore
	contSt   ContentReader
	writes   *controller.WrittenVersions
	queue    controller.Queue
	log      *slog.Logger
	synced   []<-chan struct{}
}

// New registers the controller's indexes and handlers on the informers,
// which the caller runs afterwards.
func New(opts Options, rInf *informer.Informer[*apiv1.VirtualMachineRestore],
	snapInf *informer.Informer[*apiv1.VirtualMachineSnapshot],
	contInf *informer.Informer[*apiv1.VirtualMachineSnapshotContent],
	vmInf *informer.Informer[*apiv1.VirtualMachine], vmiInf *informer.Informer[*apiv1.VirtualMachineInstance],
	rSt RestoreWriter, vmSt VMStore, contSt ContentReader, log *slog.Logger) *Controller {
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if log == nil {
		log = slog.Default()
	}
	c := &Controller{
		opts: opts, restores: rInf, snaps: snapInf, contents: contInf, vms: vmInf, vmis: vmiInf,
		rSt: rSt, vmSt: vmSt, contSt: contSt,
		writes: controller.NewWrittenVersions(),
		queue:  controller.NewQueue("restore"),
		log:    log.With("controller", "restore"),
		synced: []<-chan struct{}{rInf.Synced(), snapInf.Synced(), contInf.Synced(), vmInf.Synced(), vmiInf.Synced()},
	}
	rInf.AddIndex(targetIndex, func(r *apiv1.VirtualMachineRestore) []string {
		return []string{apiv1.Ref(r.GetMetadata().GetNamespace(), r.GetSpec().GetTarget())}
	})
	rInf.AddIndex(snapshotIndex, func(r *apiv1.VirtualMachineRestore) []string {
		return []string{apiv1.Ref(r.GetMetadata().GetNamespace(), r.GetSpec().GetSnapshot())}
	})
	enqueue := func(r *apiv1.VirtualMachineRestore) { c.queue.Add(informer.Key(r)) }
	rInf.AddHandler(informer.Handler[*apiv1.VirtualMachineRestore]{
		OnAdd:    enqueue,
		OnUpdate: func(_, r *apiv1.VirtualMachineRestore) { enqueue(r) },
		OnDelete: func(r *apiv1.VirtualMachineRestore) { c.writes.Forget(informer.Key(r)) },
	})
	byIndex := func(index, key string) {
		for _, r := range c.restores.ByIndex(index, key) {
			enqueue(r)
		}
	}
	bySnapshot := func(s *apiv1.VirtualMachineSnapshot) { byIndex(snapshotIndex, informer.Key(s)) }
	snapInf.AddHandler(informer.Handler[*apiv1.VirtualMachineSnapshot]{
		OnAdd:    bySnapshot,
		OnUpdate: func(_, s *apiv1.VirtualMachineSnapshot) { bySnapshot(s) },
		OnDelete: bySnapshot,
	})
	byContent := func(ct *apiv1.VirtualMachineSnapshotContent) {
		byIndex(snapshotIndex, apiv1.Ref(ct.GetMetadata().GetNamespace(), ct.GetSpec().GetSnapshotName()))
	}
	contInf.AddHandler(informer.Handler[*apiv1.VirtualMachineSnapshotContent]{
		OnAdd:    byContent,
		OnUpdate: func(_, ct *apiv1.VirtualMachineSnapshotContent) { byContent(ct) },
		OnDelete: byContent,
	})
	byTarget := func(obj store.Object) { byIndex(targetIndex, informer.Key(obj)) }
	vmInf.AddHandler(informer.Handler[*apiv1.VirtualMachine]{
		OnAdd:    func(vm *apiv1.VirtualMachine) { byTarget(vm) },
		OnUpdate: func(_, vm *apiv1.VirtualMachine) { byTarget(vm) },
		OnDelete: func(vm *apiv1.VirtualMachine) { byTarget(vm) },
	})
	// An instance coming or going is what a restore waiting for its
	// target to stop waits for; its status writes in between are not.
	vmiInf.AddHandler(informer.Handler[*apiv1.VirtualMachineInstance]{
		OnAdd:    func(v *apiv1.VirtualMachineInstance) { byTarget(v) },
		OnDelete: func(v *apiv1.VirtualMachineInstance) { byTarget(v) },
	})
	return c
}

// Run processes restores with workers goroutines until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	if !controller.WaitForSynced(ctx, c.queue, c.synced...) {
		return
	}
	controller.Run(ctx, "restore", c.queue, workers, c, c.log)
}
