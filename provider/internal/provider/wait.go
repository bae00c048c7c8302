package provider

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-log/tflog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/virtplane/terraform-provider-virtplane/internal/client"
)

// The wait loop of every resource that waits for a controller: read the
// object (and what the judgement needs of its children), judge it, and
// read again on a watch event or a poll tick. The judges are pure
// functions of what was read, tested without an agent.

// verdict is a judge's answer.
type verdict struct {
	done bool
	// err ends the wait: the object cannot get where it is meant to
	// without help.
	err error
	// state says what the object is doing, for logs and timeout messages.
	state string
}

// pollInterval bounds how long a missed watch event can delay a wait
// (a variable for tests).
var pollInterval = 2 * time.Second

// errWaitTimeout marks a wait that ran out of time; the message says what
// the object was doing.
var errWaitTimeout = errors.New("timed out")

// waitUntil reads with read, first at once and then whenever changed
// signals or pollInterval passes, until judge says done or fails, or ctx
// ends (errWaitTimeout, saying what was last seen). It returns the last
// value read. A read that answers NotFound ends the wait with that error;
// other failed reads are retried until ctx ends. what names the object
// in logs ("virtual machine default/web"). Watches are an optimisation:
// if they fail, the poll still sees every state.
func waitUntil[T any](ctx context.Context, what string, changed <-chan struct{}, read func(context.Context) (T, error), judge func(T) verdict) (T, error) {
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	var (
		last      T
		lastState = "not read yet"
		lastErr   error
	)
	for {
		v, err := read(ctx)
		switch {
		case status.Code(err) == codes.NotFound:
			return last, err
		case err != nil && ctx.Err() == nil:
			lastErr = err
			tflog.Debug(ctx, "reading the "+what+" failed; retrying", map[string]any{"error": err.Error()})
		case err == nil:
			last, lastErr = v, nil
			j := judge(v)
			if j.state != lastState {
				tflog.Debug(ctx, "waiting for the "+what, map[string]any{"state": j.state})
				lastState = j.state
			}
			if j.done || j.err != nil {
				return v, j.err
			}
		}
		select {
		case <-ctx.Done():
			msg := "it was last seen with " + lastState
			if lastErr != nil {
				msg += "; the last read failed: " + status.Convert(lastErr).Message()
			}
			return last, fmt.Errorf("%w: %s", errWaitTimeout, msg)
		case <-changed:
		case <-tick.C:
		}
	}
}

// notifier returns a channel that signals, without blocking and
// coalescing, and the function that signals it.
func notifier() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	return ch, func() {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// goneWhenNotFound turns the NotFound that ends a wait for a deletion
// (the object is gone) into success.
func goneWhenNotFound(err error) error {
	if status.Code(err) == codes.NotFound {
		return nil
	}
	return err
}

// notifyOnEvents calls notify on every event of the watch open opens, in
// a goroutine of its own, until the watch ends (with ctx). A watch that
// cannot be opened, or breaks, costs only time: the waits poll as well.
func notifyOnEvents[E any, S client.Stream[E]](ctx context.Context, notify func(), open func(context.Context) (S, error)) {
	go func() {
		if s, err := open(ctx); err == nil {
			_ = client.EachEvent(s, func(E) error { notify(); return nil })
		}
	}()
}
