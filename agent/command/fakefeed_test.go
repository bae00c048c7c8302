package command

import (
	"context"
	"sync"
)

// fakeFeed is what the fake services share for their watches: the lock
// that guards a fake's objects, its resource version, and its open
// watches, each a channel of events E.
type fakeFeed[E any] struct {
	mu   sync.Mutex
	rv   int64
	subs map[chan E]bool
}

// publish sends every open watch an event; event makes each its own copy.
// Callers hold mu.
func (f *fakeFeed[E]) publish(event func() E) {
	for ch := range f.subs {
		ch <- event()
	}
}

// locked runs fn under the fake's lock: the race detector does not see the
// ordering that gRPC round trips give.
func (f *fakeFeed[E]) locked(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn()
}

// watchers counts the open watches.
func (f *fakeFeed[E]) watchers() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.subs)
}

// serveWatch serves one watch: it lists (list runs under mu) and
// subscribes under one lock, so no event falls in between, then sends
// the listed events and every later one that keep passes, until ctx ends.
func (f *fakeFeed[E]) serveWatch(ctx context.Context, list func() []E, keep func(E) bool, send func(E) error) error {
	ch := make(chan E, 100)
	f.mu.Lock()
	initial := list()
	if f.subs == nil {
		f.subs = map[chan E]bool{}
	}
	f.subs[ch] = true
	f.mu.Unlock()
	defer f.locked(func() { delete(f.subs, ch) })

	for _, ev := range initial {
		if err := send(ev); err != nil {
			return err
		}
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev := <-ch:
			if !keep(ev) {
				continue
			}
			if err := send(ev); err != nil {
				return err
			}
		}
	}
}
