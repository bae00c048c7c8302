// Package snapshot is the VirtualMachineSnapshot controller (KubeVirt's
// pkg/storage/snapshot, updateVMSnapshot): it locks the snapshot's VM,
// makes the VirtualMachineSnapshotContent the VM's node fills in, copies
// the outcome onto the snapshot and unlocks the VM (docs/snapshots.md,
// "Snapshot flow" steps 1, 2 and 4, and "Deleting").
//
// One pass over a snapshot reads it, its content, its VM and the VM's
// instance from the caches and moves it one step: finalizer and phase,
// lock, content, outcome or deadline. Every step is a store write whose
// event brings the snapshot back, and each is safe to repeat, so a new
// leader (or a crash between two writes) resumes where the store says.
package snapshot

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
	// Clock is time.Now when nil: deadlines, condition and creation times.
	Clock func() time.Time
	// NodeGone reports whether node name is no longer registered (an
	// admin deleted it): what it held on its disk went with it, so its
	// data finalizers are dropped for it and nothing waits for it. Nil:
	// every node is there.
	NodeGone func(name string) bool
	// Classes finds the storage classes of the VMs' volumes: a VM that
	// does not run and whose volumes are all on rbd classes is
	// snapshotted by the server's storage controller, with no node.
	// Nil: every volume needs a node, as local ones do.
	Classes informer.Lister[*apiv1.StorageClass]
}

// SnapshotWriter writes a snapshot (finalizer and status) with
// compare-and-swap against the cached version.
type SnapshotWriter interface {
	Update(ctx context.Context, s *apiv1.VirtualMachineSnapshot) (*apiv1.VirtualMachineSnapshot, error)
}

// ContentStore is how the controller acts on contents: it makes them,
// marks them abandoned, deletes them, and reads one fresh before dropping
// its snapshot's finalizer (the cache may not show a content it just
// made).
type ContentStore interface {
	Create(ctx context.Context, c *apiv1.VirtualMachineSnapshotContent) (*apiv1.VirtualMachineSnapshotContent, error)
	Get(ctx context.Context, namespace, name string) (*apiv1.VirtualMachineSnapshotContent, error)
	GuaranteedUpdate(ctx context.Context, namespace, name string,
		fn func(*apiv1.VirtualMachineSnapshotContent) (*apiv1.VirtualMachineSnapshotContent, error)) (*apiv1.VirtualMachineSnapshotContent, error)
	Delete(ctx context.Context, namespace, name string, opts store.DeleteOptions) (*apiv1.VirtualMachineSnapshotContent, bool, error)
}

// VMLocker writes the lock into a VM's status: a read-modify-write that
// sees every other writer's change, so two snapshots (or a snapshot and a
// restore) never both hold a VM.
type VMLocker interface {
	GuaranteedUpdate(ctx context.Context, namespace, name string,
		fn func(*apiv1.VirtualMachine) (*apiv1.VirtualMachine, error)) (*apiv1.VirtualMachine, error)
}

// Requeue delays. Events usually come first; these bound a wait for one
// that never does.
const (
	staleRequeue = time.Second
	// lockRetry is KubeVirt's 5 s between attempts to lock the source.
	lockRetry = 5 * time.Second
)

// sourceIndex indexes snapshots by "namespace/source VM": a VM or
// instance change wakes the snapshots of that VM.
const sourceIndex = "snapshot.source"

// Controller is the snapshot controller.
type Controller struct {
	opts     Options
	snaps    informer.Lister[*apiv1.VirtualMachineSnapshot]
	contents informer.Lister[*apiv1.VirtualMachineSnapshotContent]
	vms      informer.Lister[*apiv1.VirtualMachine]
	vmis     informer.Lister[*apiv1.VirtualMachineInstance]
	snapSt   SnapshotWriter
	contSt   ContentStore
	vmSt     VMLocker
	writes   *controller.WrittenVersions
	queue    controller.Queue
	log      *slog.Logger
	synced   []<-chan struct{}
}

// New registers the controller's index and handlers on the informers,
// which the caller runs afterwards.
func New(opts Options, snapInf *informer.Informer[*apiv1.VirtualMachineSnapshot],
	contInf *informer.Informer[*apiv1.VirtualMachineSnapshotContent],
	vmInf *informer.Informer[*apiv1.VirtualMachine], vmiInf *informer.Informer[*apiv1.VirtualMachineInstance],
	snapSt SnapshotWriter, contSt ContentStore, vmSt VMLocker, log *slog.Logger) *Controller {
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if log == nil {
		log = slog.Default()
	}
	c := &Controller{
		opts: opts, snaps: snapInf, contents: contInf, vms: vmInf, vmis: vmiInf,
		snapSt: snapSt, contSt: contSt, vmSt: vmSt,
		writes: controller.NewWrittenVersions(),
		queue:  controller.NewQueue("snapshot"),
		log:    log.With("controller", "snapshot"),
		synced: []<-chan struct{}{snapInf.Synced(), contInf.Synced(), vmInf.Synced(), vmiInf.Synced()},
	}
	snapInf.AddIndex(sourceIndex, func(s *apiv1.VirtualMachineSnapshot) []string {
		return []string{apiv1.Ref(s.GetMetadata().GetNamespace(), s.GetSpec().GetSource())}
	})
	enqueue := func(s *apiv1.VirtualMachineSnapshot) { c.queue.Add(informer.Key(s)) }
	snapInf.AddHandler(informer.Handler[*apiv1.VirtualMachineSnapshot]{
		OnAdd:    enqueue,
		OnUpdate: func(_, s *apiv1.VirtualMachineSnapshot) { enqueue(s) },
		OnDelete: func(s *apiv1.VirtualMachineSnapshot) { c.writes.Forget(informer.Key(s)) },
	})
	byContent := func(ct *apiv1.VirtualMachineSnapshotContent) {
		c.queue.Add(apiv1.Ref(ct.GetMetadata().GetNamespace(), ct.GetSpec().GetSnapshotName()))
	}
	contInf.AddHandler(informer.Handler[*apiv1.VirtualMachineSnapshotContent]{
		OnAdd:    byContent,
		OnUpdate: func(_, ct *apiv1.VirtualMachineSnapshotContent) { byContent(ct) },
		OnDelete: byContent,
	})
	bySource := func(obj store.Object) {
		for _, s := range c.snaps.ByIndex(sourceIndex, informer.Key(obj)) {
			enqueue(s)
		}
	}
	vmInf.AddHandler(informer.Handler[*apiv1.VirtualMachine]{
		OnAdd:    func(vm *apiv1.VirtualMachine) { bySource(vm) },
		OnUpdate: func(_, vm *apiv1.VirtualMachine) { bySource(vm) },
		OnDelete: func(vm *apiv1.VirtualMachine) { bySource(vm) },
	})
	vmiInf.AddHandler(informer.Handler[*apiv1.VirtualMachineInstance]{
		OnAdd: func(v *apiv1.VirtualMachineInstance) { bySource(v) },
		OnUpdate: func(old, v *apiv1.VirtualMachineInstance) {
			// Only a migration starting or ending changes whether the VM
			// can be locked; the guest's other status writes do not.
			if migrating(old) != migrating(v) {
				bySource(v)
			}
		},
		OnDelete: func(v *apiv1.VirtualMachineInstance) { bySource(v) },
	})
	return c
}

// Run processes snapshots with workers goroutines until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	if !controller.WaitForSynced(ctx, c.queue, c.synced...) {
		return
	}
	controller.Run(ctx, "snapshot", c.queue, workers, c, c.log)
}

// migrating reports an instance in a live migration that has not ended:
// its volumes are being copied to another node, so no snapshot now.
func migrating(v *apiv1.VirtualMachineInstance) bool {
	ms := v.GetStatus().GetMigrationState()
	return ms != nil && !ms.GetCompleted() && !ms.GetFailed()
}
