package provider

import (
	"context"
	"maps"
	"slices"

	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
)

// Whether a change restarts a running VM. Plan (ModifyPlan, to say what
// apply will do) and apply (Update, to do it) both ask decideRestart, so
// that they cannot disagree; it is a pure function, tested on its own.

// restartAction is what apply does about a VM whose change takes effect
// only when its guest restarts.
type restartAction int

const (
	// restartNone: no change waits for a restart, no instance runs the
	// old settings, or the VM is being stopped (Halted) and will start
	// with the new ones.
	restartNone restartAction = iota
	// restartNow: apply restarts the VM and waits for the new instance.
	restartNow
	// restartDeferred: the VM keeps running with the old settings and
	// restart_required stays true until it restarts.
	restartDeferred
)

// restartDecision is decideRestart's answer.
type restartDecision struct {
	action restartAction
	// why says, for restartDeferred, why apply does not restart the VM.
	why string
	// wait is the run strategy whose state apply then waits for.
	wait string
}

// decideRestart decides for a VM with run strategy strategy (as the change
// leaves it) and update_policy policy. running says an instance runs, and
// pending that a change waits for a restart (a planned one, or
// restart_required).
//
// update_policy "restart" restarts the VMs whose run strategy restarts them
// anyway: Always, RerunOnFailure and Manual. A Manual VM that was running
// runs again after the restart, so the wait is Always's. Once is never
// restarted (its one run is under way), nor is a strategy this provider
// does not know. Otherwise the wait is the strategy's own.
func decideRestart(strategy, policy string, running, pending bool) restartDecision {
	d := restartDecision{wait: strategy}
	if !running || !pending || strategy == apiv1.RunStrategyHalted {
		return d
	}
	switch {
	case policy != updatePolicyRestart:
		d.action, d.why = restartDeferred, `update_policy = "none"`
	case strategy == apiv1.RunStrategyAlways || strategy == apiv1.RunStrategyRerunOnFailure:
		d.action = restartNow
	case strategy == apiv1.RunStrategyManual:
		d.action, d.wait = restartNow, apiv1.RunStrategyAlways
	default:
		d.action, d.why = restartDeferred, `run_strategy = "`+strategy+`" is never restarted by the provider`
	}
	return d
}

// target is the wait that follows the decision, for the VM generation gen:
// after a restart, the state must be reached by an instance other than
// instanceUID, the one restarted.
func (d restartDecision) target(gen int64, instanceUID string) waitTarget {
	t := waitTarget{strategy: d.wait, generation: gen}
	if d.action == restartNow {
		t.notUID = instanceUID
	}
	return t
}

// restartChanges names the attributes whose change between state and plan
// the running guest only sees after a restart, and what of the disks it
// takes without one (live: the hotpluggable disks plugged and
// unplugged). The comparison is on the API objects after the agent's
// defaulting, as the VM controller's RestartRequired check is, so
// spellings and defaults do not count.
func restartChanges(ctx context.Context, state, plan *vmModel) (out []string, live validation.LiveDiskChange) {
	from, d1 := vmFromModel(ctx, state)
	to, d2 := vmFromModel(ctx, plan)
	if d1.HasError() || d2.HasError() {
		return nil, live
	}
	validation.DefaultVirtualMachine(from)
	validation.DefaultVirtualMachine(to)
	a, b := from.Spec.Template.Spec, to.Spec.Template.Spec
	if !proto.Equal(a.Domain.Cpu, b.Domain.Cpu) {
		out = append(out, "cpu")
	}
	if !proto.Equal(a.Domain.Memory, b.Domain.Memory) {
		out = append(out, "memory")
	}
	// A persistent disk that only grows is grown under the running guest,
	// and a hotpluggable one added or removed is plugged or unplugged (the
	// VM controller's rule, validation.LiveDisks).
	live, complete := validation.LiveDisks(b, a)
	if !complete {
		out = append(out, "disk")
	}
	if !proto.Equal(a.Domain.Firmware.GetKernelBoot(), b.Domain.Firmware.GetKernelBoot()) {
		out = append(out, "boot")
	}
	if !proto.Equal(a.Domain.Firmware.GetBootloader(), b.Domain.Firmware.GetBootloader()) {
		out = append(out, "bootloader")
	}
	// A network is part of its interface block: its kind and port
	// forwards are set up when the guest starts.
	if !equalMessages(a.Domain.Devices.Interfaces, b.Domain.Devices.Interfaces) || !equalMessages(a.Networks, b.Networks) {
		out = append(out, "interface")
	}
	if !maps.Equal(a.NodeSelector, b.NodeSelector) {
		out = append(out, "node_selector")
	}
	return out, live
}

// equalMessages compares two lists of API messages element by element.
func equalMessages[M proto.Message](a, b []M) bool {
	return slices.EqualFunc(a, b, func(x, y M) bool { return proto.Equal(x, y) })
}
