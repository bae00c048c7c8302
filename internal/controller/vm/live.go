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
//   - larger persistent volumes (validation.GrowVolumes): the node grows
//     the disks under the running guest, which sees the new size. Not
//     while a live migration is in flight: the target made its volumes at
//     the size the instance had, and the migration's end brings the VM
//     back here.
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
		// GrowVolumes changes nothing but sizes: a size that differs is
		// the whole difference.
		if grown, ok := validation.GrowVolumes(tmpl.GetVolumes(), next.Spec.Volumes); ok {
			if sizes := grownSizes(next.Spec.Volumes, grown); len(sizes) > 0 {
				changed = append(changed, "volumes", sizes)
				next.Spec.Volumes = grown
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

// grownSizes says which volumes grow, for the log: "data: 64Mi → 128Mi".
func grownSizes(from, to []*apiv1.Volume) []string {
	var out []string
	for i := range to {
		if a, b := from[i].GetPersistent().GetSize(), to[i].GetPersistent().GetSize(); a != b {
			out = append(out, fmt.Sprintf("%s: %s → %s", to[i].GetName(), a, b))
		}
	}
	return out
}

// templateDiffers reports whether the VM template no longer matches the
// VMI's spec in a way only a restart applies: it ignores the pause state
// (the verbs change it at runtime), the grace period a stop patches in,
// the node pin startVMI adds, and what carryLiveChanges carries to a
// running instance (eviction strategy, larger persistent volumes), which
// is no restart's business even before it is written.
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
	if grown, ok := validation.GrowVolumes(want.GetVolumes(), have.GetVolumes()); ok {
		have.Volumes = grown
	}
	return !proto.Equal(want, have)
}
