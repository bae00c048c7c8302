package validation

import (
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/validate/content"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

const (
	// MaxAnnotationBytes bounds the total size of an object's
	// annotations, as in Kubernetes: annotations are for tools, not bulk
	// data, and every write carries them.
	MaxAnnotationBytes = 256 * 1024
	// MaxLabels bounds the labels of an object (and a node selector).
	// Each label is bounded by its syntax (a 316-byte key, a 63-byte
	// value); the count bounds what every selector match and every
	// stored copy costs. Kubernetes objects rarely carry more than a
	// few dozen.
	MaxLabels = 64
	// MaxAnnotations bounds the number of annotations; their total size
	// is bounded by MaxAnnotationBytes.
	MaxAnnotations = 256
)

// ValidateObjectMeta checks the user-settable parts of metadata. Namespaced
// objects (VMs, instances) need a namespace and a DNS-1123 label name, since
// the name becomes a hostname and libvirt domain name; cluster-scoped
// objects (nodes) must have no namespace and may use a DNS-1123 subdomain
// (an FQDN). Server-managed fields (uid, versions, timestamps) are not
// checked here.
func ValidateObjectMeta(meta *apiv1.ObjectMeta, namespaced bool, path *field.Path) field.ErrorList {
	if meta == nil {
		return field.ErrorList{field.Required(path, "")}
	}
	var errs field.ErrorList
	namePath := path.Child("name")
	switch {
	case meta.GetName() == "":
		errs = append(errs, field.Required(namePath, ""))
	case namespaced:
		errs = append(errs, dns1123Label(meta.GetName(), namePath)...)
	default:
		errs = append(errs, dns1123Subdomain(meta.GetName(), namePath)...)
	}
	nsPath := path.Child("namespace")
	switch {
	case namespaced && meta.GetNamespace() == "":
		errs = append(errs, field.Required(nsPath, ""))
	case namespaced:
		errs = append(errs, dns1123Label(meta.GetNamespace(), nsPath)...)
	case meta.GetNamespace() != "":
		errs = append(errs, field.Forbidden(nsPath, "not allowed on cluster-scoped objects"))
	}
	errs = append(errs, validateLabels(meta.GetLabels(), path.Child("labels"))...)
	errs = append(errs, validateAnnotations(meta.GetAnnotations(), path.Child("annotations"))...)
	return errs
}

func dns1123Label(s string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range utilvalidation.IsDNS1123Label(s) {
		errs = append(errs, field.Invalid(path, s, msg))
	}
	return errs
}

func dns1123Subdomain(s string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range utilvalidation.IsDNS1123Subdomain(s) {
		errs = append(errs, field.Invalid(path, s, msg))
	}
	return errs
}

// validateLabels checks label (and node selector) syntax. content.* are what
// util/validation.IsQualifiedName and IsValidLabelValue alias (deprecated
// there).
func validateLabels(labels map[string]string, path *field.Path) field.ErrorList {
	if len(labels) > MaxLabels {
		return field.ErrorList{field.TooMany(path, len(labels), MaxLabels)}
	}
	var errs field.ErrorList
	for _, k := range sortedKeys(labels) {
		for _, msg := range content.IsLabelKey(k) {
			errs = append(errs, field.Invalid(path, k, msg))
		}
		for _, msg := range content.IsLabelValue(labels[k]) {
			errs = append(errs, field.Invalid(path.Key(k), labels[k], msg))
		}
	}
	return errs
}

func validateAnnotations(annotations map[string]string, path *field.Path) field.ErrorList {
	if len(annotations) > MaxAnnotations {
		return field.ErrorList{field.TooMany(path, len(annotations), MaxAnnotations)}
	}
	var errs field.ErrorList
	total := 0
	for _, k := range sortedKeys(annotations) {
		// As in Kubernetes, annotation keys are qualified names ignoring case.
		for _, msg := range content.IsLabelKey(strings.ToLower(k)) {
			errs = append(errs, field.Invalid(path, k, msg))
		}
		total += len(k) + len(annotations[k])
	}
	if total > MaxAnnotationBytes {
		errs = append(errs, field.TooLong(path, "", MaxAnnotationBytes))
	}
	return errs
}

// sortedKeys makes errors about maps come out in a stable order.
func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// validateImmutable reports a change of a field that may not change.
func validateImmutable(newVal, oldVal string, path *field.Path) field.ErrorList {
	if newVal == oldVal {
		return nil
	}
	return field.ErrorList{field.Invalid(path, newVal, "field is immutable")}
}
