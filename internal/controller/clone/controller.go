// Package clone is the VirtualMachineClone controller (KubeVirt's
// pkg/virt-controller/watch/clone): a clone of a VM is a snapshot of it
// restored with a new identity into the target name, after which both are
// deleted (docs/snapshots.md, "Clone"). From a snapshot it only restores.
//
// The controller only makes, watches and deletes a snapshot and a
// restore, named after the clone's uid and labelled with its name; the
// snapshot and restore controllers do the work.
package clone

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller"
	"github.com/virtplane/terraform-provider-virtplane/internal/informer"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// Options tune the controller.
type Options struct {
	// Clock is time.Now when nil: condition times.
	Clock func() time.Time
}

// CloneWriter writes a clone (finalizer, status) with compare-and-swap.
type CloneWriter interface {
	Update(ctx context.Context, cl *apiv1.VirtualMachineClone) (*apiv1.VirtualMachineClone, error)
}

// SnapshotStore makes and deletes the clone's snapshot, and reads it when
// the cache does not show it yet.
type SnapshotStore interface {
	Create(ctx context.Context, s *apiv1.VirtualMachineSnapshot) (*apiv1.VirtualMachineSnapshot, error)
	Get(ctx context.Context, namespace, name string) (*apiv1.VirtualMachineSnapshot, error)
	Delete(ctx context.Context, namespace, name string, opts store.DeleteOptions) (*apiv1.VirtualMachineSnapshot, bool, error)
}

// RestoreStore is SnapshotStore for the clone's restore.
type RestoreStore interface {
	Create(ctx context.Context, r *apiv1.VirtualMachineRestore) (*apiv1.VirtualMachineRestore, error)
	Get(ctx context.Context, namespace, name string) (*apiv1.VirtualMachineRestore, error)
	Delete(ctx context.Context, namespace, name string, opts store.DeleteOptions) (*apiv1.VirtualMachineRestore, bool, error)
}

const staleRequeue = time.Second

// Controller is the clone controller.
type Controller struct {
	opts     Options
	clones   informer.Lister[*apiv1.VirtualMachineClone]
	snaps    informer.Lister[*apiv1.VirtualMachineSnapshot]
	restores informer.Lister[*apiv1.VirtualMachineRestore]
	vms      informer.Lister[*apiv1.VirtualMachine]
	clSt     CloneWriter
	snapSt   SnapshotStore
	rSt      RestoreStore
	writes   *controller.WrittenVersions
	queue    controller.Queue
	log      *slog.Logger
	synced   []<-chan struct{}
}

// New registers the controller's handlers on the informers, which the
// caller runs afterwards.
func New(opts Options, clInf *informer.Informer[*apiv1.VirtualMachineClone],
	snapInf *informer.Informer[*apiv1.VirtualMachineSnapshot], rInf *informer.Informer[*apiv1.VirtualMachineRestore],
	vmInf *informer.Informer[*apiv1.VirtualMachine],
	clSt CloneWriter, snapSt SnapshotStore, rSt RestoreStore, log *slog.Logger) *Controller {
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if log == nil {
		log = slog.Default()
	}
	c := &Controller{
		opts: opts, clones: clInf, snaps: snapInf, restores: rInf, vms: vmInf,
		clSt: clSt, snapSt: snapSt, rSt: rSt,
		writes: controller.NewWrittenVersions(),
		queue:  controller.NewQueue("clone"),
		log:    log.With("controller", "clone"),
		synced: []<-chan struct{}{clInf.Synced(), snapInf.Synced(), rInf.Synced(), vmInf.Synced()},
	}
	enqueue := func(cl *apiv1.VirtualMachineClone) { c.queue.Add(informer.Key(cl)) }
	clInf.AddHandler(informer.Handler[*apiv1.VirtualMachineClone]{
		OnAdd:    enqueue,
		OnUpdate: func(_, cl *apiv1.VirtualMachineClone) { enqueue(cl) },
		OnDelete: func(cl *apiv1.VirtualMachineClone) { c.writes.Forget(informer.Key(cl)) },
	})
	// What a clone made carries its name; a clone from a snapshot also
	// waits on that snapshot through its restore.
	byLabel := func(obj store.Object) {
		if name := obj.GetMetadata().GetLabels()[apiv1.LabelCloneSource]; name != "" {
			c.queue.Add(apiv1.Ref(obj.GetMetadata().GetNamespace(), name))
		}
	}
	snapInf.AddHandler(informer.Handler[*apiv1.VirtualMachineSnapshot]{
		OnAdd:    func(s *apiv1.VirtualMachineSnapshot) { byLabel(s) },
		OnUpdate: func(_, s *apiv1.VirtualMachineSnapshot) { byLabel(s) },
		OnDelete: func(s *apiv1.VirtualMachineSnapshot) { byLabel(s) },
	})
	rInf.AddHandler(informer.Handler[*apiv1.VirtualMachineRestore]{
		OnAdd:    func(r *apiv1.VirtualMachineRestore) { byLabel(r) },
		OnUpdate: func(_, r *apiv1.VirtualMachineRestore) { byLabel(r) },
		OnDelete: func(r *apiv1.VirtualMachineRestore) { byLabel(r) },
	})
	return c
}

// Run processes clones with workers goroutines until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	if !controller.WaitForSynced(ctx, c.queue, c.synced...) {
		return
	}
	controller.Run(ctx, "clone", c.queue, workers, c, c.log)
}

// write stores next with compare-and-swap on the cached version.
func (c *Controller) write(ctx context.Context, key string, next *apiv1.VirtualMachineClone) error {
	out, err := c.clSt.Update(ctx, next)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil
	case err != nil:
		return fmt.Errorf("writing clone %s: %w", key, err)
	}
	if out.GetMetadata().GetDeletionTimestamp() == nil || len(out.GetMetadata().GetFinalizers()) > 0 {
		c.writes.Wrote(key, out.GetMetadata().GetResourceVersion())
	}
	return nil
}

// madeSnapshot is the snapshot the clone made ("" from a snapshot source,
// whose snapshot is the user's and stays).
func madeSnapshot(cl *apiv1.VirtualMachineClone) string {
	if sourceKind(cl) != apiv1.CloneSourceVM {
		return ""
	}
	return apiv1.CloneSnapshotName(cl.GetMetadata().GetUid())
}

func sourceKind(cl *apiv1.VirtualMachineClone) string {
	if k := cl.GetSpec().GetSourceKind(); k != "" {
		return k
	}
	return apiv1.CloneSourceVM
}

func withoutFinalizer(cl *apiv1.VirtualMachineClone) *apiv1.VirtualMachineClone {
	next := proto.Clone(cl).(*apiv1.VirtualMachineClone)
	next.Metadata.Finalizers = slices.DeleteFunc(next.Metadata.Finalizers, func(f string) bool { return f == apiv1.FinalizerClone })
	return next
}
