//lint:file-ignore SA1019 these tests write the deprecated running flag: VMs written with it must keep working

package vmlifecycle

import (
	"errors"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

const vmiUID = "vmi-uid-1"

// Instance states the §1.4 tables are written against.
const (
	absent   = "absent"
	deleting = "being deleted" // Running, with a deletion timestamp
)

var states = []string{absent, apiv1.PhasePending, apiv1.PhaseRunning, apiv1.PhaseSucceeded, apiv1.PhaseFailed, deleting}

func ptr[T any](v T) *T { return &v }

// newVM returns a VM with status the verbs must not touch, and a crash-loop
// backoff every accepted verb must reset.
func newVM(strategy string) *apiv1.VirtualMachine {
	return &apiv1.VirtualMachine{
		Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: "web", Uid: "vm-uid"},
		Spec: &apiv1.VirtualMachineSpec{
			RunStrategy: strategy,
			Template:    &apiv1.VirtualMachineInstanceTemplateSpec{Spec: &apiv1.VirtualMachineInstanceSpec{}},
		},
		Status: &apiv1.VirtualMachineStatus{
			PrintableStatus: "Whatever",
			RunStrategy:     strategy,
			Conditions:      []*apiv1.Condition{{Type: apiv1.ConditionReady, Status: apiv1.ConditionFalse}},
			StartFailure: &apiv1.VirtualMachineStartFailure{
				ConsecutiveFailCount: 2, LastFailedVmiUid: "old", RetryAfterTimestamp: timestamppb.New(time.Unix(1e9, 0)),
			},
		},
	}
}

// newVMI returns the instance in state, or nil for absent.
func newVMI(state string) *apiv1.VirtualMachineInstance {
	if state == absent {
		return nil
	}
	vmi := &apiv1.VirtualMachineInstance{
		Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: "web", Uid: vmiUID},
		Spec:     &apiv1.VirtualMachineInstanceSpec{TerminationGracePeriodSeconds: ptr(int64(30))},
		Status:   &apiv1.VirtualMachineInstanceStatus{Phase: state},
	}
	if state == deleting {
		vmi.Status.Phase = apiv1.PhaseRunning
		vmi.Metadata.DeletionTimestamp = timestamppb.New(time.Unix(2e9, 0))
	}
	return vmi
}

func reqStart() *apiv1.StateChangeRequest {
	return &apiv1.StateChangeRequest{Action: apiv1.StateChangeStart}
}

func reqStartPaused() *apiv1.StateChangeRequest {
	return &apiv1.StateChangeRequest{Action: apiv1.StateChangeStart, Data: map[string]string{"paused": "true"}}
}

func reqStop() *apiv1.StateChangeRequest {
	return &apiv1.StateChangeRequest{Action: apiv1.StateChangeStop, Uid: vmiUID}
}

func reqs(r ...*apiv1.StateChangeRequest) []*apiv1.StateChangeRequest { return r }

// outcome is what a verb should do to the VM.
type outcome struct {
	refused  string // KubeVirt's refusal message; empty when accepted
	invalid  bool   // an InvalidError
	strategy string // spec.run_strategy afterwards, when it changes
	running  *bool  // spec.running afterwards, when it changes
	requests []*apiv1.StateChangeRequest
	vmiGrace *int64 // grace period to write to the instance
}

func refusal(msg string) outcome { return outcome{refused: msg} }
func flipTo(strategy string) outcome {
	return outcome{strategy: strategy}
}
func queued(r ...*apiv1.StateChangeRequest) outcome { return outcome{requests: r} }

// checkOutcome compares the VM after a verb with before plus want: nothing
// else may change, and an accepted verb resets the crash-loop backoff.
func checkOutcome(t *testing.T, before, after *apiv1.VirtualMachine, vmiGrace *int64, err error, want outcome) {
	t.Helper()
	switch {
	case want.refused != "":
		var re *RefusedError
		if !errors.As(err, &re) || re.Message != want.refused {
			t.Fatalf("want refusal %q, got %v", want.refused, err)
		}
	case want.invalid:
		var ie *InvalidError
		if !errors.As(err, &ie) {
			t.Fatalf("want InvalidError, got %v", err)
		}
	case err != nil:
		t.Fatalf("unexpected error: %v", err)
	}
	if err != nil {
		if vmiGrace != nil {
			t.Errorf("refused verb asks to patch the instance grace period to %d", *vmiGrace)
		}
		if !proto.Equal(before, after) {
			t.Errorf("refused verb changed the VM:\nbefore %v\nafter  %v", before, after)
		}
		return
	}
	expect := proto.Clone(before).(*apiv1.VirtualMachine)
	if want.strategy != "" {
		expect.Spec.RunStrategy = want.strategy
	}
	if want.running != nil {
		expect.Spec.Running = want.running
	}
	if want.requests != nil {
		expect.Status.StateChangeRequests = want.requests
	}
	expect.Status.StartFailure = nil
	if !proto.Equal(expect, after) {
		t.Errorf("VM after verb:\n got %v\nwant %v", after, expect)
	}
	switch {
	case want.vmiGrace == nil && vmiGrace != nil:
		t.Errorf("instance grace period %d, want none", *vmiGrace)
	case want.vmiGrace != nil && (vmiGrace == nil || *vmiGrace != *want.vmiGrace):
		t.Errorf("instance grace period %v, want %d", vmiGrace, *want.vmiGrace)
	}
}

// TestTablesCoverEveryStrategyAndState keeps the §1.4 tables complete.
func TestTablesCoverEveryStrategyAndState(t *testing.T) {
	strategies := []string{apiv1.RunStrategyAlways, apiv1.RunStrategyRerunOnFailure, apiv1.RunStrategyManual, apiv1.RunStrategyHalted, apiv1.RunStrategyOnce}
	for verb, table := range map[string][]verbCase{"start": startTable, "stop": stopTable, "restart": restartTable} {
		seen := map[string]bool{}
		for _, c := range table {
			seen[c.strategy+"/"+c.state] = true
		}
		for _, s := range strategies {
			for _, st := range states {
				if !seen[s+"/"+st] {
					t.Errorf("%s table has no row for %s with instance %s", verb, s, st)
				}
			}
		}
	}
}

// verbCase is one row of a §1.4 table: strategy × instance state → outcome.
type verbCase struct {
	strategy string
	state    string
	want     outcome
}

func (c verbCase) name() string { return c.strategy + "/" + c.state }
