package validation

import (
	"errors"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

const (
	// maxQuantityLen bounds what we hand to resource.ParseQuantity. Real
	// quantities are a dozen characters; the cap keeps big-number arithmetic
	// on hostile input cheap.
	maxQuantityLen = 64
	// maxQuantityExponent bounds the "e<n>" suffix: ParseQuantity("1e-999999999")
	// rescales an inf.Dec by 10^999999999 and effectively never returns,
	// while 10^1000 is still cheap arithmetic.
	maxQuantityExponent = 1000
)

var (
	errQuantityTooLong  = errors.New("quantity is too long")
	errQuantityExponent = errors.New("quantity exponent is out of range")
	errQuantityRange    = errors.New("quantity is out of range")
)

const (
	// Bounds are kept as strings: calling String() on a shared Quantity
	// writes its cache, which would race between concurrent validations.
	minGuestMemory = "16Mi"
	maxGuestMemory = "1Ti"
	// maxDiskSize keeps sizes well inside int64 bytes, which is what node
	// agents convert them to.
	maxDiskSize = "1Ei"
)

// parseQuantity is resource.ParseQuantity behind guards against input that
// would make it (or later comparisons) arbitrarily slow.
func parseQuantity(s string) (resource.Quantity, error) {
	if len(s) > maxQuantityLen {
		return resource.Quantity{}, errQuantityTooLong
	}
	unsigned := strings.TrimLeft(s, "+-")
	suffix := strings.TrimLeft(unsigned, "0123456789.")
	if !strings.ContainsAny(unsigned[:len(unsigned)-len(suffix)], "0123456789") {
		// ParseQuantity reads "Gi", "." or "+" as zero.
		return resource.Quantity{}, resource.ErrFormatWrong
	}
	if len(suffix) > 1 && (suffix[0] == 'e' || suffix[0] == 'E') {
		// Only the exponent form has digits after e/E; "E" and "Ei" are
		// suffixes and fail ParseInt, which is fine.
		if exp, err := strconv.ParseInt(suffix[1:], 10, 64); err == nil &&
			(exp > maxQuantityExponent || exp < -maxQuantityExponent) {
			return resource.Quantity{}, errQuantityExponent
		}
	}
	return resource.ParseQuantity(s)
}

// canonical renders q for storage and comparison, reporting false when no
// rendering parses back (under parseQuantity's guards) to the same value.
func canonical(q *resource.Quantity) (string, bool) {
	if s := render(q); roundTrips(s, q) {
		return s, true
	}
	// Beyond the largest SI suffix (E) resource drops the exponent: 1e21 in
	// DecimalSI renders as "1". Exponent notation has no such gap.
	e := q.DeepCopy()
	e.Format = resource.DecimalExponent
	if s := render(&e); roundTrips(s, q) {
		return s, true
	}
	return "", false
}

// render is q.String() without the string ParseQuantity may have cached:
// that cache keeps inputs such as "+1Gi" or "01Gi" verbatim.
func render(q *resource.Quantity) string {
	number, suffix := q.CanonicalizeBytes(nil)
	return string(number) + string(suffix)
}

func roundTrips(s string, q *resource.Quantity) bool {
	back, err := parseQuantity(s)
	return err == nil && back.Cmp(*q) == 0
}

// CanonicalQuantity returns the canonical form of a quantity string
// ("1024Mi" → "1Gi", "+01Gi" → "1Gi", "0.5Gi" → "512Mi"), the form the
// server stores. Equal canonical forms mean equal values; the converse
// holds within one notation only ("1Gi" and "1073741824" stay distinct, as
// in Kubernetes), so compare values with EqualQuantities.
func CanonicalQuantity(s string) (string, error) {
	q, err := parseQuantity(s)
	if err != nil {
		return "", err
	}
	c, ok := canonical(&q)
	if !ok {
		return "", errQuantityRange
	}
	return c, nil
}

// EqualQuantities reports whether a and b are valid quantities of the same
// value ("1Gi", "1024Mi" and "1073741824" are all equal).
func EqualQuantities(a, b string) bool {
	qa, errA := parseQuantity(a)
	qb, errB := parseQuantity(b)
	return errA == nil && errB == nil && qa.Cmp(qb) == 0
}

// isWholeNumber reports whether q has no fractional part. q must be within
// int64 range (callers check an upper bound first).
func isWholeNumber(q resource.Quantity) bool {
	return q.Cmp(*resource.NewQuantity(q.Value(), resource.BinarySI)) == 0
}

// validateByteQuantity checks s is a quantity of whole bytes in [lo, hi];
// lo == "" means "greater than zero".
func validateByteQuantity(s string, path *field.Path, lo, hi string) field.ErrorList {
	if s == "" {
		return field.ErrorList{field.Required(path, "")}
	}
	q, err := parseQuantity(s)
	if err != nil {
		return field.ErrorList{field.Invalid(path, s, "must be a quantity such as 512Mi or 1Gi")}
	}
	switch {
	case lo == "" && q.Sign() <= 0:
		return field.ErrorList{field.Invalid(path, s, "must be greater than zero")}
	case lo != "" && q.Cmp(resource.MustParse(lo)) < 0:
		return field.ErrorList{field.Invalid(path, s, "must be at least "+lo)}
	case q.Cmp(resource.MustParse(hi)) > 0:
		return field.ErrorList{field.Invalid(path, s, "must be at most "+hi)}
	case !isWholeNumber(q):
		return field.ErrorList{field.Invalid(path, s, "must be a whole number of bytes")}
	}
	return nil
}

func validateGuestMemory(s string, path *field.Path) field.ErrorList {
	return validateByteQuantity(s, path, minGuestMemory, maxGuestMemory)
}

func validateDiskSize(s string, path *field.Path) field.ErrorList {
	return validateByteQuantity(s, path, "", maxDiskSize)
}
