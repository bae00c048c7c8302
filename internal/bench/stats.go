package bench

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// Percentile returns the p-th percentile (0 < p ≤ 100) of ds by the
// nearest-rank method: the smallest sample with at least p% of the samples
// at or below it. It is always one of the samples; 0 for no samples.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	return s[min(max(rank, 1), len(s))-1]
}

// Median is the middle sample, or the mean of the two middle ones for an
// even count.
func Median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// MinDuration returns the smallest of ds, 0 for none.
func MinDuration(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	return slices.Min(ds)
}

// MaxDuration returns the largest of ds, 0 for none.
func MaxDuration(ds []time.Duration) time.Duration {
	var m time.Duration
	for _, d := range ds {
		m = max(m, d)
	}
	return m
}

// Secs renders d in seconds with millisecond precision: "1.234 s".
func Secs(d time.Duration) string { return fmt.Sprintf("%.3f s", d.Seconds()) }

// MiB renders a KiB count in MiB with one decimal.
func MiB(kib int64) string { return fmt.Sprintf("%.1f MiB", float64(kib)/1024) }

// Ratio renders a/b as "2.31×", or "n/a" when b is 0.
func Ratio(a, b time.Duration) string {
	if b <= 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f×", float64(a)/float64(b))
}

// Spread renders the samples as "median (min–max), n=…".
func Spread(ds []time.Duration) string {
	if len(ds) == 0 {
		return "no samples"
	}
	return fmt.Sprintf("median %s (min %s, max %s, n=%d)", Secs(Median(ds)), Secs(slices.Min(ds)), Secs(slices.Max(ds)), len(ds))
}
