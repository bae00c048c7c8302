package validation

import (
	"strings"
	"testing"
	"time"
)

func TestCanonicalQuantity(t *testing.T) {
	cases := []struct{ in, want string }{
		{"1024Mi", "1Gi"},
		{"1Gi", "1Gi"},
		{"1.5Gi", "1536Mi"},
		{"0.5Gi", "512Mi"},
		{"+1Gi", "1Gi"},
		{"01Gi", "1Gi"},
		{"5.Gi", "5Gi"},
		{"1000M", "1G"},
		{"1073741824", "1073741824"},
		{"1e9", "1e9"},
		{"10240Mi", "10Gi"},
		{"0", "0"},
		{"-1Gi", "-1Gi"},
		{"100m", "100m"},
		{"1000000000000000000000", "1e21"}, // past the E suffix
		{"1000E", "1e21"},
		{"1e-30", "1e-9"},    // rounded up to the nano resolution
		{"1e1000", "10e999"}, // exponents in multiples of 3
	}
	for _, tc := range cases {
		got, err := CanonicalQuantity(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("CanonicalQuantity(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			continue
		}
		if again, _ := CanonicalQuantity(got); again != got {
			t.Errorf("CanonicalQuantity(%q) = %q, not a fixed point", got, again)
		}
	}
	// The largest inputs the guards let through stay cheap.
	for _, in := range []string{"9." + strings.Repeat("9", 56) + "e1000", "0." + strings.Repeat("0", 56) + "1e-1000",
		strings.Repeat("9", 59) + "e-1000", "1." + strings.Repeat("1", 58) + "Ei"} {
		start := time.Now()
		_, _ = CanonicalQuantity(in)
		_ = validateGuestMemory(in, nil)
		_ = validateDiskSize(in, nil)
		if d := time.Since(start); d > 100*time.Millisecond {
			t.Errorf("%q took %v", in, d)
		}
	}
	for _, in := range []string{"", "1GB", " 1Gi", "1 Gi", "Gi", "1e-999999999", "1e999999999", "1e1001", "1e-1001", ".", "+", "-", "+Gi", ".Mi", "e5", "--1", "+-1",
		"0000000000000000000000000000000000000000000000000000000000000001Gi"} {
		start := time.Now()
		if got, err := CanonicalQuantity(in); err == nil {
			t.Errorf("CanonicalQuantity(%q) = %q, want error", in, got)
		}
		if d := time.Since(start); d > 100*time.Millisecond {
			t.Errorf("CanonicalQuantity(%q) took %v", in, d)
		}
	}
}

func TestEqualQuantities(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"1Gi", "1024Mi", true},
		{"1Gi", "1073741824", true},
		{"1G", "1e9", true},
		{"+01.5Gi", "1536Mi", true},
		{"1Gi", "1G", false},
		{"1Gi", "1GB", false},
		{"", "", false},
	} {
		if got := EqualQuantities(tc.a, tc.b); got != tc.want {
			t.Errorf("EqualQuantities(%q, %q) = %v", tc.a, tc.b, got)
		}
	}
}

// FuzzCanonicalQuantity: canonical forms are fixed points and denote the
// same value, so the provider can compare canonical strings.
func FuzzCanonicalQuantity(f *testing.F) {
	for _, s := range []string{"1024Mi", "1.5Gi", "+01Gi", "1e9", "100m", "0.1Ki", "-5.Gi", "1e-30", "9Ei"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := CanonicalQuantity(s)
		if err != nil {
			return
		}
		again, err := CanonicalQuantity(c)
		if err != nil || again != c {
			t.Fatalf("%q → %q → %q (%v)", s, c, again, err)
		}
		q1, _ := parseQuantity(s)
		q2, _ := parseQuantity(c)
		if q1.Cmp(q2) != 0 {
			t.Fatalf("%q and its canonical form %q differ in value", s, c)
		}
	})
}
