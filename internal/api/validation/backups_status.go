package validation

import (
	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// The statuses of backups and backup restores, as the controllers and
// the nodes write them (UpdateStatus): bounded, and every name and id of
// the form the rest of the system takes them in.

var (
	backupPhases = []string{"", apiv1.BackupPending, apiv1.BackupInProgress, apiv1.BackupSucceeded, apiv1.BackupFailed}
	classKinds   = []string{apiv1.ClassKindLocal, apiv1.ClassKindRBD, apiv1.ClassKindSharedFilesystem}
)

// ValidateBackupStatus checks a backup's status.
func ValidateBackupStatus(st *apiv1.VirtualMachineBackupStatus, path *field.Path) field.ErrorList {
	if st == nil {
		return nil
	}
	errs := oneOf(st.GetPhase(), path.Child("phase"), backupPhases)
	errs = append(errs, oneOf(st.GetUploadPhase(), path.Child("upload_phase"), backupPhases)...)
	errs = append(errs, optionalUID(st.GetManifestId(), path.Child("manifest_id"))...)
	errs = append(errs, optionalUID(st.GetBase(), path.Child("base"))...)
	errs = append(errs, optionalUID(st.GetSourceUid(), path.Child("source_uid"))...)
	errs = append(errs, optionalUID(st.GetBaseContentUid(), path.Child("base_content_uid"))...)
	errs = append(errs, optionalUID(st.GetContentUid(), path.Child("content_uid"))...)
	errs = append(errs, validateVolumeNames(st.GetSnapshotVolumes(), path.Child("snapshot_volumes"))...)
	for _, n := range []struct{ name, v string }{{"base_backup", st.GetBaseBackup()}, {"snapshot_name", st.GetSnapshotName()}} {
		if n.v != "" {
			errs = append(errs, dns1123Label(n.v, path.Child(n.name))...)
		}
	}
	if n := st.GetNodeName(); n != "" {
		errs = append(errs, dns1123Subdomain(n, path.Child("node_name"))...)
	}
	if c := st.GetCluster(); c != "" {
		errs = append(errs, dns1123Subdomain(c, path.Child("cluster"))...)
	}
	for _, m := range []struct{ name, v string }{{"error", st.GetError()}, {"upload_error", st.GetUploadError()}, {"message", st.GetMessage()}} {
		errs = append(errs, validateStatusMessage(m.v, path.Child(m.name))...)
	}
	errs = append(errs, validateConditions(st.GetConditions(), path.Child("conditions"))...)
	errs = append(errs, validateProgress(st.GetProgress(), path.Child("progress"))...)
	return append(errs, validateBackupVolumes(st.GetVolumes(), path.Child("volumes"))...)
}

// ValidateBackupRestoreStatus checks a backup restore's status.
func ValidateBackupRestoreStatus(st *apiv1.VirtualMachineBackupRestoreStatus, path *field.Path) field.ErrorList {
	if st == nil {
		return nil
	}
	errs := oneOf(st.GetPhase(), path.Child("phase"), backupPhases)
	errs = append(errs, oneOf(st.GetWritePhase(), path.Child("write_phase"), backupPhases)...)
	errs = append(errs, optionalUID(st.GetVmUid(), path.Child("vm_uid"))...)
	if n := st.GetNodeName(); n != "" {
		errs = append(errs, dns1123Subdomain(n, path.Child("node_name"))...)
	}
	if n := st.GetSourceVm(); n != "" {
		errs = append(errs, validateStatusMessage(n, path.Child("source_vm"))...)
	}
	for _, m := range []struct{ name, v string }{{"error", st.GetError()}, {"write_error", st.GetWriteError()}, {"message", st.GetMessage()}} {
		errs = append(errs, validateStatusMessage(m.v, path.Child(m.name))...)
	}
	errs = append(errs, validateConditions(st.GetConditions(), path.Child("conditions"))...)
	errs = append(errs, validateProgress(st.GetProgress(), path.Child("progress"))...)
	return append(errs, validateBackupVolumes(st.GetVolumes(), path.Child("volumes"))...)
}

func validateProgress(p *apiv1.BackupProgress, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if p.GetBytesDone() < 0 || p.GetBytesDone() > MaxDevices*MaxBackupVolumeBytes {
		errs = append(errs, field.Invalid(path.Child("bytes_done"), p.GetBytesDone(), "must be between 0 and the volumes' size"))
	}
	if p.GetBytesTotal() < 0 || p.GetBytesTotal() > MaxDevices*MaxBackupVolumeBytes {
		errs = append(errs, field.Invalid(path.Child("bytes_total"), p.GetBytesTotal(), "must be between 0 and the volumes' size"))
	}
	return errs
}

func validateBackupVolumes(vols []*apiv1.BackupVolumeStatus, path *field.Path) field.ErrorList {
	if n := len(vols); n > MaxDevices {
		return field.ErrorList{field.TooMany(path, n, MaxDevices)}
	}
	var errs field.ErrorList
	seen := nameIndex{}
	for i, v := range vols {
		p := path.Index(i)
		if v == nil {
			errs = append(errs, field.Required(p, ""))
			continue
		}
		errs = append(errs, uniqueName(v.GetName(), p.Child("name"), i, seen, true)...)
		if c := v.GetStorageClass(); c != "" {
			errs = append(errs, dns1123Label(c, p.Child("storage_class"))...)
		}
		errs = append(errs, oneOf(v.GetClassKind(), p.Child("class_kind"), classKinds)...)
		for _, n := range []struct {
			name string
			v    int64
		}{
			{"size_bytes", v.GetSizeBytes()}, {"bytes_read", v.GetBytesRead()}, {"bytes_written", v.GetBytesWritten()},
			{"chunks_total", v.GetChunksTotal()}, {"chunks_uploaded", v.GetChunksUploaded()},
		} {
			if n.v < 0 || n.v > MaxBackupVolumeBytes {
				errs = append(errs, field.Invalid(p.Child(n.name), n.v, "must be between 0 and 1 PiB"))
			}
		}
	}
	return errs
}
