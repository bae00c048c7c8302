package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
)

// NoOSVM is the KubeVirt CI density shape: one vCPU, memory, no disk, no
// kernel, no NIC. SeaBIOS finds nothing to boot and idles. The grace period
// is 0, so teardown does not wait for an ACPI shutdown nobody answers.
func NoOSVM(namespace, name, memory string) *apiv1.VirtualMachine {
	grace := int64(0)
	return &apiv1.VirtualMachine{
		Metadata: &apiv1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: &apiv1.VirtualMachineSpec{
			RunStrategy: apiv1.RunStrategyAlways,
			Template: &apiv1.VirtualMachineInstanceTemplateSpec{
				Spec: &apiv1.VirtualMachineInstanceSpec{
					Domain: &apiv1.DomainSpec{
						Cpu:    &apiv1.CPU{Cores: 1},
						Memory: &apiv1.Memory{Guest: memory},
					},
					TerminationGracePeriodSeconds: &grace,
				},
			},
		},
	}
}

// GuestVM boots the test guest (internal/testguest) by direct kernel boot:
// kernel and initrd are file names in the agent's image directory.
func GuestVM(namespace, name, memory, kernel, initrd, cmdline string) *apiv1.VirtualMachine {
	vm := NoOSVM(namespace, name, memory)
	vm.Spec.Template.Spec.Domain.Firmware = &apiv1.Firmware{KernelBoot: &apiv1.KernelBoot{
		Kernel: kernel, Initrd: initrd, Cmdline: cmdline,
	}}
	return vm
}

// VMName is the name of the i-th VM of a batch: vm-00042.
func VMName(i int) string { return fmt.Sprintf("vm-%05d", i) }

// CreateAll creates vms with up to workers calls at a time and returns when
// all calls returned; the first error wins.
func CreateAll(ctx context.Context, c *client.Client, vms []*apiv1.VirtualMachine, workers int) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	jobs := make(chan *apiv1.VirtualMachine)
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	for range max(workers, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for vm := range jobs {
				if _, err := c.VMs.Create(ctx, &apiv1.CreateVirtualMachineRequest{Vm: vm}); err != nil {
					once.Do(func() { first = fmt.Errorf("creating VM %s: %w", vm.GetMetadata().GetName(), err); cancel() })
				}
			}
		}()
	}
	for _, vm := range vms {
		select {
		case jobs <- vm:
		case <-ctx.Done():
		}
	}
	close(jobs)
	wg.Wait()
	return first
}

// CreatePaced creates vms one every interval, each call in its own
// goroutine so that a slow call does not delay the next, and returns the
// time each call was issued, by name.
func CreatePaced(ctx context.Context, c *client.Client, vms []*apiv1.VirtualMachine, interval time.Duration) (map[string]time.Time, error) {
	issued := map[string]time.Time{}
	var (
		mu    sync.Mutex
		wg    sync.WaitGroup
		first error
	)
	t0 := time.Now()
	for i, vm := range vms {
		time.Sleep(time.Until(t0.Add(time.Duration(i) * interval)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			at := time.Now()
			_, err := c.VMs.Create(ctx, &apiv1.CreateVirtualMachineRequest{Vm: vm})
			mu.Lock()
			defer mu.Unlock()
			issued[vm.GetMetadata().GetName()] = at
			if err != nil && first == nil {
				first = fmt.Errorf("creating VM %s: %w", vm.GetMetadata().GetName(), err)
			}
		}()
	}
	wg.Wait()
	return issued, first
}
