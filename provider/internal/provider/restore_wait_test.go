package provider

import (
	"strings"
	"testing"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

func TestJudgeRestoreAndClone(t *testing.T) {
	restore := func(phase string, complete bool, errText string) *apiv1.VirtualMachineRestore {
		return &apiv1.VirtualMachineRestore{Metadata: &apiv1.ObjectMeta{Name: "r"},
			Status: &apiv1.VirtualMachineRestoreStatus{Phase: phase, Complete: complete, Error: errText, Message: "copying volume data (1/2)"}}
	}
	if v := judgeRestore(restore(apiv1.RestoreStaging, false, "disk full")); v.done || v.err != nil ||
		!strings.Contains(v.state, "copying volume data (1/2)") || !strings.Contains(v.state, "disk full") {
		t.Errorf("a node's error while staging is described, not final: %+v", v)
	}
	if v := judgeRestore(restore(apiv1.RestoreSucceeded, true, "")); !v.done {
		t.Errorf("succeeded: %+v", v)
	}
	if v := judgeRestore(restore(apiv1.RestoreFailed, false, "Restore target VMI must be powered off before restore operation")); v.err == nil ||
		!strings.Contains(v.err.Error(), "must be powered off") {
		t.Errorf("failed: %+v", v)
	}
	clone := func(phase, errText string) *apiv1.VirtualMachineClone {
		return &apiv1.VirtualMachineClone{Metadata: &apiv1.ObjectMeta{Name: "c"},
			Status: &apiv1.VirtualMachineCloneStatus{Phase: phase, Error: errText, RestoreName: "clone-u-restore"}}
	}
	if v := judgeClone(clone(apiv1.CloneRestoreInProgress, "")); v.done || v.err != nil || !strings.Contains(v.state, "clone-u-restore") {
		t.Errorf("in progress: %+v", v)
	}
	if v := judgeClone(clone(apiv1.CloneSucceeded, "")); !v.done {
		t.Errorf("succeeded: %+v", v)
	}
	if v := judgeClone(clone(apiv1.CloneFailed, `snapshot "s" is not ready`)); v.err == nil || !strings.Contains(v.err.Error(), `snapshot "s" is not ready`) {
		t.Errorf("failed: %+v", v)
	}
}
