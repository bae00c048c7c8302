package validation

import (
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// maxLabelSelectorLen bounds a label selector a list or watch sends: one
// term per label an object may carry (MaxLabels) with key and values
// fits in far less; the selector is matched against every object listed
// and every event watched.
const maxLabelSelectorLen = 8 * 1024

// ValidateLabelSelector checks a label selector of a list or watch
// request: at most 8 KiB, parsable, at most MaxLabels terms.
func ValidateLabelSelector(s string, path *field.Path) field.ErrorList {
	if len(s) > maxLabelSelectorLen {
		return field.ErrorList{field.TooLong(path, "", maxLabelSelectorLen)}
	}
	sel, err := labels.Parse(s)
	if err != nil {
		return field.ErrorList{field.Invalid(path, s, err.Error())}
	}
	if reqs, _ := sel.Requirements(); len(reqs) > MaxLabels {
		return field.ErrorList{field.TooMany(path, len(reqs), MaxLabels)}
	}
	return nil
}
