// Package reported holds one piece of a node's status that the agent lists
// on its own schedule (its images, its bridges and networks) and sends in
// heartbeats only when the server does not have it yet: the latest
// listing, the one the server stored, and the signals the heartbeat loop
// and registration wait on.
package reported

import (
	"context"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"
	"k8s.io/utils/clock"
)

// Latest is the latest listing of T and the one the server stored. Values
// are replaced, never modified, so they are shared freely. The zero value
// is not usable; use New.
type Latest[T proto.Message] struct {
	mu      sync.Mutex
	current T // zero until the first listing
	sent    T // what the server holds; zero: unknown
	has     bool
	hasSent bool

	triedOnce sync.Once
	tried     chan struct{} // closed once a first listing was tried
	changed   chan struct{}
}

// New returns an empty Latest.
func New[T proto.Message]() *Latest[T] {
	return &Latest[T]{tried: make(chan struct{}), changed: make(chan struct{}, 1)}
}

// Set records a listing and reports whether it differs from the last. A
// change wakes Changed, so that it is sent before the next regular beat.
func (l *Latest[T]) Set(v T) (changed bool) {
	l.mu.Lock()
	changed = !l.has || !proto.Equal(v, l.current)
	l.current, l.has = v, true
	l.mu.Unlock()
	if changed {
		select {
		case l.changed <- struct{}{}:
		default: // a wake-up is pending already
		}
	}
	// Last: whoever waited for the first listing finds it complete,
	// wake-up included.
	l.Tried()
	return changed
}

// Tried says the first listing is over, with a value or without.
func (l *Latest[T]) Tried() { l.triedOnce.Do(func() { close(l.tried) }) }

// FirstTried is closed once the first listing was tried.
func (l *Latest[T]) FirstTried() <-chan struct{} { return l.tried }

// Changed is signalled when a value is pending.
func (l *Latest[T]) Changed() <-chan struct{} { return l.changed }

// Current is the latest listing; ok is false before the first.
func (l *Latest[T]) Current() (v T, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.current, l.has
}

// ForRegister waits up to wait (timed by clk) for the first listing to be
// tried and returns the latest value, the zero T when there is none.
func (l *Latest[T]) ForRegister(ctx context.Context, clk clock.Clock, wait time.Duration) T {
	t := clk.NewTimer(wait)
	defer t.Stop()
	select {
	case <-l.tried:
	case <-t.C():
	case <-ctx.Done():
	}
	v, _ := l.Current()
	return v
}

// Pending is the value a heartbeat should carry: the latest when the
// server does not have it, else the zero T.
func (l *Latest[T]) Pending() T {
	l.mu.Lock()
	defer l.mu.Unlock()
	var zero T
	if !l.has || (l.hasSent && proto.Equal(l.current, l.sent)) {
		return zero
	}
	return l.current
}

// MarkSent records that the server stored v.
func (l *Latest[T]) MarkSent(v T) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sent, l.hasSent = v, true
}
