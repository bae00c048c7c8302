package vmlifecycle

import (
	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// Stop asks for the VM to stop (KubeVirt StopVMRequestHandler). gracePeriod,
// when set, overrides the running instance's termination grace period; 0
// kills at once.
//
//   - Always, Once: the spec flips to Halted (or running=false).
//   - RerunOnFailure, Manual: queues [Stop(uid)] and keeps the strategy
//     (since KubeVirt PR #10639); needs a live (non-final) instance.
//   - Halted: the controller is already stopping any instance, so stop only
//     makes sense as a force stop: with a live instance and a grace period
//     shorter than the instance's, it queues [Stop(uid)].
//
// When the instance is live and gracePeriod is set, the returned grace
// period must be written to the instance's
// spec.termination_grace_period_seconds before the VM is written, so the
// node handler shuts the guest down with it. KubeVirt patches the instance
// before it even checks the strategy, so a refused stop can still shorten
// the grace period; here nothing is returned on refusal.
func Stop(vm *apiv1.VirtualMachine, vmi *apiv1.VirtualMachineInstance, gracePeriod *int64) (vmiGrace *int64, err error) {
	if gracePeriod != nil && *gracePeriod < 0 {
		return nil, &InvalidError{Field: "grace_period_seconds", Message: "gracePeriod has to be greater or equal to 0"}
	}
	strategy, err := strategyOf(vm)
	if err != nil {
		return nil, err
	}
	live := vmi != nil && !apiv1.IsFinal(vmi.GetStatus().GetPhase())
	switch strategy {
	case apiv1.RunStrategyAlways, apiv1.RunStrategyOnce:
		vm.SetRunning(false)
		resetStartFailure(vm)
	case apiv1.RunStrategyRerunOnFailure, apiv1.RunStrategyManual:
		if !live {
			return nil, refused(msgVMNotRunning)
		}
		if err := queue(vm, stopRequest(vmi)); err != nil {
			return nil, err
		}
	case apiv1.RunStrategyHalted:
		if !live {
			return nil, refused(msgVMNotRunning)
		}
		if gracePeriod == nil || *gracePeriod >= vmi.GetSpec().GracePeriodSeconds() {
			return nil, refused("%s only supports manual stop requests with a shorter graceperiod", strategy)
		}
		if err := queue(vm, stopRequest(vmi)); err != nil {
			return nil, err
		}
	default:
		return nil, refused("%s does not support manual stop requests", strategy)
	}
	if live && gracePeriod != nil {
		g := *gracePeriod
		return &g, nil
	}
	return nil, nil
}
