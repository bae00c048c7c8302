//lint:file-ignore SA1019 these tests write the deprecated running flag: VMs written with it must keep working

package vmlifecycle

import (
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

const (
	always  = apiv1.RunStrategyAlways
	rerun   = apiv1.RunStrategyRerunOnFailure
	manual  = apiv1.RunStrategyManual
	halted  = apiv1.RunStrategyHalted
	once    = apiv1.RunStrategyOnce
	pending = apiv1.PhasePending
	running = apiv1.PhaseRunning
	succ    = apiv1.PhaseSucceeded
	failed  = apiv1.PhaseFailed
)

// startTable is §1.4's start column, per instance state.
var startTable = []verbCase{
	{always, absent, refusal("Always does not support manual start requests")},
	{always, pending, refusal("VM is already running")},
	{always, running, refusal("VM is already running")},
	{always, succ, refusal("Always does not support manual start requests")},
	{always, failed, refusal("Always does not support manual start requests")},
	{always, deleting, refusal("VM is already running")},

	{rerun, absent, queued(reqStart())},
	{rerun, pending, refusal("VM is already running")},
	{rerun, running, refusal("VM is already running")},
	{rerun, succ, queued(reqStop(), reqStart())},
	{rerun, failed, refusal("RerunOnFailure does not support starting VM from failed state")},
	{rerun, deleting, refusal("VM is already running")},

	{manual, absent, queued(reqStart())},
	{manual, pending, refusal("VM is already running")},
	{manual, running, refusal("VM is already running")},
	{manual, succ, queued(reqStop(), reqStart())},
	{manual, failed, queued(reqStop(), reqStart())},
	{manual, deleting, refusal("VM is already running")},

	{halted, absent, flipTo(always)},
	{halted, pending, refusal("VM is already running")},
	{halted, running, refusal("VM is already running")},
	{halted, succ, flipTo(always)},
	{halted, failed, flipTo(always)},
	{halted, deleting, refusal("VM is already running")},

	{once, absent, refusal("Once does not support manual start requests")},
	{once, pending, refusal("VM is already running")},
	{once, running, refusal("VM is already running")},
	{once, succ, refusal("Once does not support manual start requests")},
	{once, failed, refusal("Once does not support manual start requests")},
	{once, deleting, refusal("VM is already running")},
}

func TestStart(t *testing.T) {
	for _, c := range startTable {
		t.Run(c.name(), func(t *testing.T) {
			vm, vmi := newVM(c.strategy), newVMI(c.state)
			before := proto.Clone(vm).(*apiv1.VirtualMachine)
			err := Start(vm, vmi, false)
			checkOutcome(t, before, vm, nil, err, c.want)
		})
	}
}

func TestStartEdgeCases(t *testing.T) {
	type tc struct {
		name    string
		vm      func() *apiv1.VirtualMachine
		vmi     func() *apiv1.VirtualMachineInstance
		paused  bool
		pending []*apiv1.StateChangeRequest
		want    outcome
	}
	vmOf := func(s string) func() *apiv1.VirtualMachine { return func() *apiv1.VirtualMachine { return newVM(s) } }
	vmiOf := func(s string) func() *apiv1.VirtualMachineInstance {
		return func() *apiv1.VirtualMachineInstance { return newVMI(s) }
	}
	deprecated := func(run bool) func() *apiv1.VirtualMachine {
		return func() *apiv1.VirtualMachine {
			vm := newVM("")
			vm.Spec.Running = &run
			return vm
		}
	}
	for _, c := range []tc{
		// Unknown (node lost) and unset do not count as running.
		{name: "Manual/Unknown", vm: vmOf(manual), vmi: vmiOf(apiv1.PhaseUnknown), want: queued(reqStart())},
		{name: "Manual/phase unset", vm: vmOf(manual), vmi: vmiOf(apiv1.PhaseUnset), want: queued(reqStart())},
		{name: "Halted/Unknown", vm: vmOf(halted), vmi: vmiOf(apiv1.PhaseUnknown), want: flipTo(always)},

		// Started paused.
		{name: "Halted/absent/paused queues a paused start", vm: vmOf(halted), vmi: vmiOf(absent), paused: true, want: queued(reqStartPaused())},
		{name: "Halted/absent/paused with a paused template flips", paused: true, vmi: vmiOf(absent), want: flipTo(always),
			vm: func() *apiv1.VirtualMachine {
				vm := newVM(halted)
				vm.Spec.Template.Spec.Paused = true
				return vm
			}},
		{name: "Manual/absent/paused", vm: vmOf(manual), vmi: vmiOf(absent), paused: true, want: queued(reqStartPaused())},
		{name: "Manual/Succeeded/paused", vm: vmOf(manual), vmi: vmiOf(succ), paused: true, want: queued(reqStop(), reqStartPaused())},
		{name: "RerunOnFailure/Succeeded/paused", vm: vmOf(rerun), vmi: vmiOf(succ), paused: true, want: queued(reqStop(), reqStartPaused())},

		// Deprecated spec.running.
		{name: "running=false/absent sets running=true", vm: deprecated(false), vmi: vmiOf(absent), want: outcome{running: ptr(true)}},
		{name: "running=true/absent is Always", vm: deprecated(true), vmi: vmiOf(absent), want: refusal("Always does not support manual start requests")},

		// §1.3 queue rules as start sees them.
		{name: "Manual/absent/start pending", vm: vmOf(manual), vmi: vmiOf(absent), pending: reqs(reqStart()), want: refusal(msgUnderway)},
		{name: "Manual/absent/stop pending", vm: vmOf(manual), vmi: vmiOf(absent), pending: reqs(reqStop()), want: refusal(msgUnderway)},
		{name: "Halted/absent/paused/request pending", vm: vmOf(halted), vmi: vmiOf(absent), paused: true, pending: reqs(reqStop()), want: refusal(msgUnderway)},
		// The spec flip does not go through the queue (getRunningPatch).
		{name: "Halted/absent/request pending flips anyway", vm: vmOf(halted), vmi: vmiOf(absent), pending: reqs(reqStop()), want: flipTo(always)},
	} {
		t.Run(c.name, func(t *testing.T) {
			vm := c.vm()
			vm.Status.StateChangeRequests = c.pending
			before := proto.Clone(vm).(*apiv1.VirtualMachine)
			err := Start(vm, c.vmi(), c.paused)
			checkOutcome(t, before, vm, nil, err, c.want)
		})
	}
}

func TestStartRejectsBothRunningAndRunStrategy(t *testing.T) {
	vm := newVM(always)
	vm.Spec.Running = ptr(true)
	err := Start(vm, nil, false)
	var re *RefusedError
	if err == nil || errors.As(err, &re) {
		t.Fatalf("want a plain error for an invalid VM, got %v", err)
	}
}
