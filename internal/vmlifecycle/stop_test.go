//lint:file-ignore SA1019 these tests write the deprecated running flag: VMs written with it must keep working

package vmlifecycle

import (
	"testing"

	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

const msgHaltedStop = "Halted only supports manual stop requests with a shorter graceperiod"

// stopTable is §1.4's stop column, per instance state, without a grace
// period.
var stopTable = []verbCase{
	{always, absent, flipTo(halted)},
	{always, pending, flipTo(halted)},
	{always, running, flipTo(halted)},
	{always, succ, flipTo(halted)},
	{always, failed, flipTo(halted)},
	{always, deleting, flipTo(halted)},

	{rerun, absent, refusal("VM is not running")},
	{rerun, pending, queued(reqStop())},
	{rerun, running, queued(reqStop())},
	{rerun, succ, refusal("VM is not running")},
	{rerun, failed, refusal("VM is not running")},
	{rerun, deleting, queued(reqStop())},

	{manual, absent, refusal("VM is not running")},
	{manual, pending, queued(reqStop())},
	{manual, running, queued(reqStop())},
	{manual, succ, refusal("VM is not running")},
	{manual, failed, refusal("VM is not running")},
	{manual, deleting, queued(reqStop())},

	{halted, absent, refusal("VM is not running")},
	{halted, pending, refusal(msgHaltedStop)},
	{halted, running, refusal(msgHaltedStop)},
	{halted, succ, refusal("VM is not running")},
	{halted, failed, refusal("VM is not running")},
	{halted, deleting, refusal(msgHaltedStop)},

	{once, absent, flipTo(halted)},
	{once, pending, flipTo(halted)},
	{once, running, flipTo(halted)},
	{once, succ, flipTo(halted)},
	{once, failed, flipTo(halted)},
	{once, deleting, flipTo(halted)},
}

func TestStop(t *testing.T) {
	for _, c := range stopTable {
		t.Run(c.name(), func(t *testing.T) {
			vm, vmi := newVM(c.strategy), newVMI(c.state)
			before := proto.Clone(vm).(*apiv1.VirtualMachine)
			grace, err := Stop(vm, vmi, nil)
			checkOutcome(t, before, vm, grace, err, c.want)
		})
	}
}

func TestStopWithGracePeriod(t *testing.T) {
	withGrace := func(o outcome, g int64) outcome {
		o.vmiGrace = &g
		return o
	}
	for _, c := range []struct {
		name     string
		strategy string
		state    string
		vmiGrace *int64 // the instance's own; 30 unless set
		grace    int64
		pending  []*apiv1.StateChangeRequest
		want     outcome
	}{
		{name: "Always/Running/force", strategy: always, state: running, grace: 0, want: withGrace(flipTo(halted), 0)},
		{name: "Always/absent/force: no instance to patch", strategy: always, state: absent, grace: 0, want: flipTo(halted)},
		{name: "Always/Succeeded: final instance not patched", strategy: always, state: succ, grace: 10, want: flipTo(halted)},
		{name: "Once/Pending", strategy: once, state: pending, grace: 5, want: withGrace(flipTo(halted), 5)},
		{name: "Manual/Running", strategy: manual, state: running, grace: 5, want: withGrace(queued(reqStop()), 5)},
		{name: "RerunOnFailure/Running/longer than the instance's", strategy: rerun, state: running, grace: 120, want: withGrace(queued(reqStop()), 120)},
		{name: "Manual/Succeeded", strategy: manual, state: succ, grace: 5, want: refusal("VM is not running")},

		// Halted: a force stop of an instance already going down.
		{name: "Halted/Running/shorter", strategy: halted, state: running, grace: 5, want: withGrace(queued(reqStop()), 5)},
		{name: "Halted/being deleted/shorter", strategy: halted, state: deleting, grace: 0, want: withGrace(queued(reqStop()), 0)},
		{name: "Halted/Running/equal", strategy: halted, state: running, grace: 30, want: refusal(msgHaltedStop)},
		{name: "Halted/Running/longer", strategy: halted, state: running, grace: 60, want: refusal(msgHaltedStop)},
		{name: "Halted/Running/shorter than the unset default", strategy: halted, state: running, vmiGrace: ptr(int64(-1)), grace: 10, want: withGrace(queued(reqStop()), 10)},
		{name: "Halted/Running/instance grace 0", strategy: halted, state: running, vmiGrace: ptr(int64(0)), grace: 0, want: refusal(msgHaltedStop)},
		{name: "Halted/absent", strategy: halted, state: absent, grace: 0, want: refusal("VM is not running")},
		{name: "Halted/Failed", strategy: halted, state: failed, grace: 0, want: refusal("VM is not running")},

		// §1.3: a lone Stop replaces whatever is pending.
		{name: "Manual/Running/start pending", strategy: manual, state: running, grace: 5, pending: reqs(reqStart()), want: withGrace(queued(reqStop()), 5)},
		{name: "Halted/Running/shorter/restart pending", strategy: halted, state: running, grace: 1, pending: reqs(reqStop(), reqStart()), want: withGrace(queued(reqStop()), 1)},

		{name: "negative grace", strategy: always, state: running, grace: -1, want: outcome{invalid: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			vm, vmi := newVM(c.strategy), newVMI(c.state)
			vm.Status.StateChangeRequests = c.pending
			if vmi != nil && c.vmiGrace != nil {
				vmi.Spec.TerminationGracePeriodSeconds = c.vmiGrace
				if *c.vmiGrace < 0 {
					vmi.Spec.TerminationGracePeriodSeconds = nil
				}
			}
			before := proto.Clone(vm).(*apiv1.VirtualMachine)
			grace, err := Stop(vm, vmi, ptr(c.grace))
			checkOutcome(t, before, vm, grace, err, c.want)
		})
	}
}

func TestStopKeepsDeprecatedRunningField(t *testing.T) {
	vm := newVM("")
	vm.Spec.Running = ptr(true)
	before := proto.Clone(vm).(*apiv1.VirtualMachine)
	grace, err := Stop(vm, newVMI(running), nil)
	checkOutcome(t, before, vm, grace, err, outcome{running: ptr(false)})
}

func TestStopPendingQueueForRerunOnFailure(t *testing.T) {
	for _, c := range []struct {
		name    string
		pending []*apiv1.StateChangeRequest
	}{
		{"stop pending", reqs(&apiv1.StateChangeRequest{Action: apiv1.StateChangeStop, Uid: "older"})},
		{"start pending", reqs(reqStart())},
		{"restart pending", reqs(reqStop(), reqStart())},
	} {
		t.Run(c.name, func(t *testing.T) {
			vm := newVM(rerun)
			vm.Status.StateChangeRequests = c.pending
			before := proto.Clone(vm).(*apiv1.VirtualMachine)
			grace, err := Stop(vm, newVMI(running), nil)
			checkOutcome(t, before, vm, grace, err, queued(reqStop()))
		})
	}
}
