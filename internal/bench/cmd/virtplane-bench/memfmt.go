package main

import "fmt"

// Helpers for kB figures: per-process samples of one measurement.

func diff(a, b []int64) []int64 {
	out := make([]int64, len(a))
	for i := range a {
		out[i] = a[i] - b[i]
	}
	return out
}

func mean(v []int64) int64 {
	if len(v) == 0 {
		return 0
	}
	var s int64
	for _, x := range v {
		s += x
	}
	return s / int64(len(v))
}

func maxOf(v []int64) int64 {
	var m int64
	for _, x := range v {
		m = max(m, x)
	}
	return m
}

func mib(kib int64) string { return fmt.Sprintf("%.1f", float64(kib)/1024) }

// spread is "mean [min–max]" in MiB.
func spread(v []int64) string {
	if len(v) == 0 {
		return "-"
	}
	lo, hi := v[0], v[0]
	for _, x := range v {
		lo, hi = min(lo, x), max(hi, x)
	}
	if len(v) == 1 || lo == hi {
		return mib(mean(v))
	}
	return fmt.Sprintf("%s [%s–%s]", mib(mean(v)), mib(lo), mib(hi))
}
