package vm

import (
	"errors"
	"time"

	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// Conditions the VM controller owns; every other VMI condition is mirrored.
var ownConditions = map[string]bool{
	apiv1.ConditionReady:           true,
	apiv1.ConditionFailure:         true,
	apiv1.ConditionRestartRequired: true,
}

// syncConditions sets Ready, Failure and RestartRequired, and mirrors the
// VMI's other conditions (KubeVirt syncConditions).
func (c *Controller) syncConditions(vm *apiv1.VirtualMachine, vmi *apiv1.VirtualMachineInstance, syncErr error, now time.Time) {
	st := vm.Status
	conds := st.Conditions

	// Ready.
	ready := &apiv1.Condition{Type: apiv1.ConditionReady, Status: apiv1.ConditionFalse}
	switch vr := apiv1.FindCondition(vmi.GetStatus().GetConditions(), apiv1.ConditionReady); {
	case vmi == nil:
		ready.Reason, ready.Message = "VMINotExists", "VMI does not exist"
	case vr == nil:
		ready.Reason, ready.Message = "VMIConditionMissing", "VMI has no Ready condition"
	default:
		ready.Status, ready.Reason, ready.Message = vr.Status, vr.Reason, vr.Message
	}
	conds = apiv1.SetCondition(conds, ready, now)

	// Failure: the last sync error, gone after a clean pass.
	var se *syncError
	if errors.As(syncErr, &se) {
		conds = apiv1.SetCondition(conds, &apiv1.Condition{
			Type: apiv1.ConditionFailure, Status: apiv1.ConditionTrue, Reason: se.reason, Message: se.err.Error(),
		}, now)
	} else if syncErr == nil {
		conds = apiv1.RemoveCondition(conds, apiv1.ConditionFailure)
	}

	// RestartRequired: the template changed since the running VMI was made.
	if vmi != nil && !apiv1.IsFinal(vmi.GetStatus().GetPhase()) && templateDiffers(vm, vmi) {
		conds = apiv1.SetCondition(conds, &apiv1.Condition{
			Type: apiv1.ConditionRestartRequired, Status: apiv1.ConditionTrue, Reason: "TemplateChanged",
			Message: "the VM template changed; restart the VM to apply it",
		}, now)
	} else {
		conds = apiv1.RemoveCondition(conds, apiv1.ConditionRestartRequired)
	}

	// Mirror the rest of the VMI's conditions; drop the ones it lost.
	// PodScheduled=True is not mirrored: it says nothing the status does
	// not, and mirroring it would cost a VM write on every start.
	mirrored := map[string]bool{}
	for _, vc := range vmi.GetStatus().GetConditions() {
		if ownConditions[vc.Type] || (vc.Type == apiv1.ConditionPodScheduled && vc.Status == apiv1.ConditionTrue) {
			continue
		}
		mirrored[vc.Type] = true
		cp := proto.Clone(vc).(*apiv1.Condition)
		conds = apiv1.SetCondition(conds, cp, now)
		// Keep the VMI's own transition time.
		if vc.LastTransitionTime != nil {
			cp.LastTransitionTime = vc.LastTransitionTime
		}
	}
	out := conds[:0]
	for _, c := range conds {
		if ownConditions[c.Type] || mirrored[c.Type] {
			out = append(out, c)
		}
	}
	st.Conditions = out
}
