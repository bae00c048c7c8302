// Package drivertest helps tests that call a driver's gRPC methods
// directly, without a gRPC connection: the driver's own tests over a fake
// libvirt and launcher/internal/virt's over the real one.
package drivertest

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
)

// eventTimeout bounds a wait for one event: generous, it only bounds a
// failing test.
const eventTimeout = 10 * time.Second

// Stream is the server side of a Launcher.Events stream: it records what
// the driver sends.
type Stream struct {
	grpc.ServerStream
	ctx context.Context
	ch  chan *launcherpb.DomainEvent
}

// NewStream returns a stream whose client goes away when ctx ends.
func NewStream(ctx context.Context) *Stream {
	return &Stream{ctx: ctx, ch: make(chan *launcherpb.DomainEvent, 64)}
}

// Context is the stream's context.
func (s *Stream) Context() context.Context { return s.ctx }

// Send records ev.
func (s *Stream) Send(ev *launcherpb.DomainEvent) error {
	s.ch <- ev
	return nil
}

// Next returns the next event sent, and fails the test when none comes.
func (s *Stream) Next(tb testing.TB) *launcherpb.DomainEvent {
	tb.Helper()
	select {
	case ev := <-s.ch:
		return ev
	case <-time.After(eventTimeout):
		tb.Fatalf("no event within %v", eventTimeout)
		return nil
	}
}

// WaitFor skips events until one named event arrives, and returns it.
func (s *Stream) WaitFor(tb testing.TB, event string) *launcherpb.DomainEvent {
	tb.Helper()
	for {
		if ev := s.Next(tb); ev.GetEvent() == event {
			return ev
		}
	}
}
