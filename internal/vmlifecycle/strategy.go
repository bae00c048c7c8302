package vmlifecycle

import (
	"errors"
	"fmt"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// RunStrategy returns the VM's effective run strategy, mapping the deprecated
// spec.running (true → Always, false → Halted) as KubeVirt's
// VirtualMachine.RunStrategy() helper does. Setting neither means Halted;
// setting both is an error (validation rejects such VMs on write).
func RunStrategy(vm *apiv1.VirtualMachine) (string, error) {
	spec := vm.GetSpec()
	switch {
	case spec.Running != nil && spec.GetRunStrategy() != "":
		return "", errors.New("spec.running and spec.run_strategy are mutually exclusive")
	case spec.Running != nil && spec.GetRunning():
		return apiv1.RunStrategyAlways, nil
	case spec.Running != nil:
		return apiv1.RunStrategyHalted, nil
	case spec.GetRunStrategy() == "":
		return apiv1.RunStrategyHalted, nil
	}
	return spec.GetRunStrategy(), nil
}

// setRunning flips the VM to Always or Halted in whichever field the user
// chose, so a VM written with the deprecated spec.running keeps using it
// (getRunningPatch in lifecycle.go).
func setRunning(vm *apiv1.VirtualMachine, running bool) {
	if vm.Spec == nil {
		vm.Spec = &apiv1.VirtualMachineSpec{}
	}
	if vm.Spec.Running != nil {
		vm.Spec.Running = &running
		return
	}
	if running {
		vm.Spec.RunStrategy = apiv1.RunStrategyAlways
	} else {
		vm.Spec.RunStrategy = apiv1.RunStrategyHalted
	}
}

func strategyOf(vm *apiv1.VirtualMachine) (string, error) {
	s, err := RunStrategy(vm)
	if err != nil {
		return "", fmt.Errorf("virtual machine %s/%s: %w", vm.GetMetadata().GetNamespace(), vm.GetMetadata().GetName(), err)
	}
	return s, nil
}
