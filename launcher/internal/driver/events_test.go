package driver

import (
	"context"
	"strconv"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
	"github.com/virtplane/terraform-provider-virtplane/launcher/internal/driver/drivertest"
)

func TestEventsStream(t *testing.T) {
	h := newHarness(t)
	ctx, cancel := context.WithCancel(context.Background())
	s := drivertest.NewStream(ctx)
	done := make(chan error, 1)
	go func() { done <- h.d.Events(&launcherpb.Empty{}, s) }()

	first := s.Next(t)
	if first.GetEvent() != "Current" || first.GetStatus().GetExists() {
		t.Fatalf("first event = %v", first)
	}
	h.mustSync(vmi(apiv1.PhaseScheduled))
	var got []string
	for len(got) < 2 {
		ev := s.Next(t)
		got = append(got, ev.GetEvent()+" "+ev.GetStatus().GetState())
	}
	if got[0] != "Defined/Added Running" && got[0] != "Defined/Added Shutoff" || got[1] != "Started/Booted Running" {
		t.Fatalf("events = %v", got)
	}

	// Events of other domains are filtered; a reconnect republishes.
	h.conn.emit("someone_else", 2, 0)
	h.conn.events <- Event{Kind: EventReconnected}
	if ev := s.Next(t); ev.GetEvent() != "Reconnected" || ev.GetStatus().GetState() != "Running" {
		t.Fatalf("after reconnect = %v", ev)
	}

	cancel()
	if err := <-done; status.Code(err) != codes.Canceled {
		t.Fatalf("Events returned %v", err)
	}
}

func TestEventsEndWhenDriverCloses(t *testing.T) {
	h := newHarness(t)
	s := drivertest.NewStream(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.d.Events(&launcherpb.Empty{}, s) }()
	s.Next(t)
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
