package validation

import (
	"k8s.io/apimachinery/pkg/api/validate/content"
	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// ValidateNode checks a node as registered by its agent: the name (a
// DNS-1123 subdomain, since it is usually the hostname) and that the
// resource figures the scheduler will parse are quantities, and its image
// list.
func ValidateNode(node *apiv1.Node) field.ErrorList {
	errs := ValidateObjectMeta(node.GetMetadata(), false, field.NewPath("metadata"))
	status := field.NewPath("status")
	errs = append(errs, validateResourceList(node.GetStatus().GetCapacity(), status.Child("capacity"))...)
	errs = append(errs, validateResourceList(node.GetStatus().GetAllocatable(), status.Child("allocatable"))...)
	errs = append(errs, ValidateNodeImages(node.GetStatus().GetImages(), status.Child("images"))...)
	return errs
}

func validateResourceList(list map[string]string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, k := range sortedKeys(list) {
		// Resource names follow label key syntax ("cpu", "example.com/gpu").
		for _, msg := range content.IsLabelKey(k) {
			errs = append(errs, field.Invalid(path, k, msg))
		}
		p := path.Key(k)
		v := list[k]
		q, err := parseQuantity(v)
		switch {
		case err != nil:
			errs = append(errs, field.Invalid(p, v, "must be a quantity such as 4, 500m or 16Gi"))
		case q.Sign() < 0:
			errs = append(errs, field.Invalid(p, v, "must not be negative"))
		}
	}
	return errs
}
