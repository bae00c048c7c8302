package vm

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller"
	"github.com/virtplane/terraform-provider-virtplane/internal/eviction"
	"github.com/virtplane/terraform-provider-virtplane/internal/informer"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// syncError is a failed action, reported in the VM's Failure condition.
type syncError struct {
	reason string
	err    error
}

func (e *syncError) Error() string { return fmt.Sprintf("%s: %v", e.reason, e.err) }
func (e *syncError) Unwrap() error { return e.err }

// runStrategy is the VM's effective run strategy, "" for a VM that sets
// both fields (validation refuses it; sync reports it).
func runStrategy(vm *apiv1.VirtualMachine) string {
	s, _ := vm.GetSpec().EffectiveRunStrategy()
	return s
}

// sync acts on the VMI as the run strategy says (KubeVirt syncRunStrategy)
// and may change next (finalizers, spec, status fields it owns).
// pass carries what one reconcile pass did, or left for after the VM
// status write, to the VMI.
type pass struct {
	created     *apiv1.VirtualMachineInstance // the VMI this pass created
	deleteFinal bool                          // release and delete the final VMI once the status reflects it
}

func (c *Controller) sync(ctx context.Context, key string, next *apiv1.VirtualMachine, vmi *apiv1.VirtualMachineInstance, p *pass) (controller.Result, error) {
	m := next.Metadata
	if m.DeletionTimestamp != nil {
		// Deleting: the instance goes first, then our finalizer.
		if vmi != nil {
			if vmi.Metadata.DeletionTimestamp == nil {
				return controller.Result{}, c.deleteVMI(ctx, key, vmi, p)
			}
			return controller.Result{}, nil
		}
		m.Finalizers = withoutFinalizer(m.Finalizers, apiv1.FinalizerVMController)
		return controller.Result{}, nil
	}
	if !hasFinalizer(m, apiv1.FinalizerVMController) {
		m.Finalizers = append(m.Finalizers, apiv1.FinalizerVMController)
	}

	st := next.Status
	phase := vmi.GetStatus().GetPhase()
	exists := vmi != nil
	final := exists && apiv1.IsFinal(phase)
	deleting := exists && vmi.Metadata.DeletionTimestamp != nil

	strategy, err := next.GetSpec().EffectiveRunStrategy()
	if err != nil {
		return controller.Result{}, controller.TerminalError(err)
	}
	switch strategy {
	case apiv1.RunStrategyAlways:
		switch {
		case !exists:
			return c.startWithBackoff(ctx, key, next, p)
		case final:
			return controller.Result{}, c.deleteVMI(ctx, key, vmi, p)
		case hasStopRequestForVMI(st, vmi):
			return controller.Result{}, c.deleteVMI(ctx, key, vmi, p) // restart
		}
	case apiv1.RunStrategyRerunOnFailure:
		switch {
		case !exists:
			if hasStartRequest(st) || st.GetRunStrategy() != apiv1.RunStrategyRerunOnFailure {
				return c.startWithBackoff(ctx, key, next, p)
			}
		case phase == apiv1.PhaseSucceeded && !eviction.Evicted(vmi):
			return controller.Result{}, c.deleteVMI(ctx, key, vmi, p)
		case final:
			// Failed, or shut down by an eviction: not the guest's choice.
			if err := c.deleteVMI(ctx, key, vmi, p); err != nil {
				return controller.Result{}, err
			}
			if !hasStartRequest(st) {
				st.StateChangeRequests = append(st.StateChangeRequests, &apiv1.StateChangeRequest{Action: apiv1.StateChangeStart})
			}
		case hasStopRequestForVMI(st, vmi) && !deleting:
			return controller.Result{}, c.deleteVMI(ctx, key, vmi, p)
		}
	case apiv1.RunStrategyManual:
		switch {
		case !exists:
			if hasStartRequest(st) {
				return controller.Result{}, c.startVMI(ctx, key, next, p)
			}
		case hasStopRequestForVMI(st, vmi) && !deleting:
			return controller.Result{}, c.deleteVMI(ctx, key, vmi, p)
		}
	case apiv1.RunStrategyHalted:
		if exists {
			return controller.Result{}, c.deleteVMI(ctx, key, vmi, p)
		}
		if hasStartRequest(st) {
			// Start while Halted (the start --paused path): flip the spec;
			// the next pass starts the VMI with the request's data.
			next.SetRunning(true)
			next.Metadata.Generation++
		}
	case apiv1.RunStrategyOnce:
		if !exists {
			return controller.Result{}, c.startVMI(ctx, key, next, p)
		}
	default:
		return controller.Result{}, controller.TerminalError(fmt.Errorf("unknown run strategy %q", strategy))
	}
	return controller.Result{}, nil
}

// hasLocalVolumes reports whether the VM's template has a persistent
// volume on the local storage class (apiv1.HasLocalVolumes).
func hasLocalVolumes(vm *apiv1.VirtualMachine) bool {
	return apiv1.HasLocalVolumes(vm.GetSpec().GetTemplate().GetSpec())
}

// startWithBackoff starts unless the crash-loop backoff still runs.
func (c *Controller) startWithBackoff(ctx context.Context, key string, vm *apiv1.VirtualMachine, p *pass) (controller.Result, error) {
	if sf := vm.Status.GetStartFailure(); sf != nil && sf.RetryAfterTimestamp != nil {
		if wait := sf.RetryAfterTimestamp.AsTime().Sub(c.opts.Clock()); wait > 0 {
			return controller.Result{RequeueAfter: wait}, nil
		}
	}
	return controller.Result{}, c.startVMI(ctx, key, vm, p)
}

// startVMI creates the VMI from the VM's template, named after the VM,
// owned by it, and held by our finalizer until we saw its final phase.
func (c *Controller) startVMI(ctx context.Context, key string, vm *apiv1.VirtualMachine, p *pass) error {
	if why := startBlocked(vm); why != "" {
		// Every start goes through here; the unlock's VM event retries.
		c.log.Debug("not starting instance: VM locked", "vm", key, "reason", why)
		return nil
	}
	tmpl := vm.GetSpec().GetTemplate()
	spec, _ := proto.Clone(tmpl.GetSpec()).(*apiv1.VirtualMachineInstanceSpec)
	if spec == nil {
		spec = &apiv1.VirtualMachineInstanceSpec{}
	}
	if req := firstRequest(vm.Status); req != nil && req.Action == apiv1.StateChangeStart && req.Data["paused"] == "true" {
		spec.Paused = true
	}
	if n := vm.GetStatus().GetNodeName(); n != "" && hasLocalVolumes(vm) {
		// Persistent volumes live on the disk of the node that created
		// them (local storage): every later instance runs there.
		if spec.NodeSelector == nil {
			spec.NodeSelector = map[string]string{}
		}
		spec.NodeSelector[apiv1.LabelNodeName] = n
	}
	annotations := map[string]string{}
	for k, v := range tmpl.GetMetadata().GetAnnotations() {
		annotations[k] = v
	}
	annotations[apiv1.AnnotationVMGeneration] = strconv.FormatInt(vm.Metadata.Generation, 10)
	if vm.GetStatus().GetNodeName() != "" {
		annotations[apiv1.AnnotationVMRanBefore] = "true"
	}
	if p := vm.GetSpec().GetNodeFailurePolicy(); p != "" {
		annotations[apiv1.AnnotationNodeFailurePolicy] = p
	}
	labels := map[string]string{}
	for k, v := range tmpl.GetMetadata().GetLabels() {
		labels[k] = v
	}
	now := timestamppb.New(c.opts.Clock())
	vmi := &apiv1.VirtualMachineInstance{
		Metadata: &apiv1.ObjectMeta{
			Namespace: vm.Metadata.Namespace, Name: vm.Metadata.Name,
			Labels: labels, Annotations: annotations,
			OwnerReferences: []*apiv1.OwnerReference{{
				Kind: apiv1.KindVirtualMachine, Name: vm.Metadata.Name, Uid: vm.Metadata.Uid, Controller: true,
			}},
			Finalizers: []string{apiv1.FinalizerVMController},
		},
		Spec: spec,
		Status: &apiv1.VirtualMachineInstanceStatus{
			Phase:                     apiv1.PhasePending,
			PhaseTransitionTimestamps: []*apiv1.PhaseTransitionTimestamp{{Phase: apiv1.PhasePending, Time: now}},
		},
	}
	c.exp.ExpectCreations(key, 1)
	created, err := c.vmiSt.Create(ctx, vmi)
	if err != nil {
		c.exp.CreationFailed(key)
		if errors.Is(err, store.ErrAlreadyExists) {
			return err // the cache is behind; retry
		}
		return &syncError{reason: "FailedCreate", err: err}
	}
	// The status of this pass already counts the new VMI, which saves a
	// VM write when the cache shows it.
	p.created = created
	c.log.Info("started instance", "vm", key, "vmi_uid", created.Metadata.Uid)
	return nil
}

// deleteVMI asks for the VMI to be deleted; the node handler stops the
// guest, and our finalizer keeps the object until we saw its final phase.
// A final VMI is released and removed in one write, but only after the VM
// status recorded its end (start failures are counted from it).
func (c *Controller) deleteVMI(ctx context.Context, key string, vmi *apiv1.VirtualMachineInstance, p *pass) error {
	if vmi.Metadata.DeletionTimestamp != nil {
		return nil
	}
	if apiv1.IsFinal(vmi.GetStatus().GetPhase()) {
		p.deleteFinal = true
		return nil
	}
	return c.removeVMI(ctx, key, vmi)
}

// removeVMI deletes the VMI now: released and removed when final,
// otherwise marked for deletion so the node stops the guest.
func (c *Controller) removeVMI(ctx context.Context, key string, vmi *apiv1.VirtualMachineInstance) error {
	if vmi.Metadata.DeletionTimestamp != nil {
		return nil
	}
	if apiv1.IsFinal(vmi.GetStatus().GetPhase()) {
		return c.releaseVMI(ctx, vmi, true)
	}
	c.exp.ExpectDeletions(key, 1)
	if _, _, err := c.vmiSt.Delete(ctx, vmi.Metadata.Namespace, vmi.Metadata.Name, store.DeleteOptions{UID: vmi.Metadata.Uid}); err != nil {
		c.exp.DeletionFailed(key)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		return &syncError{reason: "FailedDelete", err: err}
	}
	c.log.Info("stopping instance", "vm", key, "vmi_uid", vmi.Metadata.Uid)
	return nil
}

// releaseVMI drops our finalizer from a final VMI now that the VM status
// reflects its end (KubeVirt's finalizer handover); with andDelete the VMI
// is deleted by the same write.
func (c *Controller) releaseVMI(ctx context.Context, vmi *apiv1.VirtualMachineInstance, andDelete bool) error {
	next := proto.Clone(vmi).(*apiv1.VirtualMachineInstance)
	next.Metadata.Finalizers = withoutFinalizer(next.Metadata.Finalizers, apiv1.FinalizerVMController)
	if andDelete && next.Metadata.DeletionTimestamp == nil {
		next.Metadata.DeletionTimestamp = timestamppb.New(c.opts.Clock())
	}
	if proto.Equal(next, vmi) {
		return nil
	}
	key := informer.Key(vmi)
	if andDelete {
		c.exp.ExpectDeletions(key, 1)
	}
	if _, err := c.vmiSt.Update(ctx, next); err != nil {
		if andDelete {
			c.exp.DeletionFailed(key)
		}
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if errors.Is(err, store.ErrConflict) {
			return err
		}
		return &syncError{reason: "FailedDelete", err: err}
	}
	return nil
}

func firstRequest(st *apiv1.VirtualMachineStatus) *apiv1.StateChangeRequest {
	if reqs := st.GetStateChangeRequests(); len(reqs) > 0 {
		return reqs[0]
	}
	return nil
}

func hasStartRequest(st *apiv1.VirtualMachineStatus) bool {
	r := firstRequest(st)
	return r != nil && r.Action == apiv1.StateChangeStart
}

func hasStopRequestForVMI(st *apiv1.VirtualMachineStatus, vmi *apiv1.VirtualMachineInstance) bool {
	r := firstRequest(st)
	return r != nil && vmi != nil && r.Action == apiv1.StateChangeStop && r.Uid == vmi.Metadata.Uid
}
