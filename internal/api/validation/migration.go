package validation

import (
	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// ValidateMigration checks a VirtualMachineInstanceMigration as a user
// creates it: its name and namespace, the instance it names, and the node
// selector it adds (label syntax, as node labels).
func ValidateMigration(m *apiv1.VirtualMachineInstanceMigration) field.ErrorList {
	errs := ValidateObjectMeta(m.GetMetadata(), true, field.NewPath("metadata"))
	spec := field.NewPath("spec")
	if name := m.GetSpec().GetVmiName(); name == "" {
		errs = append(errs, field.Required(spec.Child("vmi_name"), "the instance to migrate"))
	} else {
		errs = append(errs, dns1123Label(name, spec.Child("vmi_name"))...)
	}
	errs = append(errs, validateLabels(m.GetSpec().GetAddedNodeSelector(), spec.Child("added_node_selector"))...)
	return errs
}
