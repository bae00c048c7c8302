package provider

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/timestamppb"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

func TestJudgeSnapshot(t *testing.T) {
	snap := func(phase string, ready bool, errText string) *apiv1.VirtualMachineSnapshot {
		return &apiv1.VirtualMachineSnapshot{Metadata: &apiv1.ObjectMeta{Name: "s"},
			Status: &apiv1.VirtualMachineSnapshotStatus{Phase: phase, ReadyToUse: ready, Error: errText,
				Conditions: []*apiv1.Condition{{Type: "Progressing", Status: "False", Reason: "SourceLocked", Message: "Source not locked: restore r"}}}}
	}
	if v := judgeSnapshot(snap(apiv1.SnapshotInProgress, false, "")); v.done || v.err != nil || !strings.Contains(v.state, "Source not locked: restore r") {
		t.Errorf("in progress: %+v", v)
	}
	if v := judgeSnapshot(snap(apiv1.SnapshotSucceeded, false, "")); v.done {
		t.Error("succeeded but not ready to use is not done")
	}
	if v := judgeSnapshot(snap(apiv1.SnapshotSucceeded, true, "")); !v.done || v.err != nil {
		t.Errorf("succeeded: %+v", v)
	}
	if v := judgeSnapshot(snap(apiv1.SnapshotFailed, false, "snapshot deadline exceeded")); v.err == nil ||
		v.err.Error() != "the snapshot failed: snapshot deadline exceeded" {
		t.Errorf("failed: %+v", v)
	}
	deleting := snap(apiv1.SnapshotInProgress, false, "")
	deleting.Metadata.DeletionTimestamp = timestamppb.Now()
	if v := judgeSnapshot(deleting); v.err == nil {
		t.Error("a snapshot being deleted ends the wait")
	}
}
