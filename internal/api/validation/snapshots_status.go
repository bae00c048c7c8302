package validation

import (
	"path/filepath"
	"regexp"

	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// The statuses of the snapshot kinds, as controllers and node agents write
// them through UpdateStatus: known phases and indications, bounded lists
// and strings, uids and names in their forms. Like
// ValidateVirtualMachineInstanceStatus they do not judge transitions, and
// callers drop unknown fields first (DiscardUnknown).

// maxNodePathLen bounds a path a node reports (a copy of a volume): Linux'
// PATH_MAX.
const maxNodePathLen = 4096

var (
	snapshotPhases = []string{"", apiv1.SnapshotInProgress, apiv1.SnapshotSucceeded, apiv1.SnapshotFailed, apiv1.SnapshotDeleting}
	contentPhases  = []string{"", apiv1.SnapshotInProgress, apiv1.SnapshotSucceeded, apiv1.SnapshotFailed}
	restorePhases  = []string{"", apiv1.RestorePending, apiv1.RestoreStaging, apiv1.RestoreCommitting, apiv1.RestoreSucceeded, apiv1.RestoreFailed}
	clonePhases    = []string{"", apiv1.CloneSnapshotInProgress, apiv1.CloneRestoreInProgress, apiv1.CloneSucceeded, apiv1.CloneFailed}
	indications    = []string{apiv1.IndicationOnline, apiv1.IndicationGuestAgent, apiv1.IndicationNoGuestAgent, apiv1.IndicationPaused}
)

// ValidateSnapshotStatus checks a snapshot's status.
func ValidateSnapshotStatus(st *apiv1.VirtualMachineSnapshotStatus, path *field.Path) field.ErrorList {
	if st == nil {
		return nil
	}
	errs := oneOf(st.GetPhase(), path.Child("phase"), snapshotPhases)
	errs = append(errs, validateStatusMessage(st.GetError(), path.Child("error"))...)
	errs = append(errs, validateIndications(st.GetIndications(), path.Child("indications"))...)
	errs = append(errs, optionalUID(st.GetSourceUid(), path.Child("source_uid"))...)
	if n := st.GetContentName(); n != "" {
		errs = append(errs, dns1123Label(n, path.Child("content_name"))...)
	}
	errs = append(errs, validateConditions(st.GetConditions(), path.Child("conditions"))...)
	errs = append(errs, validateVolumeNames(st.GetIncludedVolumes(), path.Child("included_volumes"))...)
	errs = append(errs, validateVolumeNames(st.GetExcludedVolumes(), path.Child("excluded_volumes"))...)
	if n := st.GetNodeName(); n != "" {
		errs = append(errs, dns1123Subdomain(n, path.Child("node_name"))...)
	}
	return errs
}

// ValidateSnapshotContentStatus checks a content's status, which its node
// writes. The paths of the copies must be absolute and clean; that they
// lie in the node's snapshot directory is for the node to check when it
// reads them back (it alone knows its data directory).
func ValidateSnapshotContentStatus(st *apiv1.VirtualMachineSnapshotContentStatus, path *field.Path) field.ErrorList {
	if st == nil {
		return nil
	}
	errs := oneOf(st.GetPhase(), path.Child("phase"), contentPhases)
	errs = append(errs, validateStatusMessage(st.GetError(), path.Child("error"))...)
	errs = append(errs, validateStatusMessage(st.GetMessage(), path.Child("message"))...)
	errs = append(errs, validateIndications(st.GetIndications(), path.Child("indications"))...)
	bp := path.Child("volume_backups")
	if n := len(st.GetVolumeBackups()); n > MaxDevices {
		return append(errs, field.TooMany(bp, n, MaxDevices))
	}
	seen := nameIndex{}
	for i, b := range st.GetVolumeBackups() {
		p := bp.Index(i)
		if b == nil {
			errs = append(errs, field.Required(p, ""))
			continue
		}
		errs = append(errs, uniqueName(b.GetVolumeName(), p.Child("volume_name"), i, seen, true)...)
		errs = append(errs, validateCopyLocation(b.GetPath(), b.GetStorageClass(), b.GetRbdSnapshot(), p, "path")...)
		if b.GetSizeBytes() < 0 {
			errs = append(errs, field.Invalid(p.Child("size_bytes"), b.GetSizeBytes(), "must not be negative"))
		}
		if b.GetVirtualSizeBytes() < 0 {
			errs = append(errs, field.Invalid(p.Child("virtual_size_bytes"), b.GetVirtualSizeBytes(), "must not be negative"))
		}
	}
	return errs
}

// ValidateRestoreStatus checks a restore's status.
func ValidateRestoreStatus(st *apiv1.VirtualMachineRestoreStatus, path *field.Path) field.ErrorList {
	if st == nil {
		return nil
	}
	errs := oneOf(st.GetPhase(), path.Child("phase"), restorePhases)
	errs = append(errs, validateStatusMessage(st.GetError(), path.Child("error"))...)
	errs = append(errs, validateStatusMessage(st.GetMessage(), path.Child("message"))...)
	errs = append(errs, optionalUID(st.GetTargetUid(), path.Child("target_uid"))...)
	if n := st.GetNodeName(); n != "" {
		errs = append(errs, dns1123Subdomain(n, path.Child("node_name"))...)
	}
	errs = append(errs, validateConditions(st.GetConditions(), path.Child("conditions"))...)
	rp := path.Child("restores")
	if n := len(st.GetRestores()); n > MaxDevices {
		return append(errs, field.TooMany(rp, n, MaxDevices))
	}
	seen := nameIndex{}
	for i, r := range st.GetRestores() {
		p := rp.Index(i)
		if r == nil {
			errs = append(errs, field.Required(p, ""))
			continue
		}
		errs = append(errs, uniqueName(r.GetVolumeName(), p.Child("volume_name"), i, seen, true)...)
		errs = append(errs, validateCopyLocation(r.GetSourcePath(), r.GetStorageClass(), r.GetRbdSnapshot(), p, "source_path")...)
	}
	return errs
}

// ValidateCloneStatus checks a clone's status.
func ValidateCloneStatus(st *apiv1.VirtualMachineCloneStatus, path *field.Path) field.ErrorList {
	if st == nil {
		return nil
	}
	errs := oneOf(st.GetPhase(), path.Child("phase"), clonePhases)
	for _, n := range []struct{ name, v string }{{"snapshot_name", st.GetSnapshotName()}, {"restore_name", st.GetRestoreName()}} {
		if n.v != "" {
			errs = append(errs, dns1123Label(n.v, path.Child(n.name))...)
		}
	}
	errs = append(errs, optionalUID(st.GetTargetUid(), path.Child("target_uid"))...)
	errs = append(errs, validateStatusMessage(st.GetError(), path.Child("error"))...)
	return append(errs, validateConditions(st.GetConditions(), path.Child("conditions"))...)
}

func validateIndications(ind []string, path *field.Path) field.ErrorList {
	if n := len(ind); n > len(indications) {
		return field.ErrorList{field.TooMany(path, n, len(indications))}
	}
	var errs field.ErrorList
	for i, v := range ind {
		errs = append(errs, oneOf(v, path.Index(i), indications)...)
	}
	return errs
}

// validateVolumeNames checks a list of volume names: at most MaxDevices,
// each a DNS-1123 label as a VM's volume names are.
func validateVolumeNames(names []string, path *field.Path) field.ErrorList {
	if n := len(names); n > MaxDevices {
		return field.ErrorList{field.TooMany(path, n, MaxDevices)}
	}
	var errs field.ErrorList
	for i, n := range names {
		errs = append(errs, dns1123Label(n, path.Index(i))...)
	}
	return errs
}

func optionalUID(uid string, path *field.Path) field.ErrorList {
	if uid == "" {
		return nil
	}
	return ValidateUID(uid, path)
}

// rbdSnapshotRegexp is pool/image@snap with the names' characters (the
// pool's as validateRBD allows them).
var rbdSnapshotRegexp = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}/[A-Za-z0-9][A-Za-z0-9_.-]{0,199}@[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$`)

// validateCopyLocation checks where a volume's copy is: a file (pathField,
// for a local volume or one on a shared filesystem class) or an RBD
// snapshot (rbd_snapshot, on an rbd class), never both.
func validateCopyLocation(p, class, rbdSnap string, path *field.Path, pathField string) field.ErrorList {
	var errs field.ErrorList
	if class != "" {
		errs = append(errs, dns1123Label(class, path.Child("storage_class"))...)
		if class == StorageClassLocal {
			errs = append(errs, field.Invalid(path.Child("storage_class"), class, "the local class is named by an empty storage_class"))
		}
	}
	if rbdSnap == "" {
		return append(errs, validateNodePath(p, path.Child(pathField))...)
	}
	switch {
	case class == "":
		errs = append(errs, field.Required(path.Child("storage_class"), "an RBD snapshot is on an rbd storage class"))
	case p != "":
		errs = append(errs, field.Invalid(path.Child(pathField), p, "must be empty for an RBD snapshot"))
	}
	if !rbdSnapshotRegexp.MatchString(rbdSnap) {
		errs = append(errs, field.Invalid(path.Child("rbd_snapshot"), rbdSnap, "must be pool/image@snapshot"))
	}
	return errs
}

// validateNodePath checks a file path a node reports: absolute, clean (a
// clean absolute path has no ".." and no "//"), printable and at most maxNodePathLen bytes.
func validateNodePath(p string, path *field.Path) field.ErrorList {
	if p == "" {
		return field.ErrorList{field.Required(path, "")}
	}
	if errs := validatePrintable(p, maxNodePathLen, path, true); len(errs) > 0 {
		return errs
	}
	if !filepath.IsAbs(p) || filepath.Clean(p) != p {
		return field.ErrorList{field.Invalid(path, p, "must be an absolute, clean path on the node")}
	}
	return nil
}
