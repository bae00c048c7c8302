package vmlifecycle

import (
	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// Start asks for the VM to run (KubeVirt StartVMRequestHandler). vmi is the
// VM's current instance, nil when there is none; paused asks for the new
// instance to start with its guest paused.
//
//   - Halted: the spec flips to Always (or running=true). Started paused, it
//     queues [Start{paused}] instead and the VM controller flips the spec when
//     it creates the paused instance.
//   - RerunOnFailure: queues [Start], or [Stop(uid), Start] over a Succeeded
//     instance; refused over a Failed one, whose restart the strategy itself
//     owns.
//   - Manual: queues [Start], or [Stop(uid), Start] over a final instance.
//   - Always, Once: refused; the strategy decides when the VM runs.
//
// Whatever the strategy, an instance that is alive (not final, not Unknown,
// phase set) refuses with "VM is already running".
func Start(vm *apiv1.VirtualMachine, vmi *apiv1.VirtualMachineInstance, paused bool) error {
	strategy, err := strategyOf(vm)
	if err != nil {
		return err
	}
	if blocksStart(vmi) {
		return refused(msgVMAlreadyRunning)
	}
	phase := vmi.GetStatus().GetPhase()
	switch strategy {
	case apiv1.RunStrategyHalted:
		// KubeVirt means to skip the request when the template already
		// starts paused, but compares pointers and so always sends it
		// (lifecycle.go, the StartStrategyPaused check). Here a template
		// with spec.paused starts paused anyway, so the plain flip is enough.
		if paused && !vm.GetSpec().GetTemplate().GetSpec().GetPaused() {
			return queue(vm, startRequest(true))
		}
		vm.SetRunning(true)
		resetStartFailure(vm)
		return nil
	case apiv1.RunStrategyRerunOnFailure:
		switch {
		case vmi != nil && phase == apiv1.PhaseFailed:
			return refused("%s does not support starting VM from failed state", strategy)
		case vmi != nil && phase == apiv1.PhaseSucceeded:
			return queue(vm, stopRequest(vmi), startRequest(paused))
		}
		return queue(vm, startRequest(paused))
	case apiv1.RunStrategyManual:
		if vmi != nil && apiv1.IsFinal(phase) {
			return queue(vm, stopRequest(vmi), startRequest(paused))
		}
		return queue(vm, startRequest(paused))
	}
	return refused("%s does not support manual start requests", strategy)
}

// blocksStart reports whether vmi is an instance start must not replace.
// Unknown (node lost) and unset (just created, not yet seen by the VMI
// controller) do not block, exactly as in KubeVirt; the queued requests then
// let the controller sort the old instance out.
func blocksStart(vmi *apiv1.VirtualMachineInstance) bool {
	if vmi == nil {
		return false
	}
	phase := vmi.GetStatus().GetPhase()
	return !apiv1.IsFinal(phase) && phase != apiv1.PhaseUnknown && phase != apiv1.PhaseUnset
}
