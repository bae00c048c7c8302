package apiv1

import (
	"errors"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"
)

// The domain rules below are defined here once and used by every component
// (API server, controllers, node agent, launcher, provider, CLI), so that
// none of them can disagree with another about what a VM means.

// Ref names an object in caches, queues, logs and errors:
// "namespace/name", or "name" when cluster-scoped.
func Ref(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// DomainName is the libvirt domain name of a VMI: namespace_name.
// Namespaces and names are DNS labels, which never contain '_', so names
// cannot clash.
func DomainName(namespace, name string) string { return namespace + "_" + name }

// DefaultTerminationGracePeriodSeconds is KubeVirt's default termination
// grace period: how long a guest has to shut down after the ACPI power
// button before it is killed.
const DefaultTerminationGracePeriodSeconds int64 = 30

// GracePeriodSeconds is the instance's termination grace period: the spec's
// value, DefaultTerminationGracePeriodSeconds when unset. Validation refuses
// negative values on write; one read from an older store counts as 0 (kill
// at once) rather than as a wait that never ends. Nil-safe.
func (s *VirtualMachineInstanceSpec) GracePeriodSeconds() int64 {
	if s == nil || s.TerminationGracePeriodSeconds == nil {
		return DefaultTerminationGracePeriodSeconds
	}
	return max(*s.TerminationGracePeriodSeconds, 0)
}

// ErrRunningAndRunStrategy: a VM sets both the deprecated running flag and
// run_strategy. Validation refuses it on write.
var ErrRunningAndRunStrategy = errors.New("spec.running and spec.run_strategy are mutually exclusive")

// EffectiveRunStrategy is the VM's run strategy as KubeVirt's
// VirtualMachine.RunStrategy() computes it: run_strategy, or the deprecated
// running flag (true → Always, false → Halted); neither means Halted. Both
// set is ErrRunningAndRunStrategy. Nil-safe.
func (s *VirtualMachineSpec) EffectiveRunStrategy() (string, error) {
	if s == nil {
		return RunStrategyHalted, nil
	}
	switch {
	case s.Running != nil && s.RunStrategy != "":
		return "", ErrRunningAndRunStrategy
	case s.Running != nil && *s.Running:
		return RunStrategyAlways, nil
	case s.Running != nil:
		return RunStrategyHalted, nil
	case s.RunStrategy == "":
		return RunStrategyHalted, nil
	}
	return s.RunStrategy, nil
}

// RunningFlag is the deprecated running flag, and whether the VM sets it
// at all. Outside this package the field is read only through this and
// EffectiveRunStrategy (staticcheck flags every other use).
func (s *VirtualMachineSpec) RunningFlag() (running, set bool) {
	if s == nil || s.Running == nil {
		return false, false
	}
	return *s.Running, true
}

// SetRunning makes the VM run (Always) or not (Halted) in whichever field
// its author chose, so a VM written with the deprecated running flag keeps
// using it (KubeVirt's getRunningPatch).
func (vm *VirtualMachine) SetRunning(running bool) {
	if vm.Spec == nil {
		vm.Spec = &VirtualMachineSpec{}
	}
	s := vm.Spec
	if s.Running != nil {
		s.Running = &running
		return
	}
	if running {
		s.RunStrategy = RunStrategyAlways
	} else {
		s.RunStrategy = RunStrategyHalted
	}
}

// ControllingVMUID is the uid of the VM that controls vmi (its controller
// owner reference of kind VirtualMachine), or "" for a bare VMI.
func ControllingVMUID(vmi *VirtualMachineInstance) string {
	for _, o := range vmi.GetMetadata().GetOwnerReferences() {
		if o.GetKind() == KindVirtualMachine && o.GetController() {
			return o.GetUid()
		}
	}
	return ""
}

// IsControlledBy reports whether vmi is vm's instance: it names vm as its
// controller by uid. A bare VMI (no controller) or one left by an earlier
// VM of the same name (another uid) is not.
func IsControlledBy(vmi *VirtualMachineInstance, vm *VirtualMachine) bool {
	uid := ControllingVMUID(vmi)
	return uid != "" && uid == vm.GetMetadata().GetUid()
}

// SetPhase moves the instance to phase and records when, as KubeVirt's
// phaseTransitionTimestamps do; setting the current phase again changes
// nothing.
func (st *VirtualMachineInstanceStatus) SetPhase(phase string, now time.Time) {
	setPhase(&st.Phase, &st.PhaseTransitionTimestamps, phase, now)
}

// SetPhase moves the migration to phase and records when.
func (st *VirtualMachineInstanceMigrationStatus) SetPhase(phase string, now time.Time) {
	setPhase(&st.Phase, &st.PhaseTransitionTimestamps, phase, now)
}

func setPhase(cur *string, times *[]*PhaseTransitionTimestamp, phase string, now time.Time) {
	if *cur == phase {
		return
	}
	*cur = phase
	*times = append(*times, &PhaseTransitionTimestamp{Phase: phase, Time: timestamppb.New(now)})
}

// PhaseSince returns when the object last entered phase, from its
// transition timestamps; the zero time if it never did.
func PhaseSince(times []*PhaseTransitionTimestamp, phase string) time.Time {
	for i := len(times) - 1; i >= 0; i-- {
		if times[i].GetPhase() == phase {
			return times[i].GetTime().AsTime()
		}
	}
	return time.Time{}
}

// FailOnNode fails the instance with reason and message if it is still the
// instance uid, placed on node, and not final, and reports whether it did.
// A decision taken about a node (its lease expired, an operator fenced it)
// must not touch a newer instance of the same name, nor one placed
// elsewhere since, nor rewrite how an instance ended.
func (vmi *VirtualMachineInstance) FailOnNode(uid, node, reason, message string, now time.Time) bool {
	st := vmi.GetStatus()
	if vmi.GetMetadata().GetUid() != uid || st.GetNodeName() != node || IsFinal(st.GetPhase()) {
		return false
	}
	st.SetPhase(PhaseFailed, now)
	st.Reason, st.Message = reason, message
	return true
}

// SetUnschedulable takes the node out of placement and records why in the
// condition c (NotReady from the node controller, Fenced from an
// operator).
func (n *Node) SetUnschedulable(c *Condition, now time.Time) {
	if n.Status == nil {
		n.Status = &NodeStatus{}
	}
	n.Status.Schedulable = false
	n.Status.Conditions = SetCondition(n.Status.Conditions, c, now)
}
