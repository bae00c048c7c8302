package apiv1

import "fmt"

// Names of the snapshot kinds (snapshots.proto): owner reference kinds,
// finalizers, phases, indications and the names the controllers give
// what they make. One definition each; docs/snapshots.md explains them.
const (
	KindSnapshot        = "VirtualMachineSnapshot"
	KindSnapshotContent = "VirtualMachineSnapshotContent"
	KindRestore         = "VirtualMachineRestore"
	KindClone           = "VirtualMachineClone"

	// FinalizerSnapshot is the snapshot controller's on a snapshot: it
	// unlocks the VM and deletes the content (DeletionPolicyDelete) first.
	FinalizerSnapshot = "virtplane.io/snapshot-protection"
	// FinalizerSnapshotData is on a content while its node may hold data
	// for it; the node removes it once the data is gone.
	FinalizerSnapshotData = "virtplane.io/snapshot-data"
	// FinalizerRestore is the restore controller's on a restore: it
	// unlocks the target and has the node drop staged copies first.
	FinalizerRestore = "virtplane.io/restore-protection"
	// FinalizerRestoreData is on a restore while its node may hold staged
	// copies for it; the node removes it once they are gone.
	FinalizerRestoreData = "virtplane.io/restore-data"
	// FinalizerClone is the clone controller's: it deletes the snapshot
	// and restore it made first.
	FinalizerClone = "virtplane.io/clone-protection"

	// AnnotationLastRestore on a VM names the last restore that wrote it:
	// "<restore name>-<restore uid>" (KubeVirt's
	// restore.kubevirt.io/lastRestoreUID).
	AnnotationLastRestore = "virtplane.io/last-restore"
	// LabelCloneSource on a snapshot or restore a clone made names the clone.
	LabelCloneSource = "virtplane.io/clone"
)

// Deletion policies of a snapshot.
const (
	DeletionPolicyDelete = "Delete"
	DeletionPolicyRetain = "Retain"
)

// DefaultSnapshotFailureDeadlineSeconds is KubeVirt's 5 minutes.
const DefaultSnapshotFailureDeadlineSeconds = 300

// Phases of a snapshot and of its content.
const (
	SnapshotInProgress = "InProgress"
	SnapshotSucceeded  = "Succeeded"
	SnapshotFailed     = "Failed"
	SnapshotDeleting   = "Deleting"
)

// Indications of an online snapshot.
const (
	IndicationOnline       = "Online"
	IndicationGuestAgent   = "GuestAgent"
	IndicationNoGuestAgent = "NoGuestAgent"
	IndicationPaused       = "Paused"
)

// Phases of a restore.
const (
	RestorePending    = "Pending"
	RestoreStaging    = "Staging"
	RestoreCommitting = "Committing"
	RestoreSucceeded  = "Succeeded"
	RestoreFailed     = "Failed"
)

// Target readiness policies of a restore (KubeVirt's).
const (
	ReadinessWaitGracePeriod = "WaitGracePeriod"
	ReadinessStopTarget      = "StopTarget"
	ReadinessFailImmediate   = "FailImmediate"
	ReadinessWaitEventually  = "WaitEventually"
)

// RestoreGracePeriodSeconds is how long WaitGracePeriod waits for the
// target to stop (KubeVirt's 5 minutes).
const RestoreGracePeriodSeconds = 300

// Phases of a clone.
const (
	CloneSnapshotInProgress = "SnapshotInProgress"
	CloneRestoreInProgress  = "RestoreInProgress"
	CloneSucceeded          = "Succeeded"
	CloneFailed             = "Failed"
)

// Source kinds of a clone.
const (
	CloneSourceVM       = KindVirtualMachine
	CloneSourceSnapshot = KindSnapshot
)

// LockedBy names what holds vm (docs/snapshots.md, "The lock"): `snapshot
// "s"` or `restore "r"`, or "" when nothing does. The VM controller starts
// no instance and the migration controller admits no migration of a
// locked VM; both ask here.
func LockedBy(vm *VirtualMachine) string {
	st := vm.GetStatus()
	switch {
	case st.GetSnapshotInProgress() != "":
		return fmt.Sprintf("snapshot %q", st.GetSnapshotInProgress())
	case st.GetRestoreInProgress() != "":
		return fmt.Sprintf("restore %q", st.GetRestoreInProgress())
	}
	return ""
}

// SnapshotContentName is the content of snapshot uid (KubeVirt's
// vmsnapshot-content-<uid>).
func SnapshotContentName(snapshotUID string) string { return "vmsnapshot-content-" + snapshotUID }

// CloneSnapshotName and CloneRestoreName are what clone uid makes.
func CloneSnapshotName(cloneUID string) string { return "clone-" + cloneUID + "-snapshot" }
func CloneRestoreName(cloneUID string) string  { return "clone-" + cloneUID + "-restore" }

// LastRestoreValue is AnnotationLastRestore's value for a restore.
func LastRestoreValue(name, uid string) string { return name + "-" + uid }

// OnRBD says whether the copy is an RBD snapshot, which lives in the
// Ceph cluster (whatever happens to the nodes) and which the server's
// storage controller restores, not a file a node copies.
func (b *VolumeBackup) OnRBD() bool { return b.GetRbdSnapshot() != "" }

// OnNodeDisk says whether the copy is a file on the disk of its
// content's node (a local volume's), which goes with that node.
func (b *VolumeBackup) OnNodeDisk() bool { return !b.OnRBD() && b.GetStorageClass() == "" }

// OnRBD says whether the volume is restored from an RBD snapshot (by the
// server's storage controller) rather than from a file (by the node).
func (r *VolumeRestore) OnRBD() bool { return r.GetRbdSnapshot() != "" }
