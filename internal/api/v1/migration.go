package apiv1

import (
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
	LabelMigrationVMIName   = "virtplane.io/vmi-name"
	FinalizerMigration      = "virtplane.io/migration"
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
