package provider

import (
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
)

// Configuration checks of virtplane_virtual_machine_snapshot: the
// failure_deadline's spellings.

// maxFailureDeadline is the longest failure_deadline the API takes.
const maxFailureDeadline = 7 * 24 * time.Hour

// failureDeadlineValidator accepts a duration of whole seconds from 0 to
// maxFailureDeadline.
func failureDeadlineValidator() validator.String {
	return stringCheck{
		describedAs: describedAs("a Go duration of whole seconds, from 0s to 168h"),
		check: func(p path.Path, s string, diags *diag.Diagnostics) {
			if _, err := parseDeadline(s); err != nil {
				diags.AddAttributeError(p, "Invalid failure_deadline", fmt.Sprintf("%s %s.", p, err))
			}
		},
	}
}

// parseDeadline turns failure_deadline into seconds.
func parseDeadline(s string) (int64, error) {
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		return 0, fmt.Errorf("is not a Go duration (90s, 5m, 1h): %q", s)
	case d < 0:
		return 0, fmt.Errorf("must not be negative, got %s", s)
	case d%time.Second != 0:
		return 0, fmt.Errorf("must be whole seconds, got %s", s)
	case d > maxFailureDeadline:
		return 0, fmt.Errorf("must be at most 168h (7 days), got %s", s)
	}
	return int64(d / time.Second), nil
}

// sameDeadline reports whether two spellings of failure_deadline mean the
// same time.
func sameDeadline(a, b string) bool {
	x, err1 := parseDeadline(a)
	y, err2 := parseDeadline(b)
	return err1 == nil && err2 == nil && x == y
}
