package testguest

import apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"

// VM is a VM in namespace ns that boots the test guest by direct kernel
// boot: kernel (a file name in the node's image directory, as Install
// returns it) with the given kernel command line (Cmdline), one vCPU and
// memory of guest RAM, and 30 s to shut down.
func VM(ns, name, strategy, kernel, memory, cmdline string) *apiv1.VirtualMachine {
	grace := int64(30)
	return &apiv1.VirtualMachine{
		Metadata: &apiv1.ObjectMeta{Namespace: ns, Name: name},
		Spec: &apiv1.VirtualMachineSpec{
			RunStrategy: strategy,
			Template: &apiv1.VirtualMachineInstanceTemplateSpec{
				Spec: &apiv1.VirtualMachineInstanceSpec{
					Domain: &apiv1.DomainSpec{
						Cpu:    &apiv1.CPU{Cores: 1},
						Memory: &apiv1.Memory{Guest: memory},
						Firmware: &apiv1.Firmware{KernelBoot: &apiv1.KernelBoot{
							Kernel: kernel, Initrd: InitrdFile, Cmdline: cmdline,
						}},
					},
					TerminationGracePeriodSeconds: &grace,
				},
			},
		},
	}
}
