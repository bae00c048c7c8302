package client

import (
	"context"
	"errors"
	"io"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Stream is a watch stream of the API (VMs, VMIs or Nodes).
type Stream[E any] interface{ Recv() (E, error) }

// EachEvent calls fn with every event of s until the server ends the
// stream (nil), the stream fails, or fn returns an error (returned as is).
func EachEvent[E any](s Stream[E], fn func(E) error) error {
	for {
		ev, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := fn(ev); err != nil {
			return err
		}
	}
}

// followPause is how long Follow waits before it opens a watch again.
const followPause = 100 * time.Millisecond

// Follow opens a watch with open and calls fn with its events, opening it
// again after a pause whenever it ends or fails, until ctx ends: for an
// observer that must outlive a restarting server (tests, benchmarks).
func Follow[E any, S Stream[E]](ctx context.Context, open func(context.Context) (S, error), fn func(E)) {
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if s, err := open(ctx); err == nil {
			_ = EachEvent(s, func(ev E) error { fn(ev); return nil })
		}
	}, followPause)
}
