package storage

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/ceph"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller"
	"github.com/virtplane/terraform-provider-virtplane/internal/informer"
)

// Volumes is the storage controller's part in snapshots, restores and
// clones of volumes on rbd classes (docs/snapshots.md), a CSI controller
// plugin's CreateSnapshot, restore-from-snapshot and DeleteSnapshot: it
// takes the RBD snapshots of contents that need no node (the VM does not
// run and its volumes are all on rbd classes), clones a restore's RBD
// snapshots beside the target's images and swaps them in (whatever the
// restore's node, or with none), and collects what no object needs any
// more: the images of deleted VMs, the RBD snapshots of deleted
// contents, retired and abandoned staged images.
// Nothing here depends on a node: a snapshot on RBD outlives the node
// its VM ran on, and is restored onto any other.
type Volumes struct {
	c        *Controller
	opts     VolumeOptions
	contents informer.Lister[*apiv1.VirtualMachineSnapshotContent]
	restores informer.Lister[*apiv1.VirtualMachineRestore]
	snaps    informer.Lister[*apiv1.VirtualMachineSnapshot]
	// vms say which VMs exist: the images of the others are collected.
	vms    informer.Lister[*apiv1.VirtualMachine]
	contSt ContentStore
	rSt    RestoreStore
	queue  controller.Queue
	log    *slog.Logger
	synced []<-chan struct{}

	mu sync.Mutex
	// orphans are what a collection found unneeded, by class and
	// image[@snap], and when it first did: acted on only once still
	// unneeded a grace later (an object the caches do not show yet).
	orphans map[string]time.Time
}

// VolumeOptions tune Volumes. Zero values get the defaults.
type VolumeOptions struct {
	// CollectInterval is how often each rbd class's pool is looked over
	// for what no object needs (default 1m); deletions look sooner.
	CollectInterval time.Duration
	// Grace is how long something stays unneeded before it is removed
	// (default 10s): an object just made may not be in the caches yet.
	Grace time.Duration
}

// ContentStore writes a content's status (the server's contents).
type ContentStore interface {
	GuaranteedUpdate(ctx context.Context, namespace, name string,
		fn func(*apiv1.VirtualMachineSnapshotContent) (*apiv1.VirtualMachineSnapshotContent, error)) (*apiv1.VirtualMachineSnapshotContent, error)
}

// RestoreStore writes a restore's status (its storage part).
type RestoreStore interface {
	GuaranteedUpdate(ctx context.Context, namespace, name string,
		fn func(*apiv1.VirtualMachineRestore) (*apiv1.VirtualMachineRestore, error)) (*apiv1.VirtualMachineRestore, error)
}

// Queue keys: a content, a restore or a class's collection.
const (
	keyContent = "content/"
	keyRestore = "restore/"
	keyCollect = "collect/"
)

// NewVolumes registers its handlers on the informers, which the caller
// runs afterwards; c gives the classes and their connections.
func NewVolumes(c *Controller, opts VolumeOptions,
	contents *informer.Informer[*apiv1.VirtualMachineSnapshotContent], restores *informer.Informer[*apiv1.VirtualMachineRestore],
	snaps *informer.Informer[*apiv1.VirtualMachineSnapshot], vms *informer.Informer[*apiv1.VirtualMachine],
	contSt ContentStore, rSt RestoreStore, log *slog.Logger) *Volumes {
	if opts.CollectInterval <= 0 {
		opts.CollectInterval = time.Minute
	}
	if opts.Grace <= 0 {
		opts.Grace = 10 * time.Second
	}
	if log == nil {
		log = slog.Default()
	}
	v := &Volumes{c: c, opts: opts, contents: contents, restores: restores, snaps: snaps, vms: vms,
		contSt: contSt, rSt: rSt, queue: controller.NewQueue("storage-volumes"), log: log.With("controller", "storage-volumes"),
		synced:  []<-chan struct{}{c.classes.Synced(), contents.Synced(), restores.Synced(), snaps.Synced(), vms.Synced()},
		orphans: map[string]time.Time{}}
	content := func(ct *apiv1.VirtualMachineSnapshotContent) {
		if serverContent(ct) {
			v.queue.Add(keyContent + informer.Key(ct))
		}
	}
	contents.AddHandler(informer.Handler[*apiv1.VirtualMachineSnapshotContent]{
		OnAdd:    content,
		OnUpdate: func(_, ct *apiv1.VirtualMachineSnapshotContent) { content(ct) },
		OnDelete: func(*apiv1.VirtualMachineSnapshotContent) { v.collectAll() },
	})
	restore := func(r *apiv1.VirtualMachineRestore) {
		if hasRBD(r) {
			v.queue.Add(keyRestore + informer.Key(r))
		}
	}
	restores.AddHandler(informer.Handler[*apiv1.VirtualMachineRestore]{
		OnAdd:    restore,
		OnUpdate: func(_, r *apiv1.VirtualMachineRestore) { restore(r) },
		OnDelete: func(r *apiv1.VirtualMachineRestore) {
			if hasRBD(r) {
				v.collectAll()
			}
		},
	})
	// A deleted VM's images go a grace after it, not at the next
	// interval.
	vms.AddHandler(informer.Handler[*apiv1.VirtualMachine]{OnDelete: func(*apiv1.VirtualMachine) { v.collectAll() }})
	c.classes.AddHandler(informer.Handler[*apiv1.StorageClass]{OnAdd: func(sc *apiv1.StorageClass) {
		if sc.GetSpec().GetRbd() != nil {
			v.queue.Add(keyCollect + sc.GetMetadata().GetName())
		}
	}})
	return v
}

// serverContent reports a content the server takes: no node's.
func serverContent(ct *apiv1.VirtualMachineSnapshotContent) bool {
	return ct.GetSpec().GetNodeName() == "" && ct.GetMetadata().GetLabels()[apiv1.LabelNodeName] == ""
}

// hasRBD reports a restore with volumes restored from RBD snapshots.
func hasRBD(r *apiv1.VirtualMachineRestore) bool {
	for _, vr := range r.GetStatus().GetRestores() {
		if vr.OnRBD() {
			return true
		}
	}
	return false
}

// collectAll asks for a collection of every rbd class.
func (v *Volumes) collectAll() {
	for _, sc := range v.c.classes.List() {
		if sc.GetSpec().GetRbd() != nil {
			v.queue.Add(keyCollect + sc.GetMetadata().GetName())
		}
	}
}

// Run waits for the caches and works until ctx ends.
func (v *Volumes) Run(ctx context.Context, workers int) {
	if !controller.WaitForSynced(ctx, v.queue, v.synced...) {
		return
	}
	v.log.Info("starting", "workers", workers)
	controller.Run(ctx, "storage-volumes", v.queue, workers, v, v.log)
}

// Reconcile implements controller.Reconciler.
func (v *Volumes) Reconcile(ctx context.Context, key string) (controller.Result, error) {
	switch {
	case strings.HasPrefix(key, keyContent):
		return v.content(ctx, strings.TrimPrefix(key, keyContent))
	case strings.HasPrefix(key, keyRestore):
		return v.restore(ctx, strings.TrimPrefix(key, keyRestore))
	case strings.HasPrefix(key, keyCollect):
		return v.collect(ctx, strings.TrimPrefix(key, keyCollect))
	}
	return controller.Result{}, controller.TerminalError(fmt.Errorf("storage volumes: unknown key %q", key))
}

// rbdClass is class name as an rbd class with its connection, or why it
// cannot be used.
func (v *Volumes) rbdClass(name string) (*apiv1.StorageClass, *ceph.Conn, error) {
	sc, ok := v.c.classes.Get("", name)
	switch {
	case !ok:
		return nil, nil, fmt.Errorf("storage class %s does not exist", name)
	case sc.GetSpec().GetRbd() == nil:
		return nil, nil, fmt.Errorf("storage class %s is not an rbd class", name)
	}
	conn, err := v.c.conn(sc)
	if err != nil {
		return nil, nil, fmt.Errorf("storage class %s: %w", name, err)
	}
	return sc, conn, nil
}

// persistentVolumes are the persistent volumes of a VM spec by name.
func persistentVolumes(spec *apiv1.VirtualMachineSpec) map[string]*apiv1.PersistentVolume {
	out := map[string]*apiv1.PersistentVolume{}
	for _, vol := range spec.GetTemplate().GetSpec().GetVolumes() {
		if pv := vol.GetPersistent(); pv != nil {
			out[vol.GetName()] = pv
		}
	}
	return out
}
