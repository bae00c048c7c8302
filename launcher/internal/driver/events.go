package driver

import (
	"context"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
)

// subscriberBuffer bounds what a slow Events stream can queue. Every
// message carries the full status, so when it overflows the oldest message
// is dropped: the latest state always gets through.
const subscriberBuffer = 32

type broadcaster struct {
	mu     sync.Mutex
	subs   map[int]chan *launcherpb.DomainEvent
	next   int
	closed bool
}

func newBroadcaster() *broadcaster {
	return &broadcaster{subs: map[int]chan *launcherpb.DomainEvent{}}
}

// subscribe returns a channel that is closed by unsubscribe or close; ok
// is false after close.
func (b *broadcaster) subscribe() (id int, ch chan *launcherpb.DomainEvent, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return 0, nil, false
	}
	b.next++
	ch = make(chan *launcherpb.DomainEvent, subscriberBuffer)
	b.subs[b.next] = ch
	return b.next, ch, true
}

func (b *broadcaster) unsubscribe(id int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if ch, ok := b.subs[id]; ok {
		delete(b.subs, id)
		close(ch)
	}
}

func (b *broadcaster) publish(ev *launcherpb.DomainEvent) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, ch := range b.subs {
		for {
			select {
			case ch <- ev:
			default:
				select {
				case <-ch: // drop the oldest and retry
				default:
				}
				continue
			}
			break
		}
	}
}

func (b *broadcaster) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	for id, ch := range b.subs {
		delete(b.subs, id)
		close(ch)
	}
}

// publish sends a status update to every Events stream.
func (d *Driver) publish(st *launcherpb.DomainStatus, event string) {
	if st == nil {
		return
	}
	d.subs.publish(&launcherpb.DomainEvent{Status: st, Event: event})
}

// pump turns libvirt events for this domain into status updates. The
// status is read here, not in the libvirt callback: callbacks run on the
// event-loop thread, which must not block on further libvirt calls.
func (d *Driver) pump(events <-chan Event) {
	defer d.wg.Done()
	for {
		var ev Event
		select {
		case <-d.done:
			return
		case e, ok := <-events:
			if !ok {
				return
			}
			ev = e
		}
		name := "Reconnected"
		switch ev.Kind {
		case EventAgent:
			if ev.Domain == d.cfg.DomainName {
				// Its addresses are known now (or gone): the status
				// follows from the lookup.
				d.log.Info("guest agent event", "connected", ev.Type == AgentConnected)
				d.kickAddresses()
			}
			continue
		case EventDeviceRemoved, EventDeviceRemovalFailed:
			if ev.Domain != d.cfg.DomainName {
				continue
			}
			name = "DeviceRemoved/" + ev.Alias
			if ev.Kind == EventDeviceRemovalFailed {
				// The unplug stands: the guest may release it later.
				name = "DeviceRemovalFailed/" + ev.Alias
				d.log.Warn("the guest refused to release a device", "alias", ev.Alias)
			} else {
				d.unplug.removed(ev.Alias)
			}
		case EventLifecycle:
			if ev.Domain != d.cfg.DomainName {
				continue
			}
			name = EventName(ev.Type, ev.Detail)
			// libvirt narrows callbacks by UUID: an undefined domain may
			// come back with another one.
			d.focusEvents(!strings.HasPrefix(name, "Undefined/"))
			d.networkAfter(ev)
		case EventReconnected:
			d.focusEvents(true)
		}
		d.kickAddresses()
		st, err := d.currentStatus()
		if err != nil {
			d.log.Warn("cannot read domain status after event", "event", name, "error", err)
			continue
		}
		d.log.Info("domain event", "event", name, "state", st.GetState(), "reason", st.GetReason())
		d.publish(st, name)
	}
}

// networkAfter applies the network when a domain arrives by migration:
// its tap exists once the incoming QEMU started (the guest is paused
// until the switchover), and its port forwards go on once it runs here.
// Starts of this launcher's own (Sync) apply it there, reporting errors
// to the caller; this also covers a domain some other way started.
// Failures are logged: the node agent's next Sync reports them.
func (d *Driver) networkAfter(ev Event) {
	var steps netSteps
	switch EventName(ev.Type, ev.Detail) {
	case "Started/Migrated":
		steps = netSteps{vlans: true}
	case "Started/Recreated":
		// QEMU started anew without a Sync (libvirt recreates it for a
		// reset that needs a new process).
		steps = allNetSteps
	case "Resumed/Migrated", "Resumed/PostCopy":
		steps = allNetSteps
	default:
		return
	}
	dom, err := d.lookup()
	if err != nil || dom == nil {
		return
	}
	defer dom.Free()
	if err := d.applyNetwork(dom, steps); err != nil {
		d.log.Warn("applying the network after the domain arrived", "event", EventName(ev.Type, ev.Detail), "err", err)
	}
}

// Events streams status updates; the first message is the current status.
func (d *Driver) Events(_ *launcherpb.Empty, stream grpc.ServerStreamingServer[launcherpb.DomainEvent]) error {
	// Subscribe before reading the current status so that no change
	// between the two is lost.
	id, ch, ok := d.subs.subscribe()
	if !ok {
		return status.Error(codes.Unavailable, "launcher is shutting down")
	}
	defer d.subs.unsubscribe(id)

	st, err := d.currentStatus()
	if err != nil {
		return err
	}
	if err := stream.Send(&launcherpb.DomainEvent{Status: st, Event: "Current"}); err != nil {
		return err
	}
	ctx := stream.Context()
	for {
		select {
		case <-ctx.Done():
			return status.FromContextError(context.Cause(ctx)).Err()
		case ev, ok := <-ch:
			if !ok {
				return status.Error(codes.Unavailable, "launcher is shutting down")
			}
			if err := stream.Send(ev); err != nil {
				return err
			}
		}
	}
}

// eventFocus is a connection that can narrow its event callbacks to one
// domain (virt.Connection does; package virt says why it matters).
type eventFocus interface {
	FocusEvents(domain string) error
	UnfocusEvents() error
}

// focusEvents asks the connection for this launcher's domain's events
// only (on), or for every domain's again (off). A connection that cannot
// narrow them keeps sending every domain's, which the pump filters.
func (d *Driver) focusEvents(on bool) {
	f, ok := d.conn.(eventFocus)
	if !ok {
		return
	}
	var err error
	if on {
		err = f.FocusEvents(d.cfg.DomainName)
	} else {
		err = f.UnfocusEvents()
	}
	if err != nil {
		d.log.Warn("cannot narrow libvirt events to the domain; filtering every domain's", "error", err)
	}
}
