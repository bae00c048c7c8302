package vmlifecycle

import (
	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// ForceRestartGracePeriodSeconds is the grace period a force restart gives
// the old instance: KubeVirt deletes the launcher pod with 1 s, "the
// shortest safe restart period" (RestartVMRequestHandler).
const ForceRestartGracePeriodSeconds int64 = 1

// Restart asks for the VM's instance to be replaced (KubeVirt
// RestartVMRequestHandler): it queues [Stop(uid), Start] for Always,
// RerunOnFailure and Manual; the VM controller deletes the instance with
// that uid and then starts a new one. Halted and Once refuse.
//
// Restart needs an instance to name in the Stop request, so a VM without one
// refuses with "VM is not running" whatever its strategy, even an Always VM
// waiting out its crash-loop backoff (KubeVirt appends ": Halted" to that
// message whatever the strategy; that misleads and is dropped here). Any
// existing instance will do, as in KubeVirt: a final one is deleted and
// replaced, one already being deleted is replaced once it is gone.
//
// gracePeriod may only be 0, a force restart; the returned grace period
// (ForceRestartGracePeriodSeconds) must then be written to a live instance
// before the VM is written.
func Restart(vm *apiv1.VirtualMachine, vmi *apiv1.VirtualMachineInstance, gracePeriod *int64) (vmiGrace *int64, err error) {
	if gracePeriod != nil {
		switch {
		case *gracePeriod < 0:
			return nil, &InvalidError{Field: "grace_period_seconds", Message: "gracePeriod has to be greater or equal to 0"}
		case *gracePeriod > 0:
			return nil, &InvalidError{Field: "grace_period_seconds", Message: "For force restart, only gracePeriod=0 is supported for now"}
		}
	}
	strategy, err := strategyOf(vm)
	if err != nil {
		return nil, err
	}
	switch strategy {
	case apiv1.RunStrategyAlways, apiv1.RunStrategyRerunOnFailure, apiv1.RunStrategyManual:
	default:
		// KubeVirt spells it "RunStategy"; the typo is not kept.
		return nil, refused("RunStrategy %s does not support manual restart requests", strategy)
	}
	if vmi == nil {
		return nil, refused(msgVMNotRunning)
	}
	if err := queue(vm, stopRequest(vmi), startRequest(false)); err != nil {
		return nil, err
	}
	if gracePeriod != nil && !apiv1.IsFinal(vmi.GetStatus().GetPhase()) {
		g := ForceRestartGracePeriodSeconds
		return &g, nil
	}
	return nil, nil
}
