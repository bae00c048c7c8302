// Package vm is the VirtualMachine controller (KubeVirt's
// pkg/virt-controller/watch/vm): it keeps each VM's instance (VMI) in line
// with the VM's run strategy and writes the VM's status.
//
// One pass over a key reads the VM and its VMI from the caches, acts on the
// VMI (create, delete, finalizer handover) and then writes the VM once, if
// anything in it changed. Expectations stop a pass from acting again on a
// VMI it created or deleted before the cache has seen that write.
package vm

import (
	"context"
	"log/slog"
	"time"

	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller"
	"github.com/virtplane/terraform-provider-virtplane/internal/informer"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// Options tune the controller.
type Options struct {
	Clock func() time.Time
	// Rand returns a number in [0,1) for backoff jitter; nil uses math/rand.
	Rand func() float64
}

// VMWriter is how the controller writes a VM: its status and finalizer,
// with compare-and-swap against the cached version.
type VMWriter interface {
	Update(ctx context.Context, vm *apiv1.VirtualMachine) (*apiv1.VirtualMachine, error)
}

// VMIWriter is how the controller acts on a VM's instance: it creates and
// deletes it, and updates it to hand over its finalizer.
type VMIWriter interface {
	Create(ctx context.Context, vmi *apiv1.VirtualMachineInstance) (*apiv1.VirtualMachineInstance, error)
	Update(ctx context.Context, vmi *apiv1.VirtualMachineInstance) (*apiv1.VirtualMachineInstance, error)
	Delete(ctx context.Context, namespace, name string, opts store.DeleteOptions) (*apiv1.VirtualMachineInstance, bool, error)
}

// Controller is the VM controller.
type Controller struct {
	opts   Options
	vms    informer.Lister[*apiv1.VirtualMachine]
	vmis   informer.Lister[*apiv1.VirtualMachineInstance]
	vmSt   VMWriter
	vmiSt  VMIWriter
	exp    *controller.Expectations
	writes *controller.WrittenVersions
	queue  controller.Queue
	log    *slog.Logger
	synced []<-chan struct{}
}

// New wires the controller to its informers; they are run by the caller.
func New(opts Options, vmInf *informer.Informer[*apiv1.VirtualMachine], vmiInf *informer.Informer[*apiv1.VirtualMachineInstance],
	vmSt VMWriter, vmiSt VMIWriter, log *slog.Logger) *Controller {
	c := newController(opts, vmInf, vmiInf, vmSt, vmiSt, log)
	c.synced = []<-chan struct{}{vmInf.Synced(), vmiInf.Synced()}
	vmInf.AddHandler(informer.Handler[*apiv1.VirtualMachine]{
		OnAdd:    func(vm *apiv1.VirtualMachine) { c.queue.Add(informer.Key(vm)) },
		OnUpdate: func(_, vm *apiv1.VirtualMachine) { c.queue.Add(informer.Key(vm)) },
		OnDelete: func(vm *apiv1.VirtualMachine) { c.queue.Add(informer.Key(vm)) },
	})
	vmiInf.AddHandler(informer.Handler[*apiv1.VirtualMachineInstance]{
		OnAdd: func(vmi *apiv1.VirtualMachineInstance) {
			c.exp.CreationObserved(informer.Key(vmi))
			c.queue.Add(informer.Key(vmi))
		},
		OnUpdate: func(old, vmi *apiv1.VirtualMachineInstance) {
			if old.GetMetadata().GetDeletionTimestamp() == nil && vmi.GetMetadata().GetDeletionTimestamp() != nil {
				c.exp.DeletionObserved(informer.Key(vmi))
			}
			c.queue.Add(informer.Key(vmi))
		},
		OnDelete: func(vmi *apiv1.VirtualMachineInstance) {
			// A VMI deleted while it had finalizers was observed when its
			// deletion timestamp appeared.
			if vmi.GetMetadata().GetDeletionTimestamp() == nil {
				c.exp.DeletionObserved(informer.Key(vmi))
			}
			c.queue.Add(informer.Key(vmi))
		},
	})
	return c
}

func newController(opts Options, vms informer.Lister[*apiv1.VirtualMachine], vmis informer.Lister[*apiv1.VirtualMachineInstance],
	vmSt VMWriter, vmiSt VMIWriter, log *slog.Logger) *Controller {
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if log == nil {
		log = slog.Default()
	}
	return &Controller{
		opts: opts, vms: vms, vmis: vmis, vmSt: vmSt, vmiSt: vmiSt,
		exp:    controller.NewExpectations(opts.Clock),
		writes: controller.NewWrittenVersions(),
		queue:  controller.NewQueue("vm"),
		log:    log.With("controller", "vm"),
	}
}

// Run processes keys with workers goroutines until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	if !controller.WaitForSynced(ctx, c.queue, c.synced...) {
		return
	}
	controller.Run(ctx, "vm", c.queue, workers, c, c.log)
}

// Reconcile implements controller.Reconciler.
func (c *Controller) Reconcile(ctx context.Context, key string) (controller.Result, error) {
	vm, vmExists := c.vms.GetByKey(key)
	vmi, vmiExists := c.vmis.GetByKey(key)
	if !vmExists {
		c.exp.Delete(key)
		c.writes.Forget(key)
		if vmiExists && ownedByVM(vmi) && vmi.Metadata.DeletionTimestamp == nil {
			// Its VM is gone (deleted before this controller put its
			// finalizer on it): collect the orphan.
			return controller.Result{}, c.removeVMI(ctx, key, vmi)
		}
		if vmiExists && ownedByVM(vmi) && hasFinalizer(vmi.Metadata, apiv1.FinalizerVMController) && apiv1.IsFinal(vmi.GetStatus().GetPhase()) {
			return controller.Result{}, c.releaseVMI(ctx, vmi, false)
		}
		return controller.Result{}, nil
	}
	if vmiExists && !apiv1.IsControlledBy(vmi, vm) {
		if ownedByVM(vmi) && vmi.Metadata.DeletionTimestamp == nil {
			// Left over from an earlier VM of the same name.
			if err := c.removeVMI(ctx, key, vmi); err != nil {
				return controller.Result{}, err
			}
		}
		if ownedByVM(vmi) && apiv1.IsFinal(vmi.GetStatus().GetPhase()) && hasFinalizer(vmi.Metadata, apiv1.FinalizerVMController) {
			if err := c.releaseVMI(ctx, vmi, false); err != nil {
				return controller.Result{}, err
			}
		}
		return controller.Result{RequeueAfter: time.Second}, nil
	}
	if !vmiExists {
		vmi = nil
	}
	if c.writes.Stale(key, vm.Metadata.ResourceVersion) {
		// The cache does not show our last write of this VM yet; deciding
		// from it could, say, start a VMI inside a crash-loop backoff we
		// just recorded. Its update event brings the key back.
		return controller.Result{RequeueAfter: time.Second}, nil
	}
	if !c.exp.Satisfied(key) {
		// The cache has not shown our last create or delete yet; the
		// informer event will bring the key back.
		return controller.Result{RequeueAfter: 5 * time.Second}, nil
	}

	next := proto.Clone(vm).(*apiv1.VirtualMachine)
	if next.Status == nil {
		next.Status = &apiv1.VirtualMachineStatus{}
	}
	var p pass
	res, syncErr := c.sync(ctx, key, next, vmi, &p)
	observed := vmi
	if p.created != nil {
		observed = p.created
	}
	if err := c.updateStatus(ctx, key, vm, next, observed, syncErr); err != nil {
		return controller.Result{}, err
	}
	// Now that the status records a final VMI's end, it may go: deleted,
	// or just released from our finalizer (KubeVirt's handover).
	if vmi != nil && apiv1.IsFinal(vmi.GetStatus().GetPhase()) && apiv1.IsControlledBy(vmi, vm) {
		if err := c.releaseVMI(ctx, vmi, p.deleteFinal); err != nil {
			return controller.Result{}, err
		}
	}
	if syncErr != nil {
		return controller.Result{}, syncErr
	}
	if err := c.carryLiveChanges(ctx, vm, vmi); err != nil {
		return controller.Result{}, err
	}
	return res, nil
}

// ownedByVM reports a VMI that some VM controls, this one or an earlier
// one of the same name.
func ownedByVM(vmi *apiv1.VirtualMachineInstance) bool { return apiv1.ControllingVMUID(vmi) != "" }

func hasFinalizer(m *apiv1.ObjectMeta, f string) bool {
	for _, x := range m.GetFinalizers() {
		if x == f {
			return true
		}
	}
	return false
}

func withoutFinalizer(fs []string, f string) []string {
	out := make([]string, 0, len(fs))
	for _, x := range fs {
		if x != f {
			out = append(out, x)
		}
	}
	return out
}
