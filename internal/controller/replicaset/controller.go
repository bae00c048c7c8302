// Package replicaset is the VirtualMachineInstanceReplicaSet controller
// (KubeVirt's pkg/virt-controller/watch/replicaset): it keeps the number
// of instances (VMIs) a replica set asks for, made from its template.
//
// One pass over a key claims the instances of the replica set's namespace
// (adopting matching orphans, releasing owned ones that stopped matching),
// creates or deletes instances to reach spec.replicas, deletes finished
// ones once they are replaced, and writes the status if it changed.
// Expectations stop a pass from scaling again before the cache has shown
// the creates and deletes of the last one, so a replica set never
// overshoots; a new leader starts with none and from a fresh listing,
// which holds every create that reached etcd (writes are fenced by the
// leader term).
//
// Unlike KubeVirt's, the controller holds a finalizer on each live replica
// set and deletes its instances when the replica set is deleted (users
// asked for that cascade, kubevirt#590), and scales down the instances
// that are not running yet first, then the unready ones, then the newest
// (KubeVirt deletes in cache order and left that as a TODO).
package replicaset

import (
	"context"
	"log/slog"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller"
	"github.com/virtplane/terraform-provider-virtplane/internal/informer"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// Defaults of Options.
const (
	// DefaultBurstReplicas is KubeVirt's burstReplicas
	// (pkg/controller/controller.go).
	DefaultBurstReplicas = 250
	// DefaultParallelism bounds the store calls of one pass in flight at
	// once: enough that 200 creates take a few round trips, few enough not
	// to flood etcd.
	DefaultParallelism = 16
)

// Options tune the controller. Zero values get the defaults.
type Options struct {
	// Clock stamps conditions and phase transitions and ages expectations.
	Clock func() time.Time
	// BurstReplicas caps the creates or deletes of one pass; a replica set
	// further off is converged over several passes.
	BurstReplicas int
	// Parallelism caps the store calls a pass has in flight.
	Parallelism int
}

func (o *Options) complete() {
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.BurstReplicas <= 0 {
		o.BurstReplicas = DefaultBurstReplicas
	}
	if o.Parallelism <= 0 {
		o.Parallelism = DefaultParallelism
	}
}

// ReplicaSetStore is how the controller reads and writes replica sets: a
// fresh read before adopting an orphan or collecting the instances of a
// vanished replica set (the cache may lag), and compare-and-swap updates
// of the finalizer and status.
type ReplicaSetStore interface {
	Get(ctx context.Context, namespace, name string) (*apiv1.VirtualMachineInstanceReplicaSet, error)
	Update(ctx context.Context, rs *apiv1.VirtualMachineInstanceReplicaSet) (*apiv1.VirtualMachineInstanceReplicaSet, error)
}

// InstanceStore is how the controller acts on instances: it creates and
// deletes them, and updates their owner references to adopt or release.
type InstanceStore interface {
	Create(ctx context.Context, vmi *apiv1.VirtualMachineInstance) (*apiv1.VirtualMachineInstance, error)
	Update(ctx context.Context, vmi *apiv1.VirtualMachineInstance) (*apiv1.VirtualMachineInstance, error)
	Delete(ctx context.Context, namespace, name string, opts store.DeleteOptions) (*apiv1.VirtualMachineInstance, bool, error)
}

// Informer index names this controller registers.
const (
	// ownerIndex: instances by the "namespace/name" of the replica set
	// their controller owner reference names (whatever its uid).
	ownerIndex = "replicaset.owner"
	// namespaceIndex: instances, and replica sets, by namespace.
	namespaceIndex = "replicaset.namespace"
)

// Controller is the replica set controller.
type Controller struct {
	opts   Options
	rss    informer.Lister[*apiv1.VirtualMachineInstanceReplicaSet]
	vmis   informer.Lister[*apiv1.VirtualMachineInstance]
	rsSt   ReplicaSetStore
	vmiSt  InstanceStore
	exp    *controller.Expectations
	dels   *deletions
	writes *controller.WrittenVersions
	queue  controller.Queue
	log    *slog.Logger
	synced []<-chan struct{}
	// newName names a new instance of a replica set; tests replace it to
	// force name collisions.
	newName func(rs string) string
}

// New registers the controller's indexes and handlers on the shared
// informers; call it before they run. The caller runs them.
func New(opts Options, rsInf *informer.Informer[*apiv1.VirtualMachineInstanceReplicaSet],
	vmiInf *informer.Informer[*apiv1.VirtualMachineInstance],
	rsSt ReplicaSetStore, vmiSt InstanceStore, log *slog.Logger) *Controller {
	opts.complete()
	if log == nil {
		log = slog.Default()
	}
	c := &Controller{
		opts: opts, rss: rsInf, vmis: vmiInf, rsSt: rsSt, vmiSt: vmiSt,
		exp:     controller.NewExpectations(opts.Clock),
		dels:    newDeletions(),
		writes:  controller.NewWrittenVersions(),
		queue:   controller.NewQueue("replicaset"),
		log:     log.With("controller", "replicaset"),
		synced:  []<-chan struct{}{rsInf.Synced(), vmiInf.Synced()},
		newName: apiv1.ReplicaSetInstanceName,
	}
	rsInf.AddIndex(namespaceIndex, func(rs *apiv1.VirtualMachineInstanceReplicaSet) []string {
		return []string{rs.GetMetadata().GetNamespace()}
	})
	vmiInf.AddIndex(namespaceIndex, func(v *apiv1.VirtualMachineInstance) []string {
		return []string{v.GetMetadata().GetNamespace()}
	})
	vmiInf.AddIndex(ownerIndex, func(v *apiv1.VirtualMachineInstance) []string {
		if k := ownerKey(v); k != "" {
			return []string{k}
		}
		return nil
	})
	enqueue := func(rs *apiv1.VirtualMachineInstanceReplicaSet) { c.queue.Add(informer.Key(rs)) }
	rsInf.AddHandler(informer.Handler[*apiv1.VirtualMachineInstanceReplicaSet]{
		OnAdd:    enqueue,
		OnUpdate: func(_, rs *apiv1.VirtualMachineInstanceReplicaSet) { enqueue(rs) },
		OnDelete: enqueue,
	})
	vmiInf.AddHandler(informer.Handler[*apiv1.VirtualMachineInstance]{
		OnAdd:    c.instanceAdded,
		OnUpdate: c.instanceUpdated,
		OnDelete: c.instanceDeleted,
	})
	return c
}

// Run processes keys with workers goroutines until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	if !controller.WaitForSynced(ctx, c.queue, c.synced...) {
		return
	}
	controller.Run(ctx, "replicaset", c.queue, workers, c, c.log)
}

// instanceAdded counts a create the owner expected and wakes the owner,
// or, for an orphan, every replica set that may adopt it.
func (c *Controller) instanceAdded(v *apiv1.VirtualMachineInstance) {
	if k := ownerKey(v); k != "" {
		c.exp.CreationObserved(k)
		c.queue.Add(k)
		return
	}
	c.enqueueSelecting(v)
}

func (c *Controller) instanceUpdated(old, v *apiv1.VirtualMachineInstance) {
	oldKey, key := ownerKey(old), ownerKey(v)
	if key != "" && v.GetMetadata().GetDeletionTimestamp() != nil {
		// Deleted while a finalizer (not ours) holds it: the deletion
		// shows now, not when the object goes.
		c.deletionObserved(key, v)
	}
	if oldKey != "" && oldKey != key {
		c.queue.Add(oldKey) // released, or taken over
	}
	if key != "" {
		c.queue.Add(key)
		return
	}
	if controllerRef(v) == nil {
		// An orphan, maybe relabelled into some selector.
		c.enqueueSelecting(v)
	}
}

func (c *Controller) instanceDeleted(v *apiv1.VirtualMachineInstance) {
	k := ownerKey(v)
	if k == "" {
		return // an orphan going away changes no replica set
	}
	c.deletionObserved(k, v)
	c.queue.Add(k)
}

// deletionObserved lowers rsKey's expectations if v is one of its own
// deletions, once: when its deletion timestamp shows or it goes.
func (c *Controller) deletionObserved(rsKey string, v *apiv1.VirtualMachineInstance) {
	if c.dels.observed(rsKey, informer.Key(v)) {
		c.exp.DeletionObserved(rsKey)
	}
}

// enqueueSelecting adds every replica set of v's namespace whose selector
// matches v.
func (c *Controller) enqueueSelecting(v *apiv1.VirtualMachineInstance) {
	for _, rs := range c.rss.ByIndex(namespaceIndex, v.GetMetadata().GetNamespace()) {
		if rs.GetSpec().GetSelector().Matches(v.GetMetadata().GetLabels()) {
			c.queue.Add(informer.Key(rs))
		}
	}
}

// controllerRef is v's controller owner reference, nil when it has none.
func controllerRef(v *apiv1.VirtualMachineInstance) *apiv1.OwnerReference {
	for _, o := range v.GetMetadata().GetOwnerReferences() {
		if o.GetController() {
			return o
		}
	}
	return nil
}

// ownerKey is the cache key of the replica set controlling v, "" when no
// replica set does.
func ownerKey(v *apiv1.VirtualMachineInstance) string {
	if o := controllerRef(v); o != nil && o.GetKind() == apiv1.KindReplicaSet {
		return apiv1.Ref(v.GetMetadata().GetNamespace(), o.GetName())
	}
	return ""
}

// controlledBy reports whether rs controls v (by uid: an instance of an
// earlier replica set of the same name is not this one's).
func controlledBy(v *apiv1.VirtualMachineInstance, rs *apiv1.VirtualMachineInstanceReplicaSet) bool {
	o := controllerRef(v)
	return o != nil && o.GetKind() == apiv1.KindReplicaSet && o.GetUid() == rs.GetMetadata().GetUid()
}
