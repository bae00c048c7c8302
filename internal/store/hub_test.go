package store_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
	"github.com/virtplane/terraform-provider-virtplane/internal/store/storetest"
)

// follow applies a watch's events to a map of name → resource version
// until SYNCED has passed and the map holds the state at rev.
func follow(t *testing.T, ch <-chan store.Event[*apiv1.VirtualMachine], seen map[string]int64, until int64) {
	t.Helper()
	last := int64(0)
	for last < until {
		e := storetest.Next(t, ch)
		switch e.Type {
		case apiv1.EventType_ADDED, apiv1.EventType_MODIFIED:
			seen[e.Object.Metadata.Name] = e.Object.Metadata.ResourceVersion
		case apiv1.EventType_DELETED:
			delete(seen, e.Object.Metadata.Name)
		}
		if e.Revision < last && e.Type != apiv1.EventType_ADDED {
			t.Fatalf("event %v at revision %d after %d", e.Type, e.Revision, last)
		}
		last = max(last, e.Revision)
	}
}

// listed is the name → resource version map of a list.
func listed(t *testing.T, s store.Store[*apiv1.VirtualMachine], opts store.ListOptions) map[string]int64 {
	t.Helper()
	items, _, err := s.List(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]int64{}
	for _, vm := range items {
		m[vm.Metadata.Name] = vm.Metadata.ResourceVersion
	}
	return m
}

// Watches pinned to a node and watches of everything share the store's
// etcd watch: each one ends up with exactly what a list of its selection
// says, while objects move between nodes, change and go.
func TestSharedWatchesSeeTheirOwn(t *testing.T) {
	t.Parallel()
	s := vmStoreWith(t, storetest.Client(t))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	node := func(i int) string { return fmt.Sprintf("n%d", i%4) }
	sels := []store.ListOptions{{}, {Namespace: "ns"}, {LabelSelector: "app=web"}}
	for i := range 4 {
		sels = append(sels, store.ListOptions{LabelSelector: apiv1.LabelNodeName + "=" + node(i)})
	}
	var chans []<-chan store.Event[*apiv1.VirtualMachine]
	seen := make([]map[string]int64, len(sels))
	for i, o := range sels {
		ch, err := s.Watch(ctx, store.WatchOptions{ListOptions: o})
		if err != nil {
			t.Fatal(err)
		}
		chans, seen[i] = append(chans, ch), map[string]int64{}
	}
	for i := range 24 {
		ns := []string{"ns", "other"}[i%2]
		storetest.MustCreate(t, s, storetest.NewVM(ns, fmt.Sprintf("vm-%02d", i), map[string]string{apiv1.LabelNodeName: node(i), "app": "web"}))
	}
	for i := range 24 {
		ns := []string{"ns", "other"}[i%2]
		name := fmt.Sprintf("vm-%02d", i)
		switch i % 3 {
		case 0: // moves to another node
			_, err := s.GuaranteedUpdate(t.Context(), ns, name, func(vm *apiv1.VirtualMachine) (*apiv1.VirtualMachine, error) {
				vm.Metadata.Labels[apiv1.LabelNodeName] = node(i + 1)
				return vm, nil
			})
			if err != nil {
				t.Fatal(err)
			}
		case 1: // stops matching app=web
			_, err := s.GuaranteedUpdate(t.Context(), ns, name, func(vm *apiv1.VirtualMachine) (*apiv1.VirtualMachine, error) {
				vm.Metadata.Labels["app"] = "db"
				return vm, nil
			})
			if err != nil {
				t.Fatal(err)
			}
		case 2:
			if _, _, err := s.Delete(t.Context(), ns, name, store.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A last write per node that every watch sees one of, so that each
	// knows when it has caught up: its latest object.
	for i := range 4 {
		storetest.MustCreate(t, s, storetest.NewVM("ns", "end-"+node(i), map[string]string{apiv1.LabelNodeName: node(i), "app": "web"}))
	}
	for i, o := range sels {
		want := listed(t, s, o)
		until := slices.Max(slices.Collect(maps.Values(want)))
		follow(t, chans[i], seen[i], until)
		if !maps.Equal(seen[i], want) {
			t.Errorf("watch %+v ended with %v, want %v", o, seen[i], want)
		}
	}
}

// A watch that falls behind the hub leaves it for an etcd watch of its
// own and loses nothing; the others are not held up by it.
func TestSlowSharedWatchLeavesWithoutLoss(t *testing.T) {
	defer store.SetHubQueue(5)()
	s := vmStoreWith(t, storetest.Client(t))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	slow, err := s.Watch(ctx, store.WatchOptions{ListOptions: store.ListOptions{Namespace: "ns"}})
	if err != nil {
		t.Fatal(err)
	}
	fast, err := s.Watch(ctx, store.WatchOptions{ListOptions: store.ListOptions{Namespace: "ns"}})
	if err != nil {
		t.Fatal(err)
	}
	storetest.Expect(t, slow, apiv1.EventType_SYNCED, "", 0)
	storetest.Expect(t, fast, apiv1.EventType_SYNCED, "", 0)
	// More writes than the slow watch's channel and hub queue hold while
	// nobody reads it.
	const n = 300
	var revs []int64
	for i := range n {
		vm := storetest.MustCreate(t, s, storetest.NewVM("ns", fmt.Sprintf("vm-%03d", i), nil))
		revs = append(revs, vm.Metadata.ResourceVersion)
		if e := storetest.Next(t, fast); e.Revision != vm.Metadata.ResourceVersion {
			t.Fatalf("fast watch: event at %d, want %d", e.Revision, vm.Metadata.ResourceVersion)
		}
	}
	for i, rev := range revs {
		e := storetest.Next(t, slow)
		if e.Type != apiv1.EventType_ADDED || e.Revision != rev {
			t.Fatalf("slow watch event %d: %v at %d, want ADDED at %d", i, e.Type, e.Revision, rev)
		}
	}
}
