package apiv1

import "strconv"

// Names of the backup kinds (backups.proto): kinds, finalizers, phases,
// labels and the names the controllers give what they make. One
// definition each; docs/backups.md explains them.
const (
	KindBackupTarget   = "BackupTarget"
	KindBackup         = "VirtualMachineBackup"
	KindBackupSchedule = "VirtualMachineBackupSchedule"
	KindBackupRestore  = "VirtualMachineBackupRestore"

	// FinalizerBackup is the backup controller's on a backup: it waits
	// for the node's upload to stop, deletes the data (DeletionPolicy
	// Delete) and the backup's snapshot first.
	FinalizerBackup = "virtplane.io/backup-protection"
	// FinalizerBackupRestore is the backup restore controller's: a
	// restore that did not succeed deletes the VM it made first, once its
	// node stopped writing.
	FinalizerBackupRestore = "virtplane.io/backup-restore-protection"
	// FinalizerBackupUpload is on a backup while its node may work for it
	// (a raw copy of a volume on its disk, an upload under way); the node
	// removes it once it stopped and cleaned up.
	FinalizerBackupUpload = "virtplane.io/backup-upload"
	// FinalizerBackupRestoreData is on a backup restore while its node
	// may hold staged volumes for it; the node removes it once they are
	// in place or gone.
	FinalizerBackupRestoreData = "virtplane.io/backup-restore-data"

	// LabelBackupSchedule on a backup names the schedule that made it.
	LabelBackupSchedule = "virtplane.io/backup-schedule"
	// LabelBackupTarget on a backup names its target, and LabelBackupVM
	// its VM's uid: the backup controller finds the previous backup of a
	// VM to a target by them.
	LabelBackupTarget = "virtplane.io/backup-target"
	LabelBackupVMUID  = "virtplane.io/backup-vm-uid"
	// AnnotationRestoredFrom on a VM made by a backup restore names the
	// backup: "<target>/<backup id>".
	AnnotationRestoredFrom = "virtplane.io/restored-from-backup"
	// AnnotationAnyNamespaceRestore on a backup restore, set by the
	// server alone and only when a cluster-admin made the restore, lets
	// it restore a backup of another namespace: without it the restore
	// controller restores only backups of the restore's own namespace, so
	// an editor of one namespace cannot read another's VM through its
	// backups.
	AnnotationAnyNamespaceRestore = "virtplane.io/any-namespace-restore"
)

// Deletion policies of a backup are those of a snapshot
// (DeletionPolicyRetain, DeletionPolicyDelete); Retain is the default.

// Phases of a backup, of a backup restore, and of the node's part of
// either (upload_phase, write_phase).
const (
	BackupPending    = "Pending"
	BackupInProgress = "InProgress"
	BackupSucceeded  = "Succeeded"
	BackupFailed     = "Failed"
)

// Class kinds of a backed up volume (BackupVolumeStatus.class_kind and
// the manifest's).
const (
	ClassKindLocal            = "local"
	ClassKindRBD              = "rbd"
	ClassKindSharedFilesystem = "shared_filesystem"
)

// BackupFinal says whether a backup (or backup restore) phase is final.
func BackupFinal(phase string) bool { return phase == BackupSucceeded || phase == BackupFailed }

// BackupSnapshotName is the snapshot a backup takes of its VM.
func BackupSnapshotName(backupUID string) string { return "backup-" + backupUID }

// ScheduledBackupName is the backup a schedule makes for the time
// unixSeconds: the same name for the same time, so a controller that
// retries a create finds the one it made.
func ScheduledBackupName(schedule string, unixSeconds int64) string {
	return schedule + "-" + strconv.FormatInt(unixSeconds, 10)
}

// SelectsNode says whether the target's node selector matches a node's
// labels: every label of the selector, with its value.
func (t *BackupTarget) SelectsNode(labels map[string]string) bool {
	return selectsNode(t.GetSpec().GetNodeSelector(), labels)
}
