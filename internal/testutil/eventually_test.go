package testutil

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestEventuallyReturnsOnceTheConditionHolds(t *testing.T) {
	var n atomic.Int32
	Eventually(t, time.Minute, "the third check", func() bool { return n.Add(1) == 3 })
	if got := n.Load(); got != 3 {
		t.Errorf("checked %d times", got)
	}
}

// fakeTB records a failure instead of ending the test that uses it.
type fakeTB struct {
	testing.TB
	msg string
}

func (f *fakeTB) Helper()                           {}
func (f *fakeTB) Fatalf(format string, args ...any) { f.msg = fmt.Sprintf(format, args...) }

func TestEventuallyFailsNamingWhatAndTheLastError(t *testing.T) {
	f := &fakeTB{TB: t}
	EventuallyNoError(f, 50*time.Millisecond, "the disk", func() error { return errors.New("still busy") })
	if !strings.Contains(f.msg, "waiting for the disk: still busy") {
		t.Errorf("failure message %q", f.msg)
	}
	f = &fakeTB{TB: t}
	Eventually(f, 50*time.Millisecond, "nothing", func() bool { return false })
	if !strings.Contains(f.msg, "waiting for nothing") || strings.Contains(f.msg, "condition not met") {
		t.Errorf("failure message %q", f.msg)
	}
}

func TestConsistentlyFailsAsSoonAsTheConditionBreaks(t *testing.T) {
	f := &fakeTB{TB: t}
	var n atomic.Int32
	start := time.Now()
	Consistently(f, time.Minute, "the guest stays up", func() bool { return n.Add(1) < 3 })
	if !strings.Contains(f.msg, "the guest stays up stopped holding") || time.Since(start) > 10*time.Second {
		t.Errorf("failure message %q after %v", f.msg, time.Since(start))
	}
	f = &fakeTB{TB: t}
	Consistently(f, 60*time.Millisecond, "true", func() bool { return true })
	if f.msg != "" {
		t.Errorf("failed on a condition that held: %q", f.msg)
	}
}

func TestConsistentlyNoErrorQuotesWhatBroke(t *testing.T) {
	f := &fakeTB{TB: t}
	var n atomic.Int32
	ConsistentlyNoError(f, time.Minute, "one instance", func() error {
		if n.Add(1) < 3 {
			return nil
		}
		return errors.New("two instances")
	})
	if f.msg != "one instance stopped holding: two instances" {
		t.Errorf("failure message %q", f.msg)
	}
}

func TestEveryPollsAtItsInterval(t *testing.T) {
	var n atomic.Int32
	start := time.Now()
	Every(50*time.Millisecond).Eventually(t, time.Minute, "the third check", func() bool { return n.Add(1) == 3 })
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Errorf("three checks 50 ms apart took %v", d)
	}
}
