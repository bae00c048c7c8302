package vmlifecycle

import (
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

func pausedCondition(vmi *apiv1.VirtualMachineInstance) *apiv1.VirtualMachineInstance {
	vmi.Status.Conditions = []*apiv1.Condition{{Type: apiv1.ConditionPaused, Status: apiv1.ConditionTrue, Reason: "PausedIOError"}}
	return vmi
}

func pausedSpec(vmi *apiv1.VirtualMachineInstance) *apiv1.VirtualMachineInstance {
	vmi.Spec.Paused = true
	return vmi
}

type pauseCase struct {
	name       string
	vmi        *apiv1.VirtualMachineInstance
	refused    string
	wantPaused bool
}

func runPauseCases(t *testing.T, verb func(*apiv1.VirtualMachineInstance) error, cases []pauseCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var before *apiv1.VirtualMachineInstance
			if c.vmi != nil {
				before = proto.Clone(c.vmi).(*apiv1.VirtualMachineInstance)
			}
			err := verb(c.vmi)
			if c.refused != "" {
				var re *RefusedError
				if !errors.As(err, &re) || re.Message != c.refused {
					t.Fatalf("want refusal %q, got %v", c.refused, err)
				}
				if c.vmi != nil && !proto.Equal(before, c.vmi) {
					t.Fatalf("refused verb changed the instance: %v", c.vmi)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.vmi.Spec.Paused != c.wantPaused {
				t.Fatalf("spec.paused = %v, want %v", c.vmi.Spec.Paused, c.wantPaused)
			}
			before.Spec.Paused = c.wantPaused
			if !proto.Equal(before, c.vmi) {
				t.Fatalf("verb changed more than spec.paused: %v", c.vmi)
			}
		})
	}
}

func TestPause(t *testing.T) {
	migrating := newVMI(running)
	migrating.Status.MigrationState = &apiv1.MigrationState{MigrationUid: "m"}
	migrated := newVMI(running)
	migrated.Status.MigrationState = &apiv1.MigrationState{MigrationUid: "m", Completed: true}
	runPauseCases(t, Pause, []pauseCase{
		{name: "absent", vmi: nil, refused: "VM is not running"},
		{name: "Pending", vmi: newVMI(pending), refused: "VMI is not running"},
		{name: "Succeeded", vmi: newVMI(succ), refused: "VMI is not running"},
		{name: "Running", vmi: newVMI(running), wantPaused: true},
		{name: "Running/pause requested", vmi: pausedSpec(newVMI(running)), refused: "VMI is already paused"},
		{name: "Running/Paused condition", vmi: pausedCondition(newVMI(running)), refused: "VMI is already paused"},
		{name: "Running/migrating", vmi: migrating, refused: "Cannot pause VM 'web' because it is currently being migrated"},
		{name: "Running/migration completed", vmi: migrated, wantPaused: true},
		{name: "Running/being deleted", vmi: newVMI(deleting), wantPaused: true},
	})
}

func TestUnpause(t *testing.T) {
	runPauseCases(t, Unpause, []pauseCase{
		{name: "absent", vmi: nil, refused: "VM is not running"},
		{name: "Pending/paused", vmi: pausedSpec(newVMI(pending)), refused: "VMI is not running"},
		{name: "Running/not paused", vmi: newVMI(running), refused: "VMI is not paused"},
		{name: "Running/paused", vmi: pausedSpec(newVMI(running)), wantPaused: false},
		{name: "Running/paused by the hypervisor", vmi: pausedCondition(newVMI(running)), wantPaused: false},
	})
}
