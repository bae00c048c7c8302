package vmlifecycle

import (
	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// Pause asks for the instance's guest to be suspended by setting
// spec.paused; the node handler suspends the domain and reports the Paused
// condition. KubeVirt proxies pause to virt-handler instead, after the same
// checks (PauseVMIRequestHandler). vmi is nil when the VM has no instance.
func Pause(vmi *apiv1.VirtualMachineInstance) error {
	if err := needRunning(vmi); err != nil {
		return err
	}
	if isPaused(vmi) {
		return refused("VMI is already paused")
	}
	// A guest cannot be suspended while its memory is being copied to
	// another node.
	if ms := vmi.GetStatus().GetMigrationState(); ms != nil && !ms.GetCompleted() && !ms.GetFailed() {
		return refused("Cannot pause VM '%s' because it is currently being migrated", vmi.GetMetadata().GetName())
	}
	vmi.Spec = specOf(vmi)
	vmi.Spec.Paused = true
	return nil
}

// Unpause asks for a paused guest to be resumed (KubeVirt
// UnpauseVMIRequestHandler).
func Unpause(vmi *apiv1.VirtualMachineInstance) error {
	if err := needRunning(vmi); err != nil {
		return err
	}
	if !isPaused(vmi) {
		return refused("VMI is not paused")
	}
	vmi.Spec = specOf(vmi)
	vmi.Spec.Paused = false
	return nil
}

func needRunning(vmi *apiv1.VirtualMachineInstance) error {
	if vmi == nil {
		return refused(msgVMNotRunning)
	}
	if vmi.GetStatus().GetPhase() != apiv1.PhaseRunning {
		return refused(msgVMINotRunning)
	}
	return nil
}

// isPaused counts both the requested state and the reported one: a pause
// the handler has not carried out yet is still "already paused", and a
// guest the hypervisor paused by itself (an I/O error) can be unpaused.
func isPaused(vmi *apiv1.VirtualMachineInstance) bool {
	if vmi.GetSpec().GetPaused() {
		return true
	}
	c := apiv1.FindCondition(vmi.GetStatus().GetConditions(), apiv1.ConditionPaused)
	return c.GetStatus() == apiv1.ConditionTrue
}

func specOf(vmi *apiv1.VirtualMachineInstance) *apiv1.VirtualMachineInstanceSpec {
	if vmi.Spec == nil {
		return &apiv1.VirtualMachineInstanceSpec{}
	}
	return vmi.Spec
}
