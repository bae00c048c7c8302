package vm

import (
	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// PrintableStatus evaluates KubeVirt's printable statuses in its order;
// the first match wins (setPrintableStatus). createExpected and
// deleteExpected are this controller's outstanding expectations.
func PrintableStatus(vm *apiv1.VirtualMachine, vmi *apiv1.VirtualMachineInstance, createExpected, deleteExpected bool) string {
	phase := vmi.GetStatus().GetPhase()
	final := vmi != nil && apiv1.IsFinal(phase)
	cond := func(t string) *apiv1.Condition { return apiv1.FindCondition(vmi.GetStatus().GetConditions(), t) }
	paused := cond(apiv1.ConditionPaused).GetStatus() == apiv1.ConditionTrue
	sched := cond(apiv1.ConditionPodScheduled)
	sync := cond(apiv1.ConditionSynchronized)
	switch {
	case vm.GetMetadata().GetDeletionTimestamp() != nil:
		return apiv1.PrintableTerminating
	case vmi != nil && !final && (vmi.Metadata.GetDeletionTimestamp() != nil || deleteExpected):
		return apiv1.PrintableStopping
	case migrating(vmi):
		return apiv1.PrintableMigrating
	case phase == apiv1.PhaseRunning && paused:
		return apiv1.PrintablePaused
	case phase == apiv1.PhaseRunning:
		return apiv1.PrintableRunning
	case sync.GetStatus() == apiv1.ConditionFalse && sync.GetReason() == apiv1.ReasonDataVolumeError:
		return apiv1.PrintableDataVolumeError
	case sched.GetStatus() == apiv1.ConditionFalse && sched.GetReason() == "Unschedulable" && !final:
		return apiv1.PrintableErrorUnschedulable
	case cond(apiv1.ConditionProvisioning).GetStatus() == apiv1.ConditionTrue && !final:
		return apiv1.PrintableProvisioning
	case (vmi == nil && createExpected) ||
		(vmi != nil && (phase == apiv1.PhaseUnset || phase == apiv1.PhasePending || phase == apiv1.PhaseScheduling || phase == apiv1.PhaseScheduled)):
		return apiv1.PrintableStarting
	case (vmi == nil || final) && !createExpected && vm.GetStatus().GetStartFailure().GetConsecutiveFailCount() > 0 && crashLoopStrategy(runStrategy(vm)):
		return apiv1.PrintableCrashLoopBackOff
	case final || (vmi == nil && !createExpected):
		return apiv1.PrintableStopped
	}
	return apiv1.PrintableUnknown
}

func migrating(vmi *apiv1.VirtualMachineInstance) bool {
	ms := vmi.GetStatus().GetMigrationState()
	return ms.GetStartTimestamp() != nil && ms.GetEndTimestamp() == nil && !ms.GetCompleted() && !ms.GetFailed()
}

func crashLoopStrategy(s string) bool {
	return s == apiv1.RunStrategyAlways || s == apiv1.RunStrategyRerunOnFailure || s == apiv1.RunStrategyOnce
}
