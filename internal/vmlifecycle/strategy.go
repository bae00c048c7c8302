package vmlifecycle

import (
	"fmt"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// strategyOf is the VM's effective run strategy, its error naming the VM.
func strategyOf(vm *apiv1.VirtualMachine) (string, error) {
	s, err := vm.GetSpec().EffectiveRunStrategy()
	if err != nil {
		return "", fmt.Errorf("virtual machine %s/%s: %w", vm.GetMetadata().GetNamespace(), vm.GetMetadata().GetName(), err)
	}
	return s, nil
}
