package vm

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/informer"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// Template changes a running instance takes without a restart, and what
// the controller adds to an instance that is not a template change. Both
// are decided here, so that what carryLiveChanges writes into an instance
// is exactly what templateDiffers then no longer counts.

// carryLiveChanges gives a running instance, in one write, the changes of
// its VM's template that apply without a restart:
//   - the eviction strategy: what a drain does is a policy, not part of
//     the guest;
//   - the disk changes validation.LiveDisks allows: larger persistent
//     volumes (the node grows the disks under the running guest, which
//     sees the new size) and hotpluggable disks added or removed (the
//     node plugs or unplugs them). Not while a live migration is in
//     flight: the target made its volumes as the instance had them, and
//     the migration's end brings the VM back here. Carried even when the
//     template has other changes that wait for a restart, as the eviction
//     strategy is: a restart applies the whole template anyway.
func (c *Controller) carryLiveChanges(ctx context.Context, vm *apiv1.VirtualMachine, vmi *apiv1.VirtualMachineInstance) error {
	if vmi == nil || vmi.GetMetadata().GetDeletionTimestamp() != nil || apiv1.IsFinal(vmi.GetStatus().GetPhase()) ||
		!apiv1.IsControlledBy(vmi, vm) {
		return nil
	}
	tmpl := vm.GetSpec().GetTemplate().GetSpec()
	next := proto.Clone(vmi).(*apiv1.VirtualMachineInstance)
	if next.Spec == nil {
		next.Spec = &apiv1.VirtualMachineInstanceSpec{}
	}
	var changed []any
	if want := tmpl.GetEvictionStrategy(); next.Spec.EvictionStrategy != want {
		next.Spec.EvictionStrategy = want
		changed = append(changed, "eviction_strategy", want)
	}
	if !apiv1.MigrationInFlight(vmi) {
		if live, _ := validation.LiveDisks(tmpl, next.Spec); live.Changed() {
			if next.Spec.Domain == nil {
				next.Spec.Domain = &apiv1.DomainSpec{}
			}
			if next.Spec.Domain.Devices == nil {
				next.Spec.Domain.Devices = &apiv1.Devices{}
			}
			next.Spec.Domain.Devices.Disks, next.Spec.Volumes = live.Disks, live.Volumes
			for _, c := range []struct {
				what  string
				names []string
			}{{"grown", live.Grown}, {"plugged", live.Added}, {"unplugged", live.Removed}} {
				if len(c.names) > 0 {
					changed = append(changed, c.what, c.names)
				}
			}
		}
	}
	if len(changed) == 0 {
		return nil
	}
	if _, err := c.vmiSt.Update(ctx, next); err != nil {
		if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrConflict) {
			return err // the cache is behind; the instance's event brings the VM back
		}
		return fmt.Errorf("carrying template changes to %s: %w", informer.Key(vmi), err)
	}
	c.log.Info("template change applied to the running instance", append([]any{"vmi", informer.Key(vmi)}, changed...)...)
	return nil
}

// templateDiffers reports whether the VM template no longer matches the
// VMI's spec in a way only a restart applies: it ignores the pause state
// (the verbs change it at runtime), the grace period a stop patches in,
// the node pin startVMI adds, and what carryLiveChanges carries to a
// running instance (eviction strategy, larger persistent volumes,
// hotpluggable disks), which is no restart's business even before it is
// written.
func templateDiffers(vm *apiv1.VirtualMachine, vmi *apiv1.VirtualMachineInstance) bool {
	want, _ := proto.Clone(vm.GetSpec().GetTemplate().GetSpec()).(*apiv1.VirtualMachineInstanceSpec)
	have, _ := proto.Clone(vmi.GetSpec()).(*apiv1.VirtualMachineInstanceSpec)
	if want == nil || have == nil {
		return want != have
	}
	want.Paused, have.Paused = false, false
	want.EvictionStrategy, have.EvictionStrategy = "", ""
	have.TerminationGracePeriodSeconds = want.TerminationGracePeriodSeconds
	if _, set := want.GetNodeSelector()[apiv1.LabelNodeName]; !set {
		// The pin to the node holding the VM's persistent volumes
		// (startVMI): every instance after the first has it, and counting
		// it left restart_required true after every restart.
		delete(have.NodeSelector, apiv1.LabelNodeName)
	}
	if _, complete := validation.LiveDisks(want, have); complete {
		// Only what the instance takes live differs (or nothing): the
		// disks and volumes count as the template's.
		for _, spec := range []*apiv1.VirtualMachineInstanceSpec{want, have} {
			spec.Volumes = nil
			if d := spec.GetDomain().GetDevices(); d != nil {
				d.Disks = nil
			}
		}
	}
	return !proto.Equal(want, have)
}
