// Package pool is the VirtualMachinePool controller (KubeVirt's
// pkg/virt-controller/watch/pool): it keeps a pool's number of VMs, named
// <pool>-<ordinal> with the lowest free ordinals, rolls a changed template
// out to them a few at a time, and deletes them with the pool.
//
// One pass over a pool reads it, its VMs and their instances from the
// caches, then: releases owned VMs whose labels left the selector, adds
// the pool's finalizer, creates or deletes VMs (scale), updates and
// restarts outdated VMs (rollout, only once the scale is stable), and
// writes the pool's status once, if it changed. A deleted pool deletes its
// VMs and drops its finalizer once the cache shows none left.
//
// The pool owns VMs, not instances: a VM's instance and its persistent
// volumes are the VM controller's and the node agent's business, and
// live as long as the VM does. A rollout restarts a VM by queueing
// [Stop(uid), Start] on it, as the restart verb does, in the same write
// that gives it the new template; the VM controller then replaces that
// one instance. Only a RunStrategy Once VM, which the verb refuses, has
// its instance deleted by the pool instead.
package pool

import (
	"context"
	"log/slog"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller"
	"github.com/virtplane/terraform-provider-virtplane/internal/informer"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

const (
	// burstReplicas caps the creates, deletes and VM updates of one pass
	// (KubeVirt's burstReplicas): a pool scaled by thousands gets there
	// in steps, each seen by the cache before the next.
	burstReplicas = 250
	// rolloutInterval is how soon a pool is looked at again while VMs
	// still wait for their turn in a rollout (KubeVirt's 3 s).
	rolloutInterval = 3 * time.Second
	// staleRequeue is how soon a pass that found the cache behind the
	// controller's own write looks again; the write's event usually
	// brings the pool back first.
	staleRequeue = time.Second
	// expectationsRequeue is how soon a pass that waits for its cache to
	// show its own creates and deletes looks again, in case an event was
	// lost (a re-list after compaction does not replay every change).
	expectationsRequeue = 5 * time.Second
)

// ownerIndex is the VM informer index by the uid of the pool that
// controls the VM.
const ownerIndex = "pool-owner-uid"

// Options tune the controller.
type Options struct {
	// Clock is time.Now when nil: condition times and expectations.
	Clock func() time.Time
}

// PoolWriter is how the controller writes a pool: its finalizer and
// status, with compare-and-swap against the cached version.
type PoolWriter interface {
	Update(ctx context.Context, p *apiv1.VirtualMachinePool) (*apiv1.VirtualMachinePool, error)
}

// VMWriter is how the controller acts on a pool's VMs: it creates them,
// updates them (template, release, restart request) with compare-and-swap,
// and deletes them.
type VMWriter interface {
	Create(ctx context.Context, vm *apiv1.VirtualMachine) (*apiv1.VirtualMachine, error)
	Update(ctx context.Context, vm *apiv1.VirtualMachine) (*apiv1.VirtualMachine, error)
	Delete(ctx context.Context, namespace, name string, opts store.DeleteOptions) (*apiv1.VirtualMachine, bool, error)
}

// VMIDeleter deletes an instance. The only instances the controller
// deletes are those of RunStrategy Once VMs that a rollout restarts: the
// restart verb refuses Once, and without its instance such a VM starts
// once more, from the new template.
type VMIDeleter interface {
	Delete(ctx context.Context, namespace, name string, opts store.DeleteOptions) (*apiv1.VirtualMachineInstance, bool, error)
}

// Controller is the pool controller.
type Controller struct {
	opts     Options
	pools    informer.Lister[*apiv1.VirtualMachinePool]
	vms      informer.Lister[*apiv1.VirtualMachine]
	vmis     informer.Lister[*apiv1.VirtualMachineInstance]
	poolSt   PoolWriter
	vmSt     VMWriter
	vmiSt    VMIDeleter
	exp      *controller.Expectations
	poolWrit *controller.WrittenVersions // pool keys
	vmWrit   *controller.WrittenVersions // VM keys
	queue    controller.Queue
	log      *slog.Logger
	synced   []<-chan struct{}
}

// New wires the controller to its informers, which the caller runs: it
// registers the VM index it needs and the event handlers, so it must be
// called before the informers start.
func New(opts Options, poolInf *informer.Informer[*apiv1.VirtualMachinePool], vmInf *informer.Informer[*apiv1.VirtualMachine],
	vmiInf *informer.Informer[*apiv1.VirtualMachineInstance], poolSt PoolWriter, vmSt VMWriter, vmiSt VMIDeleter, log *slog.Logger) *Controller {
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if log == nil {
		log = slog.Default()
	}
	c := &Controller{
		opts: opts, pools: poolInf, vms: vmInf, vmis: vmiInf, poolSt: poolSt, vmSt: vmSt, vmiSt: vmiSt,
		exp:      controller.NewExpectations(opts.Clock),
		poolWrit: controller.NewWrittenVersions(),
		vmWrit:   controller.NewWrittenVersions(),
		queue:    controller.NewQueue("pool"),
		log:      log.With("controller", "pool"),
		synced:   []<-chan struct{}{poolInf.Synced(), vmInf.Synced(), vmiInf.Synced()},
	}
	vmInf.AddIndex(ownerIndex, func(vm *apiv1.VirtualMachine) []string {
		if ref := poolRef(vm); ref != nil {
			return []string{ref.GetUid()}
		}
		return nil
	})
	poolInf.AddHandler(informer.Handler[*apiv1.VirtualMachinePool]{
		OnAdd:    func(p *apiv1.VirtualMachinePool) { c.queue.Add(informer.Key(p)) },
		OnUpdate: func(_, p *apiv1.VirtualMachinePool) { c.queue.Add(informer.Key(p)) },
		OnDelete: func(p *apiv1.VirtualMachinePool) { c.queue.Add(informer.Key(p)) },
	})
	vmInf.AddHandler(informer.Handler[*apiv1.VirtualMachine]{
		OnAdd:    c.vmAdded,
		OnUpdate: c.vmUpdated,
		OnDelete: c.vmDeleted,
	})
	vmiInf.AddHandler(informer.Handler[*apiv1.VirtualMachineInstance]{
		OnAdd: c.enqueueForVMI,
		OnUpdate: func(old, vmi *apiv1.VirtualMachineInstance) {
			if vmiChanged(old, vmi) {
				c.enqueueForVMI(vmi)
			}
		},
		OnDelete: c.enqueueForVMI,
	})
	return c
}

// Run processes pools with workers goroutines until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	if !controller.WaitForSynced(ctx, c.queue, c.synced...) {
		return
	}
	controller.Run(ctx, "pool", c.queue, workers, c, c.log)
}

// poolRef is vm's controller owner reference when a pool controls it.
func poolRef(vm *apiv1.VirtualMachine) *apiv1.OwnerReference {
	for _, o := range vm.GetMetadata().GetOwnerReferences() {
		if o.GetController() {
			if o.GetKind() == apiv1.KindPool {
				return o
			}
			return nil
		}
	}
	return nil
}

// poolKey is the informer key of the pool that controls vm, "" if none.
func poolKey(vm *apiv1.VirtualMachine) string {
	ref := poolRef(vm)
	if ref == nil {
		return ""
	}
	return apiv1.Ref(vm.GetMetadata().GetNamespace(), ref.GetName())
}

func (c *Controller) vmAdded(vm *apiv1.VirtualMachine) {
	if key := poolKey(vm); key != "" {
		c.exp.CreationObserved(key)
		c.queue.Add(key)
	}
}

func (c *Controller) vmUpdated(old, vm *apiv1.VirtualMachine) {
	key := poolKey(vm)
	if key != "" {
		if old.GetMetadata().GetDeletionTimestamp() == nil && vm.GetMetadata().GetDeletionTimestamp() != nil {
			c.exp.DeletionObserved(key)
		}
		c.queue.Add(key)
	}
	// A released VM (or one someone else took over) tells its old pool.
	if oldKey := poolKey(old); oldKey != "" && oldKey != key {
		c.queue.Add(oldKey)
	}
}

func (c *Controller) vmDeleted(vm *apiv1.VirtualMachine) {
	c.vmWrit.Forget(informer.Key(vm))
	if key := poolKey(vm); key != "" {
		// A VM deleted through its finalizers was observed when its
		// deletion timestamp appeared.
		if vm.GetMetadata().GetDeletionTimestamp() == nil {
			c.exp.DeletionObserved(key)
		}
		c.queue.Add(key)
	}
}

// enqueueForVMI queues the pool of the instance's VM: instances coming,
// going and getting ready move a rollout on and change the status.
func (c *Controller) enqueueForVMI(vmi *apiv1.VirtualMachineInstance) {
	vm, ok := c.vms.GetByKey(informer.Key(vmi))
	if !ok {
		return
	}
	if key := poolKey(vm); key != "" {
		c.queue.Add(key)
	}
}

// vmiChanged reports an instance update that a pool pass may decide
// differently on; the guest's many status writes in between are not.
func vmiChanged(old, vmi *apiv1.VirtualMachineInstance) bool {
	om, nm := old.GetMetadata(), vmi.GetMetadata()
	return om.GetUid() != nm.GetUid() ||
		(om.GetDeletionTimestamp() == nil) != (nm.GetDeletionTimestamp() == nil) ||
		om.GetLabels()[apiv1.LabelPoolRevision] != nm.GetLabels()[apiv1.LabelPoolRevision] ||
		old.GetStatus().GetPhase() != vmi.GetStatus().GetPhase() ||
		apiv1.IsConditionTrue(old.GetStatus().GetConditions(), apiv1.ConditionReady) !=
			apiv1.IsConditionTrue(vmi.GetStatus().GetConditions(), apiv1.ConditionReady)
}
