package driver

import (
	"context"
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
)

// fakeStream is the server side of an Events stream.
type fakeStream struct {
	grpc.ServerStream
	ctx context.Context
	out chan *launcherpb.DomainEvent
}

func (s *fakeStream) Context() context.Context { return s.ctx }

func (s *fakeStream) Send(ev *launcherpb.DomainEvent) error {
	s.out <- ev
	return nil
}

func (s *fakeStream) next(t *testing.T) *launcherpb.DomainEvent {
	t.Helper()
	select {
	case ev := <-s.out:
		return ev
	case <-time.After(5 * time.Second):
		t.Fatal("no event within 5s")
		return nil
	}
}

func TestEventsStream(t *testing.T) {
	h := newHarness(t)
	ctx, cancel := context.WithCancel(context.Background())
	s := &fakeStream{ctx: ctx, out: make(chan *launcherpb.DomainEvent, 16)}
	done := make(chan error, 1)
	go func() { done <- h.d.Events(&launcherpb.Empty{}, s) }()

	first := s.next(t)
	if first.GetEvent() != "Current" || first.GetStatus().GetExists() {
		t.Fatalf("first event = %v", first)
	}
	h.mustSync(vmi(apiv1.PhaseScheduled))
	var got []string
	for len(got) < 2 {
		ev := s.next(t)
		got = append(got, ev.GetEvent()+" "+ev.GetStatus().GetState())
	}
	if got[0] != "Defined/Added Running" && got[0] != "Defined/Added Shutoff" || got[1] != "Started/Booted Running" {
		t.Fatalf("events = %v", got)
	}

	// Events of other domains are filtered; a reconnect republishes.
	h.conn.emit("someone_else", 2, 0)
	h.conn.events <- Event{Kind: EventReconnected}
	if ev := s.next(t); ev.GetEvent() != "Reconnected" || ev.GetStatus().GetState() != "Running" {
		t.Fatalf("after reconnect = %v", ev)
	}

	cancel()
	if err := <-done; status.Code(err) != codes.Canceled {
		t.Fatalf("Events returned %v", err)
	}
}

func TestEventsEndWhenDriverCloses(t *testing.T) {
	h := newHarness(t)
	s := &fakeStream{ctx: context.Background(), out: make(chan *launcherpb.DomainEvent, 16)}
	done := make(chan error, 1)
	go func() { done <- h.d.Events(&launcherpb.Empty{}, s) }()
	s.next(t)
	h.d.Close()
	if err := <-done; status.Code(err) != codes.Unavailable {
		t.Fatalf("Events returned %v", err)
	}
}

func TestBroadcasterKeepsLatest(t *testing.T) {
	b := newBroadcaster()
	_, ch, _ := b.subscribe()
	for i := 0; i < subscriberBuffer+10; i++ {
		b.publish(&launcherpb.DomainEvent{Event: strconv.Itoa(i)})
	}
	var last *launcherpb.DomainEvent
	for len(ch) > 0 {
		last = <-ch
	}
	if last.GetEvent() != strconv.Itoa(subscriberBuffer+9) {
		t.Fatalf("last event = %v", last)
	}
}
