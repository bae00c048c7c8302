package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/store/storetest"
)

func TestWatchInitialList(t *testing.T) {
	t.Parallel()
	s := vmStore(t)
	mustCreate(t, s, newVM("a", "y", nil))
	mustCreate(t, s, newVM("a", "x", nil))
	mustCreate(t, s, newVM("b", "x", nil))
	_, listRev, err := s.List(t.Context(), ListOptions{})
	if err != nil {
		t.Fatal(err)
	}

	w, err := s.Watch(t.Context(), WatchOptions{ListOptions: ListOptions{Namespace: "a"}})
	if err != nil {
		t.Fatal(err)
	}
	expect(t, w, apiv1.EventType_ADDED, "x", 0)
	expect(t, w, apiv1.EventType_ADDED, "y", 0)
	if e := expect(t, w, apiv1.EventType_SYNCED, "", 0); e.Revision < listRev {
		t.Errorf("SYNCED at revision %d, before %d", e.Revision, listRev)
	}
	mustCreate(t, s, newVM("b", "z", nil)) // other namespace: not seen
	z := mustCreate(t, s, newVM("a", "z", nil))
	expect(t, w, apiv1.EventType_ADDED, "z", z.Metadata.ResourceVersion)

	// Name picks one object, within a namespace or across all of them.
	one, err := s.Watch(t.Context(), WatchOptions{ListOptions: ListOptions{Namespace: "b"}, Name: "x"})
	if err != nil {
		t.Fatal(err)
	}
	e := expect(t, one, apiv1.EventType_ADDED, "x", 0)
	if e.Object.Metadata.Namespace != "b" {
		t.Errorf("ADDED %s/x, want b/x", e.Object.Metadata.Namespace)
	}
	expect(t, one, apiv1.EventType_SYNCED, "", 0)
	all, err := s.Watch(t.Context(), WatchOptions{Name: "x"})
	if err != nil {
		t.Fatal(err)
	}
	expect(t, all, apiv1.EventType_ADDED, "x", 0)
	expect(t, all, apiv1.EventType_ADDED, "x", 0)
	expect(t, all, apiv1.EventType_SYNCED, "", 0)
}

// write is one step of a write sequence and the event it should cause.
type write struct {
	typ  apiv1.EventType
	name string
	rev  int64
}

// writeSequence creates, updates and deletes n objects in a mix and
// returns what a watch of everything should see.
func writeSequence(t *testing.T, s Store[*apiv1.VirtualMachine], n int) []write {
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
			vm, err = s.Create(ctx, newVM("ns", name, nil))
			out = append(out, write{apiv1.EventType_ADDED, name, 0})
		case 1:
			vm, err = s.GuaranteedUpdate(ctx, "ns", name, func(vm *apiv1.VirtualMachine) (*apiv1.VirtualMachine, error) {
				vm.Spec.RunStrategy = "Always"
				return vm, nil
			})
			out = append(out, write{apiv1.EventType_MODIFIED, name, 0})
		case 2:
			if i%2 == 0 {
				vm, _, err = s.Delete(ctx, "ns", name, DeleteOptions{})
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

func TestWatchOrder(t *testing.T) {
	t.Parallel()
	s := vmStore(t)
	w, err := s.Watch(t.Context(), WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	expect(t, w, apiv1.EventType_SYNCED, "", 0)

	// Read while the writes go on.
	const n = 300
	got := make(chan []Event[*apiv1.VirtualMachine], 1)
	go func() {
		var events []Event[*apiv1.VirtualMachine]
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

func TestWatchResume(t *testing.T) {
	t.Parallel()
	s := vmStore(t)
	writes := writeSequence(t, s, 30)
	const from = 10
	w, err := s.Watch(t.Context(), WatchOptions{ResourceVersion: writes[from].rev})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range writes[from+1:] {
		expect(t, w, want.typ, want.name, want.rev)
	}
	// Nothing else came in between: the next event is the next write.
	vm := mustCreate(t, s, newVM("ns", "after", nil))
	expect(t, w, apiv1.EventType_ADDED, "after", vm.Metadata.ResourceVersion)
}

func TestWatchAfterCompaction(t *testing.T) {
	t.Parallel()
	// Compaction is server-wide, so this test gets a server of its own.
	c := storetest.NewServer(t).Client()
	s := vmStoreWith(t, c)
	a := mustCreate(t, s, newVM("ns", "a", nil))
	mustCreate(t, s, newVM("ns", "b", nil))
	start := a.Metadata.ResourceVersion
	mustCreate(t, s, newVM("ns", "c", nil))
	if _, _, err := s.Delete(t.Context(), "ns", "b", DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	_, rev, err := s.List(t.Context(), ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Compact(t.Context(), rev); err != nil {
		t.Fatal(err)
	}

	w, err := s.Watch(t.Context(), WatchOptions{ResourceVersion: start})
	if err != nil {
		t.Fatal(err)
	}
	expect(t, w, apiv1.EventType_RESET, "", rev)
	expect(t, w, apiv1.EventType_ADDED, "a", 0)
	expect(t, w, apiv1.EventType_ADDED, "c", 0)
	expect(t, w, apiv1.EventType_SYNCED, "", rev)
	d := mustCreate(t, s, newVM("ns", "d", nil))
	expect(t, w, apiv1.EventType_ADDED, "d", d.Metadata.ResourceVersion)
}

func TestWatchSelectorTransitions(t *testing.T) {
	t.Parallel()
	s := vmStore(t)
	w, err := s.Watch(t.Context(), WatchOptions{ListOptions: ListOptions{LabelSelector: "app=web"}})
	if err != nil {
		t.Fatal(err)
	}
	expect(t, w, apiv1.EventType_SYNCED, "", 0)

	label := func(app string) *apiv1.VirtualMachine {
		t.Helper()
		vm, err := s.GuaranteedUpdate(t.Context(), "ns", "x", func(vm *apiv1.VirtualMachine) (*apiv1.VirtualMachine, error) {
			if vm.Metadata.Labels == nil {
				vm.Metadata.Labels = map[string]string{}
			}
			vm.Metadata.Labels["app"] = app
			vm.Metadata.Annotations = map[string]string{"n": fmt.Sprint(time.Now().UnixNano())}
			return vm, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return vm
	}
	mustCreate(t, s, newVM("ns", "x", nil)) // not matching: nothing
	web := label("web")
	expect(t, w, apiv1.EventType_ADDED, "x", web.Metadata.ResourceVersion)
	web2 := label("web")
	expect(t, w, apiv1.EventType_MODIFIED, "x", web2.Metadata.ResourceVersion)
	db := label("db")
	e := expect(t, w, apiv1.EventType_DELETED, "x", db.Metadata.ResourceVersion)
	// The last state the watch matched, at the revision it stopped matching.
	web2.Metadata.ResourceVersion = db.Metadata.ResourceVersion
	if !proto.Equal(e.Object, web2) {
		t.Errorf("DELETED carries %v, want %v", e.Object, web2)
	}
	label("db")
	if _, _, err := s.Delete(t.Context(), "ns", "x", DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// Neither the update nor the delete of a non-matching object shows.
	y := mustCreate(t, s, newVM("ns", "y", map[string]string{"app": "web"}))
	expect(t, w, apiv1.EventType_ADDED, "y", y.Metadata.ResourceVersion)
	if _, _, err := s.Delete(t.Context(), "ns", "y", DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	expect(t, w, apiv1.EventType_DELETED, "y", 0)
}

func TestWatchEndsWithContext(t *testing.T) {
	t.Parallel()
	s := vmStore(t)
	ctx, cancel := context.WithCancel(t.Context())
	w, err := s.Watch(ctx, WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	expect(t, w, apiv1.EventType_SYNCED, "", 0)
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

// A consumer that stops reading holds the watch back rather than losing
// events.
func TestWatchSlowConsumer(t *testing.T) {
	t.Parallel()
	s := vmStore(t)
	w, err := s.Watch(t.Context(), WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	writes := writeSequence(t, s, 3*watchBuffer)
	expect(t, w, apiv1.EventType_SYNCED, "", 0)
	for _, want := range writes {
		expect(t, w, want.typ, want.name, want.rev)
	}
}

func TestWatchBrokenSendsError(t *testing.T) {
	t.Parallel()
	srv := storetest.NewServer(t)
	s := vmStoreWith(t, srv.Client())
	w, err := s.Watch(t.Context(), WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	expect(t, w, apiv1.EventType_SYNCED, "", 0)
	srv.Close()
	e := next(t, w)
	if e.Err == nil {
		t.Fatalf("got %v after the server stopped, want an error", e)
	}
	if _, ok := <-w; ok {
		t.Fatal("channel open after the error event")
	}
	t.Logf("error event: %v", e.Err)
}
