// Package validation defaults and validates virtplane API objects before the
// server stores them, and maps validation errors to gRPC statuses. Error
// paths use the proto field names ("spec.template.spec.domain.memory.guest")
// so they match what users write in JSON, YAML and Terraform.
package validation

import (
	"fmt"

	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// Options carries node- or server-specific context for validation.
type Options struct {
	// ImageDir is the node image directory (e.g. /var/lib/virtplane/images).
	// When set, absolute image paths inside it are accepted; when empty,
	// image paths must be relative.
	ImageDir string
	// HostPolicy, when set, is checked on every instance spec (a VM's,
	// a replica set's or a pool's template): the API server sets the
	// operator's. Clients leave it nil: they do not know the server's.
	HostPolicy *HostPolicy
}

// runStrategyWaitAsReceiver is KubeVirt's strategy for the target side of a
// cross-cluster migration; virtplane has no such migrations.
const runStrategyWaitAsReceiver = "WaitAsReceiver"

// ValidateVirtualMachine checks a VM as submitted on create (after
// DefaultVirtualMachine). Status is server-owned and not checked.
func ValidateVirtualMachine(vm *apiv1.VirtualMachine, opts Options) field.ErrorList {
	errs := ValidateObjectMeta(vm.GetMetadata(), true, field.NewPath("metadata"))
	errs = append(errs, validateVMSpec(vm.GetSpec(), field.NewPath("spec"), opts)...)
	return append(errs, validateVMSize(vm, MaxObjectBytes)...)
}

// MaxObjectBytes bounds the encoded size of a VM as submitted. etcd takes
// a write of at most 1.5 MiB (its --max-request-bytes default), and the
// VM's status and its instance's copy of the template come on top; a write
// over that would fail in the store as an Internal error. The limits of
// the single fields keep every VM below this (TestLargestVMIsStored in
// apiserver proves it for one with every field at its limit), so this is
// the backstop for fields added later.
const MaxObjectBytes = 1 << 20

// validateVMSize reports a VM that encodes to more than limit bytes, at
// its largest part, so that the error names a field a user can shrink.
func validateVMSize(vm *apiv1.VirtualMachine, limit int) field.ErrorList {
	total := proto.Size(vm)
	if total <= limit {
		return nil
	}
	tmpl := vm.GetSpec().GetTemplate()
	spec := field.NewPath("spec")
	tspec := spec.Child("template", "spec")
	type part struct {
		path *field.Path
		size int
	}
	largest := func(parts ...part) part {
		best := parts[0]
		for _, p := range parts[1:] {
			if p.size > best.size {
				best = p
			}
		}
		return best
	}
	best := largest(
		part{field.NewPath("metadata", "labels"), mapSize(vm.GetMetadata().GetLabels())},
		part{field.NewPath("metadata", "annotations"), mapSize(vm.GetMetadata().GetAnnotations())},
		part{spec.Child("template", "metadata", "labels"), mapSize(tmpl.GetMetadata().GetLabels())},
		part{spec.Child("template", "metadata", "annotations"), mapSize(tmpl.GetMetadata().GetAnnotations())},
		part{tspec.Child("volumes"), listSize(tmpl.GetSpec().GetVolumes())},
		part{tspec.Child("networks"), listSize(tmpl.GetSpec().GetNetworks())},
		part{tspec.Child("domain"), proto.Size(tmpl.GetSpec().GetDomain())},
		part{tspec.Child("node_selector"), mapSize(tmpl.GetSpec().GetNodeSelector())},
	)
	if best.size*2 < total {
		// No one field makes it large: name the message that does.
		best = largest(
			part{field.NewPath("metadata"), proto.Size(vm.GetMetadata())},
			part{spec, proto.Size(vm.GetSpec())},
			part{field.NewPath("status"), proto.Size(vm.GetStatus())},
		)
	}
	e := field.TooLong(best.path, "", limit)
	e.Detail = fmt.Sprintf("the object encodes to %d bytes, more than the %d allowed; this is its largest part (%d bytes)", total, limit, best.size)
	return field.ErrorList{e}
}

func mapSize(m map[string]string) int {
	n := 0
	for k, v := range m {
		n += len(k) + len(v)
	}
	return n
}

func listSize[T proto.Message](l []T) int {
	n := 0
	for _, m := range l {
		n += proto.Size(m)
	}
	return n
}

// ValidateVirtualMachineUpdate checks newVM, that identity fields did not
// change from oldVM, and that no persistent volume shrank or changed its
// image (ValidatePersistentVolumeUpdate). A nil oldVM leaves nothing to
// compare against.
func ValidateVirtualMachineUpdate(newVM, oldVM *apiv1.VirtualMachine, opts Options) field.ErrorList {
	errs := append(ValidateVirtualMachine(newVM, opts), ValidateVolumeStorageClassUpdate(newVM.GetSpec().GetTemplate().GetSpec(),
		oldVM.GetSpec().GetTemplate().GetSpec(), field.NewPath("spec", "template", "spec"))...)
	if oldVM == nil {
		return errs
	}
	errs = append(errs, validateIdentityUpdate(newVM.GetMetadata(), oldVM.GetMetadata())...)
	return append(errs, ValidatePersistentVolumeUpdate(newVM.GetSpec().GetTemplate().GetSpec(),
		oldVM.GetSpec().GetTemplate().GetSpec(), field.NewPath("spec", "template", "spec"))...)
}

// validateIdentityUpdate refuses an update that names another object than
// the stored one: namespace, name and uid may not change.
func validateIdentityUpdate(newMeta, oldMeta *apiv1.ObjectMeta) field.ErrorList {
	meta := field.NewPath("metadata")
	var errs field.ErrorList
	errs = append(errs, validateImmutable(newMeta.GetNamespace(), oldMeta.GetNamespace(), meta.Child("namespace"))...)
	errs = append(errs, validateImmutable(newMeta.GetName(), oldMeta.GetName(), meta.Child("name"))...)
	if uidErrs := ValidateUID(newMeta.GetUid(), meta.Child("uid")); len(uidErrs) > 0 {
		return append(errs, uidErrs...)
	}
	return append(errs, validateImmutable(newMeta.GetUid(), oldMeta.GetUid(), meta.Child("uid"))...)
}

func validateVMSpec(spec *apiv1.VirtualMachineSpec, path *field.Path, opts Options) field.ErrorList {
	if spec == nil {
		return field.ErrorList{field.Required(path, "")}
	}
	var errs field.ErrorList
	running, usesRunning := spec.RunningFlag()
	switch rs := spec.GetRunStrategy(); {
	case usesRunning && rs != "":
		errs = append(errs, field.Invalid(path.Child("running"), running, "running and run_strategy are mutually exclusive"))
	case !usesRunning && rs == "":
		errs = append(errs, field.Required(path.Child("run_strategy"), "one of run_strategy or running is required"))
	case rs == runStrategyWaitAsReceiver:
		e := field.NotSupported(path.Child("run_strategy"), rs, apiv1.RunStrategies())
		e.Detail = "WaitAsReceiver (KubeVirt's cross-cluster migration target) is not supported by virtplane; " + e.Detail
		errs = append(errs, e)
	case rs != "":
		errs = append(errs, oneOf(rs, path.Child("run_strategy"), apiv1.RunStrategies())...)
	}
	if p := spec.GetNodeFailurePolicy(); p != "" {
		errs = append(errs, oneOf(p, path.Child("node_failure_policy"), apiv1.NodeFailurePolicies())...)
	}

	tp := path.Child("template")
	tmpl := spec.GetTemplate()
	if tmpl == nil {
		return append(errs, field.Required(tp, ""))
	}
	// Only labels and annotations of the template metadata are used (they
	// go onto the instance); other fields are ignored as in KubeVirt.
	errs = append(errs, validateLabels(tmpl.GetMetadata().GetLabels(), tp.Child("metadata", "labels"))...)
	errs = append(errs, validateAnnotations(tmpl.GetMetadata().GetAnnotations(), tp.Child("metadata", "annotations"))...)
	return append(errs, ValidateVirtualMachineInstanceSpec(tmpl.GetSpec(), tp.Child("spec"), opts)...)
}
