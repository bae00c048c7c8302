// Package adoption is the VirtualMachineAdoption controller
// (docs/adopt.md): once the adoption's node has mapped its domain
// (Mapped), it checks the mapped spec as the API checks a VM, with the
// server's policy (allowed bridges, networks, ports), and makes the VM:
// the adoption's namespace and name, the mapped template, its node
// recorded as the node of its volumes, and the adoption's uid on the
// template, so that the node takes the domain over with the VM's first
// instance. What it cannot check or make ends the adoption (Refused,
// Failed) with the reason. It never touches the domain; a dry run is
// left Mapped.
package adoption

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller"
	"github.com/virtplane/terraform-provider-virtplane/internal/informer"
	"github.com/virtplane/terraform-provider-virtplane/internal/macaddr"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// Options tune the controller.
type Options struct {
	// Validation is the API's: the image directory and the server's host
	// policy.
	Validation validation.Options
}

// AdoptionWriter writes an adoption (its status) with compare-and-swap.
type AdoptionWriter interface {
	Update(ctx context.Context, a *apiv1.VirtualMachineAdoption) (*apiv1.VirtualMachineAdoption, error)
}

// VMStore makes the adoption's VM, and reads it when the cache does not
// show it yet.
type VMStore interface {
	Create(ctx context.Context, vm *apiv1.VirtualMachine) (*apiv1.VirtualMachine, error)
	Get(ctx context.Context, namespace, name string) (*apiv1.VirtualMachine, error)
}

// Controller is the adoption controller.
type Controller struct {
	opts      Options
	adoptions informer.Lister[*apiv1.VirtualMachineAdoption]
	vms       informer.Lister[*apiv1.VirtualMachine]
	aSt       AdoptionWriter
	vmSt      VMStore
	writes    *controller.WrittenVersions
	queue     controller.Queue
	log       *slog.Logger
	synced    []<-chan struct{}
}

// New registers the controller's handlers on the informers, which the
// caller runs afterwards.
func New(opts Options, aInf *informer.Informer[*apiv1.VirtualMachineAdoption], vmInf *informer.Informer[*apiv1.VirtualMachine],
	aSt AdoptionWriter, vmSt VMStore, log *slog.Logger) *Controller {
	if log == nil {
		log = slog.Default()
	}
	c := &Controller{
		opts: opts, adoptions: aInf, vms: vmInf, aSt: aSt, vmSt: vmSt,
		writes: controller.NewWrittenVersions(),
		queue:  controller.NewQueue("adoption"),
		log:    log.With("controller", "adoption"),
		synced: []<-chan struct{}{aInf.Synced(), vmInf.Synced()},
	}
	enqueue := func(a *apiv1.VirtualMachineAdoption) { c.queue.Add(informer.Key(a)) }
	aInf.AddHandler(informer.Handler[*apiv1.VirtualMachineAdoption]{
		OnAdd:    enqueue,
		OnUpdate: func(_, a *apiv1.VirtualMachineAdoption) { enqueue(a) },
		OnDelete: func(a *apiv1.VirtualMachineAdoption) { c.writes.Forget(informer.Key(a)) },
	})
	// An adoption has its VM's name: the VM's deletion fails an adoption
	// still waiting for its take-over.
	vmInf.AddHandler(informer.Handler[*apiv1.VirtualMachine]{
		OnDelete: func(vm *apiv1.VirtualMachine) { c.queue.Add(informer.Key(vm)) },
	})
	return c
}

// Run processes adoptions with workers goroutines until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	if !controller.WaitForSynced(ctx, c.queue, c.synced...) {
		return
	}
	controller.Run(ctx, "adoption", c.queue, workers, c, c.log)
}

// staleRequeue is how soon a pass over a cached copy older than the
// controller's own last write is tried again.
const staleRequeue = time.Second

// Reconcile implements controller.Reconciler.
func (c *Controller) Reconcile(ctx context.Context, key string) (controller.Result, error) {
	a, ok := c.adoptions.GetByKey(key)
	if !ok {
		c.writes.Forget(key)
		return controller.Result{}, nil
	}
	if c.writes.Stale(key, a.GetMetadata().GetResourceVersion()) {
		return controller.Result{RequeueAfter: staleRequeue}, nil
	}
	if a.GetMetadata().GetDeletionTimestamp() != nil {
		return controller.Result{}, nil
	}
	switch st := a.GetStatus(); {
	case st.GetPhase() == apiv1.AdoptionMapped && !a.GetSpec().GetDryRun():
		return controller.Result{}, c.makeVM(ctx, key, a)
	case st.GetPhase() == apiv1.AdoptionAdopting:
		return controller.Result{}, c.checkVM(ctx, key, a)
	}
	return controller.Result{}, nil
}

// vmOf is the VM the adoption would make (defaulted, with MACs for the
// interfaces the domain had none for).
func vmOf(a *apiv1.VirtualMachineAdoption) *apiv1.VirtualMachine {
	spec, _ := proto.Clone(a.GetStatus().GetSpec()).(*apiv1.VirtualMachineInstanceSpec)
	if spec == nil {
		spec = &apiv1.VirtualMachineInstanceSpec{}
	}
	if !apiv1.HasLocalVolumes(spec) {
		// Pinned by its volumes otherwise (status.node_name); a VM
		// without one must still start where its domain is.
		if spec.NodeSelector == nil {
			spec.NodeSelector = map[string]string{}
		}
		spec.NodeSelector[apiv1.LabelNodeName] = a.GetSpec().GetNodeName()
	}
	md := a.GetMetadata()
	vm := &apiv1.VirtualMachine{
		Metadata: &apiv1.ObjectMeta{Namespace: md.GetNamespace(), Name: md.GetName()},
		Spec: &apiv1.VirtualMachineSpec{
			RunStrategy: a.GetSpec().GetRunStrategy(),
			Template: &apiv1.VirtualMachineInstanceTemplateSpec{
				Metadata: &apiv1.ObjectMeta{Annotations: map[string]string{apiv1.AnnotationAdoption: md.GetUid()}},
				Spec:     spec,
			},
		},
	}
	validation.DefaultVirtualMachine(vm)
	macaddr.Assign(vm.GetSpec().GetTemplate().GetSpec(), nil)
	return vm
}

// makeVM checks the mapped VM with the server's rules and makes it, or
// ends the adoption saying why not.
func (c *Controller) makeVM(ctx context.Context, key string, a *apiv1.VirtualMachineAdoption) error {
	vm := vmOf(a)
	if errs := validation.ValidateVirtualMachine(vm, c.opts.Validation); len(errs) > 0 {
		var refusals []*apiv1.AdoptionRefusal
		for _, e := range errs {
			refusals = append(refusals, &apiv1.AdoptionRefusal{Element: e.Field, Reason: e.ErrorBody()})
		}
		return c.end(ctx, key, a, apiv1.AdoptionRefused, "the server refuses the VM the domain maps to", refusals...)
	}
	existing, err := c.vm(ctx, vm.Metadata.Namespace, vm.Metadata.Name)
	if err != nil {
		return err
	}
	if existing == nil {
		if a.GetSpec().GetRunStrategy() == apiv1.RunStrategyManual {
			// Manual starts only on request: the take-over is one.
			vm.Status = &apiv1.VirtualMachineStatus{StateChangeRequests: []*apiv1.StateChangeRequest{{Action: apiv1.StateChangeStart}}}
		} else {
			vm.Status = &apiv1.VirtualMachineStatus{}
		}
		// Its volumes are the domain's files on this node.
		vm.Status.NodeName = a.GetSpec().GetNodeName()
		existing, err = c.vmSt.Create(ctx, vm)
		switch {
		case errors.Is(err, store.ErrAlreadyExists):
			return fmt.Errorf("creating VM %s: the cache is behind: %w", key, err) // retried: the next pass sees it
		case err != nil:
			return fmt.Errorf("creating VM %s: %w", key, err)
		}
		c.log.Info("adopted domain's VM created", "adoption", key, "vm_uid", existing.GetMetadata().GetUid(), "node", a.GetSpec().GetNodeName())
	} else if apiv1.AdoptionOf(existing.GetSpec().GetTemplate().GetMetadata()) != a.GetMetadata().GetUid() {
		return c.end(ctx, key, a, apiv1.AdoptionFailed, fmt.Sprintf("virtualmachine %q exists already: an adoption makes the VM of its own name", key))
	}
	next := proto.Clone(a).(*apiv1.VirtualMachineAdoption)
	next.Status.Phase = apiv1.AdoptionAdopting
	next.Status.VmUid = existing.GetMetadata().GetUid()
	next.Status.Message = fmt.Sprintf("VM made; node %s takes the domain over with its first instance", a.GetSpec().GetNodeName())
	return c.write(ctx, key, next)
}

// checkVM fails an adoption whose VM was deleted before its node took
// the domain over.
func (c *Controller) checkVM(ctx context.Context, key string, a *apiv1.VirtualMachineAdoption) error {
	md := a.GetMetadata()
	vm, err := c.vm(ctx, md.GetNamespace(), md.GetName())
	if err != nil {
		return err
	}
	if vm == nil || vm.GetMetadata().GetUid() != a.GetStatus().GetVmUid() {
		return c.end(ctx, key, a, apiv1.AdoptionFailed, "the VM was deleted before its node took the domain over; the domain was left as it was")
	}
	return nil
}

// vm reads namespace/name from the cache, else the store (made by the
// last pass); nil when there is none.
func (c *Controller) vm(ctx context.Context, namespace, name string) (*apiv1.VirtualMachine, error) {
	if vm, ok := c.vms.Get(namespace, name); ok {
		return vm, nil
	}
	vm, err := c.vmSt.Get(ctx, namespace, name)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading VM %s: %w", apiv1.Ref(namespace, name), err)
	}
	return vm, nil
}

// end writes a final phase with its message (and refusals).
func (c *Controller) end(ctx context.Context, key string, a *apiv1.VirtualMachineAdoption, phase, msg string, refusals ...*apiv1.AdoptionRefusal) error {
	next := proto.Clone(a).(*apiv1.VirtualMachineAdoption)
	next.Status.Phase, next.Status.Message = phase, msg
	next.Status.Refusals = append(next.Status.Refusals, refusals...)
	c.log.Info("adoption ended", "adoption", key, "phase", phase, "message", msg, "refusals", len(refusals))
	return c.write(ctx, key, next)
}

// write stores next with compare-and-swap on the cached version.
func (c *Controller) write(ctx context.Context, key string, next *apiv1.VirtualMachineAdoption) error {
	out, err := c.aSt.Update(ctx, next)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil
	case err != nil:
		return fmt.Errorf("writing adoption %s: %w", key, err)
	}
	c.writes.Wrote(key, out.GetMetadata().GetResourceVersion())
	return nil
}
