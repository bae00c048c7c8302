package validation

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestValidateLabelSelector(t *testing.T) {
	p := field.NewPath("options", "label_selector")
	expectErrors(t, ValidateLabelSelector("", p))
	expectErrors(t, ValidateLabelSelector("app=web,tier in (a,b),!legacy", p))
	expectErrors(t, ValidateLabelSelector("app in (", p), invalid("options.label_selector"))
	expectErrors(t, ValidateLabelSelector(strings.Repeat("a", 9000), p), tooLong("options.label_selector"))
	var terms []string
	for i := range MaxLabels + 1 {
		terms = append(terms, fmt.Sprintf("l%d=x", i))
	}
	expectErrors(t, ValidateLabelSelector(strings.Join(terms, ","), p), tooMany("options.label_selector"))
}
