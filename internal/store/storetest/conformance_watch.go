package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// eventTimeout bounds the wait for one watch event.
const eventTimeout = 10 * time.Second

// Next is the next event of ch, failing the test if none comes within
// 10 s or the channel closes.
func Next[T store.Object](t *testing.T, ch <-chan store.Event[T]) store.Event[T] {
	t.Helper()
	select {
	case e, ok := <-ch:
		if !ok {
			t.Fatal("watch channel closed")
		}
		return e
	case <-time.After(eventTimeout):
		t.Fatalf("no watch event within %v", eventTimeout)
	}
	panic("unreachable")
}

// Expect checks the next event's type, object name and, when rev > 0,
// revision, and that the object's resource version is the event's.
func Expect(t *testing.T, ch <-chan store.Event[*apiv1.VirtualMachine], typ apiv1.EventType, name string, rev int64) store.Event[*apiv1.VirtualMachine] {
	t.Helper()
	e := Next(t, ch)
	if e.Err != nil {
		t.Fatalf("watch error: %v", e.Err)
	}
	got := ""
	if e.Object != nil {
		got = e.Object.Metadata.Name
		if e.Object.Metadata.ResourceVersion != e.Revision {
			t.Errorf("%s %s: object resource version %d, event revision %d", e.Type, got, e.Object.Metadata.ResourceVersion, e.Revision)
		}
	}
	if e.Type != typ || got != name || (rev > 0 && e.Revision != rev) {
		t.Fatalf("event %s %q rev %d, want %s %q rev %d", e.Type, got, e.Revision, typ, name, rev)
	}
	return e
}

func testWatchInitialList(t *testing.T, nb NewBackend) {
	s := backend(t, nb).VMs
	MustCreate(t, s, NewVM("a", "y", nil))
	MustCreate(t, s, NewVM("a", "x", nil))
	MustCreate(t, s, NewVM("b", "x", nil))
	_, listRev, err := s.List(t.Context(), store.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}

	w, err := s.Watch(t.Context(), store.WatchOptions{ListOptions: store.ListOptions{Namespace: "a"}})
	if err != nil {
		t.Fatal(err)
	}
	Expect(t, w, apiv1.EventType_ADDED, "x", 0)
	Expect(t, w, apiv1.EventType_ADDED, "y", 0)
	if e := Expect(t, w, apiv1.EventType_SYNCED, "", 0); e.Revision < listRev {
		t.Errorf("SYNCED at revision %d, before %d", e.Revision, listRev)
	}
	MustCreate(t, s, NewVM("b", "z", nil)) // other namespace: not seen
	z := MustCreate(t, s, NewVM("a", "z", nil))
	Expect(t, w, apiv1.EventType_ADDED, "z", z.Metadata.ResourceVersion)

	// Name picks one object, within a namespace or across all of them.
	one, err := s.Watch(t.Context(), store.WatchOptions{ListOptions: store.ListOptions{Namespace: "b"}, Name: "x"})
	if err != nil {
		t.Fatal(err)
	}
	e := Expect(t, one, apiv1.EventType_ADDED, "x", 0)
	if e.Object.Metadata.Namespace != "b" {
		t.Errorf("ADDED %s/x, want b/x", e.Object.Metadata.Namespace)
	}
	Expect(t, one, apiv1.EventType_SYNCED, "", 0)
	all, err := s.Watch(t.Context(), store.WatchOptions{Name: "x"})
	if err != nil {
		t.Fatal(err)
	}
	Expect(t, all, apiv1.EventType_ADDED, "x", 0)
	Expect(t, all, apiv1.EventType_ADDED, "x", 0)
	Expect(t, all, apiv1.EventType_SYNCED, "", 0)
}

// write is one step of a write sequence and the event it should cause.
type write struct {
	typ  apiv1.EventType
	name string
	rev  int64
}

// writeSequence creates, updates and deletes n objects in a mix and
// returns what a watch of everything should see.
func writeSequence(t *testing.T, s store.Store[*apiv1.VirtualMachine], n int) []write {
	t.Helper()
	ctx := t.Context()
	var out []write
	for i := range n {
		name := fmt.Sprintf("vm-%02d", i/3)
		var (
			vm  *apiv1.VirtualMachine
			err error
		)
		switch i % 3 {
		case 0:
			vm, err = s.Create(ctx, NewVM("ns", name, nil))
			out = append(out, write{apiv1.EventType_ADDED, name, 0})
		case 1:
			vm, err = s.GuaranteedUpdate(ctx, "ns", name, func(vm *apiv1.VirtualMachine) (*apiv1.VirtualMachine, error) {
				vm.Spec.RunStrategy = "Always"
				return vm, nil
			})
			out = append(out, write{apiv1.EventType_MODIFIED, name, 0})
		case 2:
			if i%2 == 0 {
				vm, _, err = s.Delete(ctx, "ns", name, store.DeleteOptions{})
				out = append(out, write{apiv1.EventType_DELETED, name, 0})
			} else {
				vm, err = s.GuaranteedUpdate(ctx, "ns", name, func(vm *apiv1.VirtualMachine) (*apiv1.VirtualMachine, error) {
					vm.Spec.RunStrategy = "Manual"
					return vm, nil
				})
				out = append(out, write{apiv1.EventType_MODIFIED, name, 0})
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		out[len(out)-1].rev = vm.Metadata.ResourceVersion
	}
	return out
}

func testWatchOrder(t *testing.T, nb NewBackend) {
	s := backend(t, nb).VMs
	w, err := s.Watch(t.Context(), store.WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	Expect(t, w, apiv1.EventType_SYNCED, "", 0)

	// Read while the writes go on.
	const n = 300
	got := make(chan []store.Event[*apiv1.VirtualMachine], 1)
	go func() {
		var events []store.Event[*apiv1.VirtualMachine]
		timeout := time.After(20 * time.Second)
		for len(events) < n {
			select {
			case e := <-w:
				events = append(events, e)
			case <-timeout:
				got <- events
				return
			}
		}
		got <- events
	}()
	writes := writeSequence(t, s, n)
	events := <-got
	if len(events) != n {
		t.Fatalf("got %d events, want %d", len(events), n)
	}
	var last int64
	for i, e := range events {
		if e.Err != nil {
			t.Fatal(e.Err)
		}
		if e.Revision <= last {
			t.Fatalf("event %d at revision %d after %d", i, e.Revision, last)
		}
		last = e.Revision
		if want := writes[i]; e.Type != want.typ || e.Object.Metadata.Name != want.name || e.Revision != want.rev {
			t.Fatalf("event %d: %s %s@%d, want %s %s@%d", i, e.Type, e.Object.Metadata.Name, e.Revision, want.typ, want.name, want.rev)
		}
		if e.Object.Metadata.ResourceVersion != e.Revision {
			t.Fatalf("event %d: object at %d, event at %d", i, e.Object.Metadata.ResourceVersion, e.Revision)
		}
	}
}

func testWatchResume(t *testing.T, nb NewBackend) {
	s := backend(t, nb).VMs
	writes := writeSequence(t, s, 30)
	const from = 10
	w, err := s.Watch(t.Context(), store.WatchOptions{ResourceVersion: writes[from].rev})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range writes[from+1:] {
		Expect(t, w, want.typ, want.name, want.rev)
	}
	// Nothing else came in between: the next event is the next write.
	vm := MustCreate(t, s, NewVM("ns", "after", nil))
	Expect(t, w, apiv1.EventType_ADDED, "after", vm.Metadata.ResourceVersion)
}

func testWatchAfterCompaction(t *testing.T, nb NewBackend) {
	b := nb(t, BackendOptions{Clock: func() time.Time { return Now }, Isolated: true})
	s := b.VMs
	a := MustCreate(t, s, NewVM("ns", "a", nil))
	MustCreate(t, s, NewVM("ns", "b", nil))
	start := a.Metadata.ResourceVersion
	MustCreate(t, s, NewVM("ns", "c", nil))
	if _, _, err := s.Delete(t.Context(), "ns", "b", store.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	_, rev, err := s.List(t.Context(), store.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Compact(t.Context(), rev); err != nil {
		t.Fatal(err)
	}

	w, err := s.Watch(t.Context(), store.WatchOptions{ResourceVersion: start})
	if err != nil {
		t.Fatal(err)
	}
	Expect(t, w, apiv1.EventType_RESET, "", rev)
	Expect(t, w, apiv1.EventType_ADDED, "a", 0)
	Expect(t, w, apiv1.EventType_ADDED, "c", 0)
	Expect(t, w, apiv1.EventType_SYNCED, "", rev)
	d := MustCreate(t, s, NewVM("ns", "d", nil))
	Expect(t, w, apiv1.EventType_ADDED, "d", d.Metadata.ResourceVersion)
}

func testWatchSelectorTransitions(t *testing.T, nb NewBackend) {
	s := backend(t, nb).VMs
	w, err := s.Watch(t.Context(), store.WatchOptions{ListOptions: store.ListOptions{LabelSelector: "app=web"}})
	if err != nil {
		t.Fatal(err)
	}
	Expect(t, w, apiv1.EventType_SYNCED, "", 0)

	n := 0
	label := func(app string) *apiv1.VirtualMachine {
		t.Helper()
		n++ // every call writes, even with the same label
		vm, err := s.GuaranteedUpdate(t.Context(), "ns", "x", func(vm *apiv1.VirtualMachine) (*apiv1.VirtualMachine, error) {
			if vm.Metadata.Labels == nil {
				vm.Metadata.Labels = map[string]string{}
			}
			vm.Metadata.Labels["app"] = app
			vm.Metadata.Annotations = map[string]string{"n": fmt.Sprint(n)}
			return vm, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return vm
	}
	MustCreate(t, s, NewVM("ns", "x", nil)) // not matching: nothing
	web := label("web")
	Expect(t, w, apiv1.EventType_ADDED, "x", web.Metadata.ResourceVersion)
	web2 := label("web")
	Expect(t, w, apiv1.EventType_MODIFIED, "x", web2.Metadata.ResourceVersion)
	db := label("db")
	e := Expect(t, w, apiv1.EventType_DELETED, "x", db.Metadata.ResourceVersion)
	// The last state the watch matched, at the revision it stopped matching.
	web2.Metadata.ResourceVersion = db.Metadata.ResourceVersion
	if !proto.Equal(e.Object, web2) {
		t.Errorf("DELETED carries %v, want %v", e.Object, web2)
	}
	label("db")
	if _, _, err := s.Delete(t.Context(), "ns", "x", store.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// Neither the update nor the delete of a non-matching object shows.
	y := MustCreate(t, s, NewVM("ns", "y", map[string]string{"app": "web"}))
	Expect(t, w, apiv1.EventType_ADDED, "y", y.Metadata.ResourceVersion)
	if _, _, err := s.Delete(t.Context(), "ns", "y", store.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	Expect(t, w, apiv1.EventType_DELETED, "y", 0)
}

func testWatchEndsWithContext(t *testing.T, nb NewBackend) {
	s := backend(t, nb).VMs
	ctx, cancel := context.WithCancel(t.Context())
	w, err := s.Watch(ctx, store.WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	Expect(t, w, apiv1.EventType_SYNCED, "", 0)
	cancel()
	select {
	case e, ok := <-w:
		if ok {
			t.Fatalf("event %v after cancel, want the channel closed", e)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("channel not closed after cancel")
	}
}

// slowConsumerWrites is more events than a watch buffers (100 in both
// backends), so the writer gets ahead of the consumer.
const slowConsumerWrites = 300

// A consumer that stops reading holds the watch back rather than losing
// events.
func testWatchSlowConsumer(t *testing.T, nb NewBackend) {
	s := backend(t, nb).VMs
	w, err := s.Watch(t.Context(), store.WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	writes := writeSequence(t, s, slowConsumerWrites)
	Expect(t, w, apiv1.EventType_SYNCED, "", 0)
	for _, want := range writes {
		Expect(t, w, want.typ, want.name, want.rev)
	}
}
