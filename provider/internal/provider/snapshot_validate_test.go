package provider

import (
	"strings"
	"testing"
)

func TestFailureDeadline(t *testing.T) {
	for _, c := range []struct {
		in   string
		secs int64
		err  string
	}{
		{"5m", 300, ""}, {"300s", 300, ""}, {"0s", 0, ""}, {"0", 0, ""}, {"1h30m", 5400, ""}, {"168h", 604800, ""},
		{"-1s", 0, "negative"}, {"1500ms", 0, "whole seconds"}, {"169h", 0, "at most 168h"}, {"5 minutes", 0, "not a Go duration"},
	} {
		secs, err := parseDeadline(c.in)
		switch {
		case c.err == "" && (err != nil || secs != c.secs):
			t.Errorf("parseDeadline(%q) = %d, %v; want %d", c.in, secs, err, c.secs)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("parseDeadline(%q) error %v, want one saying %q", c.in, err, c.err)
		}
		if ok, _ := validString(failureDeadlineValidator(), c.in); ok != (c.err == "") {
			t.Errorf("validator accepts %q: %v", c.in, ok)
		}
	}
	for secs, want := range map[int64]string{300: "5m", 0: "0s", 90: "1m30s", 3600: "1h", 5400: "1h30m", 3601: "1h0m1s"} {
		if got := formatDeadline(secs); got != want {
			t.Errorf("formatDeadline(%d) = %q, want %q", secs, got, want)
		}
		if back, err := parseDeadline(formatDeadline(secs)); err != nil || back != secs {
			t.Errorf("formatDeadline(%d) does not parse back: %d, %v", secs, back, err)
		}
	}
	if !sameDeadline("5m", "300s") || sameDeadline("5m", "6m") || sameDeadline("x", "x") {
		t.Error("sameDeadline compares durations, and nothing invalid")
	}
}
