package vmlifecycle

import (
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// Data of a Start request that asks for the instance to be created paused.
const (
	StartDataPausedKey  = "paused"
	StartDataPausedTrue = "true"
)

func startRequest(paused bool) *apiv1.StateChangeRequest {
	r := &apiv1.StateChangeRequest{Action: apiv1.StateChangeStart}
	if paused {
		r.Data = map[string]string{StartDataPausedKey: StartDataPausedTrue}
	}
	return r
}

func stopRequest(vmi *apiv1.VirtualMachineInstance) *apiv1.StateChangeRequest {
	return &apiv1.StateChangeRequest{Action: apiv1.StateChangeStop, Uid: vmi.GetMetadata().GetUid()}
}

// checkQueue applies KubeVirt's rules for writing state-change requests
// (getChangeRequestJson in lifecycle.go): an empty list takes anything; a
// request that is a single Stop replaces whatever is pending (a stop wins
// over a pending start or restart); anything else while requests are
// pending is refused, because the controller only ever acts on the head and
// the user would not get what they asked for.
func checkQueue(vm *apiv1.VirtualMachine, reqs []*apiv1.StateChangeRequest) error {
	if len(vm.GetStatus().GetStateChangeRequests()) == 0 {
		return nil
	}
	if len(reqs) == 1 && reqs[0].GetAction() == apiv1.StateChangeStop {
		return nil
	}
	return refused(msgUnderway)
}

// setQueue writes reqs; checkQueue must have passed.
func setQueue(vm *apiv1.VirtualMachine, reqs []*apiv1.StateChangeRequest) {
	if vm.Status == nil {
		vm.Status = &apiv1.VirtualMachineStatus{}
	}
	out := make([]*apiv1.StateChangeRequest, len(reqs))
	for i, r := range reqs {
		out[i] = proto.Clone(r).(*apiv1.StateChangeRequest)
	}
	vm.Status.StateChangeRequests = out
}

// queue checks and writes reqs and resets the crash-loop backoff.
func queue(vm *apiv1.VirtualMachine, reqs ...*apiv1.StateChangeRequest) error {
	if err := checkQueue(vm, reqs); err != nil {
		return err
	}
	setQueue(vm, reqs)
	resetStartFailure(vm)
	return nil
}

// resetStartFailure drops status.start_failure: a user's start, stop or
// restart is an explicit intervention, so the next start must not wait out
// the crash-loop backoff of earlier failures (§2.4). KubeVirt removes it only
// in the status-patch path (getChangeRequestJson); the spec-flip path relies
// on the controller clearing it for Halted. Doing it on every accepted verb
// gives the same end state without depending on the controller's timing.
func resetStartFailure(vm *apiv1.VirtualMachine) {
	if vm.Status != nil {
		vm.Status.StartFailure = nil
	}
}
