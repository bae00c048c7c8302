package apiv1

import (
	"crypto/rand"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"
)

// Migration phases (KubeVirt's VirtualMachineInstanceMigrationPhase).
const (
	MigrationPending         = "Pending"
	MigrationScheduling      = "Scheduling"
	MigrationScheduled       = "Scheduled"
	MigrationPreparingTarget = "PreparingTarget"
	MigrationTargetReady     = "TargetReady"
	MigrationRunning         = "Running"
	MigrationSucceeded       = "Succeeded"
	MigrationFailed          = "Failed"
)

// IsMigrationFinal reports whether a migration phase is terminal.
func IsMigrationFinal(phase string) bool {
	return phase == MigrationSucceeded || phase == MigrationFailed
}

// Migration modes, abort statuses and methods (MigrationState).
const (
	MigrationModePreCopy  = "PreCopy"
	MigrationModePostCopy = "PostCopy"
	MigrationModePaused   = "Paused"

	MigrationAbortAborting  = "Aborting"
	MigrationAbortSucceeded = "Succeeded"
	MigrationAbortFailed    = "Failed"

	MigrationMethodLive  = "LiveMigration"
	MigrationMethodBlock = "BlockMigration"
)

// Migration names: the label every migration carries (its VMI's name),
// the finalizer that holds a deleted one until it ended, and the
// condition an instance reports about whether it can move.
const (
	LabelMigrationVMIName = "virtplane.io/vmi-name"
	// LabelMigrationTargetNode on an instance names the node its migration
	// goes to (KubeVirt's kubevirt.io/migrationTargetNodeName): that
	// node's agent watches instances by it.
	LabelMigrationTargetNode = "virtplane.io/migration-target-node"
	FinalizerMigration       = "virtplane.io/migration"
	// LabelEvacuationNode on a migration names the node the evacuation
	// controller created it to empty (KubeVirt's
	// kubevirt.io/evacuationMigration annotation).
	LabelEvacuationNode     = "virtplane.io/evacuation-node"
	ConditionLiveMigratable = "LiveMigratable"
	// ConditionMigrationAbortRequested is set on a migration deleted
	// before it ended (KubeVirt's migrationAbortRequested).
	ConditionMigrationAbortRequested = "AbortRequested"
)

// Timestamp converts t, the zero time to nil.
func Timestamp(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

// HasLocalVolumes reports whether spec has a persistent volume on the
// local storage class: its VM is then pinned to the node holding it, and a
// migration copies it. Volumes on other classes are reachable from every
// node their class selects.
func HasLocalVolumes(spec *VirtualMachineInstanceSpec) bool {
	for _, v := range spec.GetVolumes() {
		if pv := v.GetPersistent(); pv != nil && pv.IsLocal() {
			return true
		}
	}
	return false
}

// MigrationMethodFor is how an instance with spec migrates: a writable
// disk on the node (an image's overlay, a local persistent volume) is
// copied with the memory (a block migration); volumes on storage classes
// stay where they are.
func MigrationMethodFor(spec *VirtualMachineInstanceSpec) string {
	for _, v := range spec.GetVolumes() {
		if v.GetImage() != nil || (v.GetPersistent() != nil && v.GetPersistent().IsLocal()) {
			return MigrationMethodBlock
		}
	}
	return MigrationMethodLive
}

// Reasons of a LiveMigratable=False condition.
const (
	ReasonPausedNotLiveMigratable = "PausedNotLiveMigratable"
)

// LiveMigratable is KubeVirt's LiveMigratable condition for what the
// spec alone decides (the node agent adds what only the node knows):
// False with the first reason that blocks a live migration, else True.
// EFI firmware does not block one: the variable store (NVRAM) travels in
// the migration stream (QEMU writes it to the target's store when the
// guest resumes there), or is on the VM's storage class (docs/
// migration.md).
func LiveMigratable(spec *VirtualMachineInstanceSpec) *Condition {
	switch {
	case spec.GetPaused():
		return &Condition{Type: ConditionLiveMigratable, Status: ConditionFalse, Reason: ReasonPausedNotLiveMigratable,
			Message: "the instance is paused; unpause it to migrate"}
	}
	return &Condition{Type: ConditionLiveMigratable, Status: ConditionTrue}
}

// NewMigration is a migration of instance vmi as the API stores it: the
// label that finds it by instance, and the finalizer that holds a deleted
// one until it ended. kind goes into the generated name,
// "<vmi>-<kind>-<5 random>", cut to a DNS label.
func NewMigration(namespace, vmi, kind string, labels map[string]string) *VirtualMachineInstanceMigration {
	l := map[string]string{}
	for k, v := range labels {
		l[k] = v
	}
	l[LabelMigrationVMIName] = vmi
	return &VirtualMachineInstanceMigration{
		Metadata: &ObjectMeta{Namespace: namespace, Name: MigrationName(vmi, kind), Labels: l,
			Finalizers: []string{FinalizerMigration}},
		Spec:   &VirtualMachineInstanceMigrationSpec{VmiName: vmi},
		Status: &VirtualMachineInstanceMigrationStatus{},
	}
}

// MigrationName is "<vmi>-<kind>-<5 random>", cut to a DNS label.
func MigrationName(vmi, kind string) string {
	suffix := "-" + kind + "-" + strings.ToLower(rand.Text()[:5])
	if max := 63 - len(suffix); len(vmi) > max {
		vmi = strings.TrimRight(vmi[:max], "-")
	}
	return vmi + suffix
}

// MigrationInFlight reports an instance with a migration handed to the
// nodes (its migration_state names one) that has not ended: the source
// and target nodes are at work on it.
func MigrationInFlight(v *VirtualMachineInstance) bool {
	st := v.GetStatus().GetMigrationState()
	return st.GetMigrationUid() != "" && !st.GetCompleted() && !IsFinal(v.GetStatus().GetPhase())
}
