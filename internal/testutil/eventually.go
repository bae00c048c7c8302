// Package testutil holds the helpers tests of every package share.
package testutil

import (
	"context"
	"errors"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// PollInterval is how often Eventually checks its condition: short enough
// that a test ends soon after the condition holds, long enough not to load
// what it waits on.
const PollInterval = 20 * time.Millisecond

// Eventually waits until cond returns true, checking at once and then every
// PollInterval, and fails the test naming what it waited for when timeout
// passes first or the test's context ends. Choose timeout for the slowest
// machine the suite runs on (a loaded two-core CI host under -race): it
// bounds a failing test, never a passing one.
func Eventually(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	EventuallyNoError(tb, timeout, what, func() error {
		if cond() {
			return nil
		}
		return errNotYet
	})
}

var errNotYet = errors.New("condition not met")

// EventuallyNoError is Eventually for a check that says why it does not
// hold yet: it waits until check returns nil, and the failure message
// quotes the last error.
func EventuallyNoError(tb testing.TB, timeout time.Duration, what string, check func() error) {
	tb.Helper()
	var last error
	start := time.Now()
	err := wait.PollUntilContextTimeout(tb.Context(), PollInterval, timeout, true, func(context.Context) (bool, error) {
		last = check()
		return last == nil, nil
	})
	if err == nil {
		return
	}
	if last == nil || errors.Is(last, errNotYet) {
		tb.Fatalf("timed out after %v waiting for %s", time.Since(start).Round(time.Millisecond), what)
		return
	}
	tb.Fatalf("timed out after %v waiting for %s: %v", time.Since(start).Round(time.Millisecond), what, last)
}

// Consistently checks that cond holds at once and every PollInterval for
// d, and fails the test naming what broke as soon as it does not. It is
// for what must not happen (a VM that must not restart by itself): it
// asserts over a window that starts only after the test has seen the
// system settle (with Eventually), so it can miss a late bug but never
// fails a correct system.
func Consistently(tb testing.TB, d time.Duration, what string, cond func() bool) {
	tb.Helper()
	err := wait.PollUntilContextTimeout(tb.Context(), PollInterval, d, true, func(context.Context) (bool, error) {
		if !cond() {
			return false, errBroken
		}
		return false, nil
	})
	if errors.Is(err, errBroken) {
		tb.Fatalf("%s stopped holding", what)
	}
	if tb.Context().Err() != nil {
		tb.Fatalf("test ended while checking that %s holds", what)
	}
}

var errBroken = errors.New("condition broke")
