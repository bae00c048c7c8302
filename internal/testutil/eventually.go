// Package testutil holds the helpers tests of every package share.
package testutil

import (
	"context"
	"errors"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// PollInterval is how often Eventually and Consistently check their
// condition: short enough that a test ends soon after the condition
// holds, long enough not to load what it waits on. A check that starts a
// process or reads a whole log polls less often: Every.
const PollInterval = 20 * time.Millisecond

// Poller checks conditions every Interval.
type Poller struct{ Interval time.Duration }

// Every is a Poller for checks that cost (a virsh call, a log scan).
func Every(interval time.Duration) Poller { return Poller{Interval: interval} }

var poller = Poller{Interval: PollInterval}

// Eventually waits until cond returns true, checking at once and then every
// PollInterval, and fails the test naming what it waited for when timeout
// passes first or the test's context ends. Choose timeout for the slowest
// machine the suite runs on (a loaded two-core CI host under -race): it
// bounds a failing test, never a passing one.
func Eventually(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	poller.Eventually(tb, timeout, what, cond)
}

// EventuallyNoError is Eventually for a check that says why it does not
// hold yet: it waits until check returns nil, and the failure message
// quotes the last error.
func EventuallyNoError(tb testing.TB, timeout time.Duration, what string, check func() error) {
	tb.Helper()
	poller.EventuallyNoError(tb, timeout, what, check)
}

// Consistently checks that cond holds at once and every PollInterval for
// d, and fails the test naming what broke as soon as it does not. It is
// for what must not happen (a VM that must not restart by itself): it
// asserts over a window that starts only after the test has seen the
// system settle (with Eventually), so it can miss a late bug but never
// fails a correct system.
func Consistently(tb testing.TB, d time.Duration, what string, cond func() bool) {
	tb.Helper()
	poller.Consistently(tb, d, what, cond)
}

// ConsistentlyNoError is Consistently for a check that says what broke.
func ConsistentlyNoError(tb testing.TB, d time.Duration, what string, check func() error) {
	tb.Helper()
	poller.ConsistentlyNoError(tb, d, what, check)
}

var errNotYet = errors.New("condition not met")

func boolCheck(cond func() bool) func() error {
	return func() error {
		if cond() {
			return nil
		}
		return errNotYet
	}
}

// Eventually is the package's Eventually at p's interval.
func (p Poller) Eventually(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	p.EventuallyNoError(tb, timeout, what, boolCheck(cond))
}

// EventuallyNoError is the package's EventuallyNoError at p's interval.
func (p Poller) EventuallyNoError(tb testing.TB, timeout time.Duration, what string, check func() error) {
	tb.Helper()
	var last error
	start := time.Now()
	err := wait.PollUntilContextTimeout(tb.Context(), p.Interval, timeout, true, func(context.Context) (bool, error) {
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

// Consistently is the package's Consistently at p's interval.
func (p Poller) Consistently(tb testing.TB, d time.Duration, what string, cond func() bool) {
	tb.Helper()
	p.ConsistentlyNoError(tb, d, what, boolCheck(cond))
}

// ConsistentlyNoError is the package's ConsistentlyNoError at p's
// interval.
func (p Poller) ConsistentlyNoError(tb testing.TB, d time.Duration, what string, check func() error) {
	tb.Helper()
	var broke error
	_ = wait.PollUntilContextTimeout(tb.Context(), p.Interval, d, true, func(context.Context) (bool, error) {
		broke = check()
		return broke != nil, nil
	})
	switch {
	case broke == nil:
	case errors.Is(broke, errNotYet):
		tb.Fatalf("%s stopped holding", what)
	default:
		tb.Fatalf("%s stopped holding: %v", what, broke)
	}
}
