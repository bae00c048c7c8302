package vmlifecycle

import (
	"testing"

	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// TestQueueRules covers §1.3's write rules for state-change requests.
func TestQueueRules(t *testing.T) {
	stopOld := &apiv1.StateChangeRequest{Action: apiv1.StateChangeStop, Uid: "older"}
	for _, c := range []struct {
		name    string
		pending []*apiv1.StateChangeRequest
		add     []*apiv1.StateChangeRequest
		want    []*apiv1.StateChangeRequest // nil: refused
	}{
		{"empty + start", nil, reqs(reqStart()), reqs(reqStart())},
		{"empty + stop", nil, reqs(reqStop()), reqs(reqStop())},
		{"empty + restart", nil, reqs(reqStop(), reqStart()), reqs(reqStop(), reqStart())},
		{"stop pending + stop replaces it", reqs(stopOld), reqs(reqStop()), reqs(reqStop())},
		{"start pending + stop replaces it", reqs(reqStart()), reqs(reqStop()), reqs(reqStop())},
		{"restart pending + stop replaces it", reqs(stopOld, reqStart()), reqs(reqStop()), reqs(reqStop())},
		{"start pending + start", reqs(reqStart()), reqs(reqStart()), nil},
		{"stop pending + start", reqs(stopOld), reqs(reqStart()), nil},
		{"stop pending + restart", reqs(stopOld), reqs(reqStop(), reqStart()), nil},
		{"restart pending + restart", reqs(stopOld, reqStart()), reqs(reqStop(), reqStart()), nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			vm := newVM(manual)
			vm.Status.StateChangeRequests = c.pending
			before := proto.Clone(vm).(*apiv1.VirtualMachine)
			err := queue(vm, c.add...)
			want := outcome{requests: c.want}
			if c.want == nil {
				want = refusal(msgUnderway)
			}
			checkOutcome(t, before, vm, nil, err, want)
		})
	}
}

// TestQueueCopiesRequests: the VM must not share messages with the caller.
func TestQueueCopiesRequests(t *testing.T) {
	vm := newVM(manual)
	r := reqStart()
	if err := queue(vm, r); err != nil {
		t.Fatal(err)
	}
	r.Action = "mutated"
	if vm.Status.StateChangeRequests[0].Action != apiv1.StateChangeStart {
		t.Fatal("queued request aliases the caller's")
	}
}

// TestAcceptedVerbsResetStartFailure: every accepted start, stop or restart
// clears the crash-loop backoff (§2.4), on both the spec and the queue path;
// a refused one leaves it.
func TestAcceptedVerbsResetStartFailure(t *testing.T) {
	for _, c := range []struct {
		name    string
		do      func(*apiv1.VirtualMachine) error
		cleared bool
	}{
		{"start flips Halted", func(vm *apiv1.VirtualMachine) error { vm.Spec.RunStrategy = halted; return Start(vm, nil, false) }, true},
		{"start queues for Manual", func(vm *apiv1.VirtualMachine) error { vm.Spec.RunStrategy = manual; return Start(vm, nil, false) }, true},
		{"stop flips Always", func(vm *apiv1.VirtualMachine) error {
			_, err := Stop(vm, newVMI(running), nil)
			return err
		}, true},
		{"stop queues for RerunOnFailure", func(vm *apiv1.VirtualMachine) error {
			vm.Spec.RunStrategy = rerun
			_, err := Stop(vm, newVMI(running), nil)
			return err
		}, true},
		{"restart queues", func(vm *apiv1.VirtualMachine) error {
			_, err := Restart(vm, newVMI(failed), nil)
			return err
		}, true},
		{"refused start keeps it", func(vm *apiv1.VirtualMachine) error { return Start(vm, nil, false) }, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			vm := newVM(always)
			err := c.do(vm)
			if c.cleared && (err != nil || vm.Status.StartFailure != nil) {
				t.Fatalf("err %v, start_failure %v", err, vm.Status.StartFailure)
			}
			if !c.cleared && (err == nil || vm.Status.StartFailure == nil) {
				t.Fatalf("err %v, start_failure %v", err, vm.Status.StartFailure)
			}
		})
	}
}
