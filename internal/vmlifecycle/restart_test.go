//lint:file-ignore SA1019 these tests write the deprecated running flag: VMs written with it must keep working

package vmlifecycle

import (
	"testing"

	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// restartTable is §1.4's restart column, per instance state.
var restartTable = []verbCase{
	{always, absent, refusal("VM is not running")},
	{always, pending, queued(reqStop(), reqStart())},
	{always, running, queued(reqStop(), reqStart())},
	{always, succ, queued(reqStop(), reqStart())},
	{always, failed, queued(reqStop(), reqStart())},
	{always, deleting, queued(reqStop(), reqStart())},

	{rerun, absent, refusal("VM is not running")},
	{rerun, pending, queued(reqStop(), reqStart())},
	{rerun, running, queued(reqStop(), reqStart())},
	{rerun, succ, queued(reqStop(), reqStart())},
	{rerun, failed, queued(reqStop(), reqStart())},
	{rerun, deleting, queued(reqStop(), reqStart())},

	{manual, absent, refusal("VM is not running")},
	{manual, pending, queued(reqStop(), reqStart())},
	{manual, running, queued(reqStop(), reqStart())},
	{manual, succ, queued(reqStop(), reqStart())},
	{manual, failed, queued(reqStop(), reqStart())},
	{manual, deleting, queued(reqStop(), reqStart())},

	{halted, absent, refusal("RunStrategy Halted does not support manual restart requests")},
	{halted, pending, refusal("RunStrategy Halted does not support manual restart requests")},
	{halted, running, refusal("RunStrategy Halted does not support manual restart requests")},
	{halted, succ, refusal("RunStrategy Halted does not support manual restart requests")},
	{halted, failed, refusal("RunStrategy Halted does not support manual restart requests")},
	{halted, deleting, refusal("RunStrategy Halted does not support manual restart requests")},

	{once, absent, refusal("RunStrategy Once does not support manual restart requests")},
	{once, pending, refusal("RunStrategy Once does not support manual restart requests")},
	{once, running, refusal("RunStrategy Once does not support manual restart requests")},
	{once, succ, refusal("RunStrategy Once does not support manual restart requests")},
	{once, failed, refusal("RunStrategy Once does not support manual restart requests")},
	{once, deleting, refusal("RunStrategy Once does not support manual restart requests")},
}

func TestRestart(t *testing.T) {
	for _, c := range restartTable {
		t.Run(c.name(), func(t *testing.T) {
			vm, vmi := newVM(c.strategy), newVMI(c.state)
			before := proto.Clone(vm).(*apiv1.VirtualMachine)
			grace, err := Restart(vm, vmi, nil)
			checkOutcome(t, before, vm, grace, err, c.want)
		})
	}
}

func TestRestartEdgeCases(t *testing.T) {
	force := func(o outcome) outcome {
		o.vmiGrace = ptr(int64(1))
		return o
	}
	for _, c := range []struct {
		name     string
		strategy string
		state    string
		grace    *int64
		pending  []*apiv1.StateChangeRequest
		want     outcome
	}{
		{name: "Always/Running/force sets the instance grace to 1s", strategy: always, state: running, grace: ptr(int64(0)), want: force(queued(reqStop(), reqStart()))},
		{name: "Manual/being deleted/force", strategy: manual, state: deleting, grace: ptr(int64(0)), want: force(queued(reqStop(), reqStart()))},
		{name: "Always/Succeeded/force: final instance not patched", strategy: always, state: succ, grace: ptr(int64(0)), want: queued(reqStop(), reqStart())},
		{name: "grace 5 is invalid", strategy: always, state: running, grace: ptr(int64(5)), want: outcome{invalid: true}},
		{name: "negative grace is invalid", strategy: always, state: running, grace: ptr(int64(-1)), want: outcome{invalid: true}},
		{name: "Always/Running/stop pending", strategy: always, state: running, pending: reqs(reqStop()), want: refusal(msgUnderway)},
		{name: "Manual/Running/restart pending", strategy: manual, state: running, pending: reqs(reqStop(), reqStart()), want: refusal(msgUnderway)},
	} {
		t.Run(c.name, func(t *testing.T) {
			vm, vmi := newVM(c.strategy), newVMI(c.state)
			vm.Status.StateChangeRequests = c.pending
			before := proto.Clone(vm).(*apiv1.VirtualMachine)
			grace, err := Restart(vm, vmi, c.grace)
			checkOutcome(t, before, vm, grace, err, c.want)
		})
	}
}

func TestRestartDeprecatedRunningKeepsSpec(t *testing.T) {
	vm := newVM("")
	vm.Spec.Running = ptr(true)
	before := proto.Clone(vm).(*apiv1.VirtualMachine)
	grace, err := Restart(vm, newVMI(running), nil)
	checkOutcome(t, before, vm, grace, err, queued(reqStop(), reqStart()))
}
