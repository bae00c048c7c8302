package validation

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// The snapshot kinds as users submit them (snapshots.proto): snapshots,
// restores and clones. Their specs are immutable (there is no Update), so
// each is checked once, on create. Every name in a spec is an object of
// the same namespace and so a DNS-1123 label, as metadata.name is.

// MaxSnapshotFailureDeadlineSeconds bounds failure_deadline_seconds: a
// snapshot holds its VM locked (no start, no stop) until it ends, and a
// week is far past any copy of a node's disks; 0 (never) stays allowed
// for who wants no deadline at all.
const MaxSnapshotFailureDeadlineSeconds = 7 * 24 * 3600

// DefaultSnapshot fills what a user may leave out: the namespace and
// deletion_policy Delete. failure_deadline_seconds stays unset: the
// controller reads unset as apiv1.DefaultSnapshotFailureDeadlineSeconds,
// and 0 means no deadline, so the two must stay apart.
func DefaultSnapshot(s *apiv1.VirtualMachineSnapshot) {
	if s == nil {
		return
	}
	DiscardUnknown(s)
	s.Metadata = defaultMetadata(s.Metadata)
	if s.Spec == nil {
		s.Spec = &apiv1.VirtualMachineSnapshotSpec{}
	}
	if s.Spec.DeletionPolicy == "" {
		s.Spec.DeletionPolicy = apiv1.DeletionPolicyDelete
	}
}

// ValidateSnapshot checks a snapshot as submitted (after DefaultSnapshot).
// Status is server-owned and not checked.
func ValidateSnapshot(s *apiv1.VirtualMachineSnapshot) field.ErrorList {
	errs := ValidateObjectMeta(s.GetMetadata(), true, field.NewPath("metadata"))
	spec := field.NewPath("spec")
	sp := s.GetSpec()
	if sp == nil {
		return append(errs, field.Required(spec, ""))
	}
	errs = append(errs, requiredName(sp.GetSource(), spec.Child("source"), "the VM to snapshot, in the snapshot's namespace")...)
	if p := sp.GetDeletionPolicy(); p != "" {
		errs = append(errs, oneOf(p, spec.Child("deletion_policy"), []string{apiv1.DeletionPolicyDelete, apiv1.DeletionPolicyRetain})...)
	}
	if sp.FailureDeadlineSeconds != nil {
		if d := *sp.FailureDeadlineSeconds; d < 0 || d > MaxSnapshotFailureDeadlineSeconds {
			errs = append(errs, field.Invalid(spec.Child("failure_deadline_seconds"), d,
				fmt.Sprintf("must be between 0 (no deadline) and %d (7 days)", MaxSnapshotFailureDeadlineSeconds)))
		}
	}
	return append(errs, validateReplicaSize(s)...)
}

// readinessPolicies are a restore's target_readiness_policy values.
var readinessPolicies = []string{
	apiv1.ReadinessWaitGracePeriod, apiv1.ReadinessStopTarget, apiv1.ReadinessFailImmediate, apiv1.ReadinessWaitEventually,
}

// DefaultRestore fills the namespace and KubeVirt's default readiness
// policy, WaitGracePeriod.
func DefaultRestore(r *apiv1.VirtualMachineRestore) {
	if r == nil {
		return
	}
	DiscardUnknown(r)
	r.Metadata = defaultMetadata(r.Metadata)
	if r.Spec == nil {
		r.Spec = &apiv1.VirtualMachineRestoreSpec{}
	}
	if r.Spec.TargetReadinessPolicy == "" {
		r.Spec.TargetReadinessPolicy = apiv1.ReadinessWaitGracePeriod
	}
}

// ValidateRestore checks a restore as submitted (after DefaultRestore).
func ValidateRestore(r *apiv1.VirtualMachineRestore) field.ErrorList {
	errs := ValidateObjectMeta(r.GetMetadata(), true, field.NewPath("metadata"))
	spec := field.NewPath("spec")
	sp := r.GetSpec()
	if sp == nil {
		return append(errs, field.Required(spec, ""))
	}
	errs = append(errs, requiredName(sp.GetTarget(), spec.Child("target"), "the VM to restore into, in the restore's namespace")...)
	errs = append(errs, requiredName(sp.GetSnapshot(), spec.Child("snapshot"), "the snapshot to restore, in the restore's namespace")...)
	if p := sp.GetTargetReadinessPolicy(); p != "" {
		errs = append(errs, oneOf(p, spec.Child("target_readiness_policy"), readinessPolicies)...)
	}
	macPath := spec.Child("mac_addresses")
	if len(sp.GetMacAddresses()) > 0 && !sp.GetNewIdentity() {
		// Without a new identity the target keeps the snapshot's MAC
		// addresses (it is the snapshot's VM, or stands in for it).
		errs = append(errs, field.Forbidden(macPath, "only with new_identity: a restore without it keeps the snapshot's MAC addresses"))
	} else {
		errs = append(errs, validateMACMap(sp.GetMacAddresses(), macPath)...)
	}
	errs = append(errs, validateLabels(sp.GetLabels(), spec.Child("labels"))...)
	errs = append(errs, validateAnnotations(sp.GetAnnotations(), spec.Child("annotations"))...)
	return append(errs, validateReplicaSize(r)...)
}

// cloneSourceKinds are a clone's source_kind values.
var cloneSourceKinds = []string{apiv1.CloneSourceVM, apiv1.CloneSourceSnapshot}

// DefaultClone fills the namespace and source_kind VirtualMachine.
func DefaultClone(c *apiv1.VirtualMachineClone) {
	if c == nil {
		return
	}
	DiscardUnknown(c)
	c.Metadata = defaultMetadata(c.Metadata)
	if c.Spec == nil {
		c.Spec = &apiv1.VirtualMachineCloneSpec{}
	}
	if c.Spec.SourceKind == "" {
		c.Spec.SourceKind = apiv1.CloneSourceVM
	}
}

// ValidateClone checks a clone as submitted (after DefaultClone).
func ValidateClone(c *apiv1.VirtualMachineClone) field.ErrorList {
	errs := ValidateObjectMeta(c.GetMetadata(), true, field.NewPath("metadata"))
	spec := field.NewPath("spec")
	sp := c.GetSpec()
	if sp == nil {
		return append(errs, field.Required(spec, ""))
	}
	kind := sp.GetSourceKind()
	if kind != "" {
		errs = append(errs, oneOf(kind, spec.Child("source_kind"), cloneSourceKinds)...)
	}
	errs = append(errs, requiredName(sp.GetSourceName(), spec.Child("source_name"), "the VM or snapshot to clone, in the clone's namespace")...)
	targetErrs := requiredName(sp.GetTarget(), spec.Child("target"), "the new VM's name")
	errs = append(errs, targetErrs...)
	if len(targetErrs) == 0 && (kind == "" || kind == apiv1.CloneSourceVM) && sp.GetTarget() == sp.GetSourceName() {
		errs = append(errs, field.Invalid(spec.Child("target"), sp.GetTarget(), "must differ from source_name: a clone makes a new VM beside its source"))
	}
	errs = append(errs, validateMACMap(sp.GetNewMacAddresses(), spec.Child("new_mac_addresses"))...)
	errs = append(errs, validateLabels(sp.GetLabels(), spec.Child("labels"))...)
	errs = append(errs, validateAnnotations(sp.GetAnnotations(), spec.Child("annotations"))...)
	return append(errs, validateReplicaSize(c)...)
}

// requiredName checks a name a spec refers to another object by: set, and
// a DNS-1123 label as every namespaced object's name is.
func requiredName(name string, path *field.Path, what string) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(path, what)}
	}
	return dns1123Label(name, path)
}

// validateMACMap checks interface name → MAC address: names as interface
// names are (they name their network, a DNS-1123 label), addresses as a
// VM's interfaces' are, no address twice, at most MaxDevices entries (a
// VM has no more interfaces than that).
func validateMACMap(m map[string]string, path *field.Path) field.ErrorList {
	if len(m) > MaxDevices {
		return field.ErrorList{field.TooMany(path, len(m), MaxDevices)}
	}
	var errs field.ErrorList
	seen := map[string]bool{}
	for _, name := range sortedKeys(m) {
		errs = append(errs, dns1123Label(name, path)...)
		errs = append(errs, validateMAC(m[name], path.Key(name), seen)...)
	}
	return errs
}
