package storetest

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// Backend is one store implementation under the conformance suite: stores
// of a namespaced and a cluster-scoped resource that share one revision
// counter, as stores on one etcd do.
type Backend struct {
	VMs   store.Store[*apiv1.VirtualMachine]
	Nodes store.Store[*apiv1.Node]
	// Compact discards the history before rev, as etcd's Compact does.
	Compact func(ctx context.Context, rev int64) error
}

// BackendOptions are what a test asks of its backend.
type BackendOptions struct {
	// Clock stamps creation and deletion timestamps.
	Clock func() time.Time
	// Isolated asks for a backend that shares no history with other
	// tests, because the test compacts it (etcd compacts a whole server).
	Isolated bool
}

// NewBackend returns an empty backend for one test; it is stopped when
// the test ends.
type NewBackend func(t *testing.T, opts BackendOptions) Backend

// RunConformance runs the behaviour every store backend must share
// against newBackend, each test on a backend of its own and in parallel.
// Call it from a test of the backend's package:
//
//	func TestConformance(t *testing.T) { storetest.RunConformance(t, newBackend) }
func RunConformance(t *testing.T, newBackend NewBackend) {
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, nb NewBackend)
	}{
		{"CreateGet", testCreateGet},
		{"CreateAlreadyExists", testCreateAlreadyExists},
		{"InvalidNames", testInvalidNames},
		{"GetNotFound", testGetNotFound},
		{"List", testList},
		{"ClusterScoped", testClusterScoped},
		{"UpdateConflict", testUpdateConflict},
		{"GuaranteedUpdateConcurrent", testGuaranteedUpdateConcurrent},
		{"GuaranteedUpdateRetriesWithLatest", testGuaranteedUpdateRetriesWithLatest},
		{"GuaranteedUpdateChecks", testGuaranteedUpdateChecks},
		{"GuaranteedUpdateComparesWhatFnSaw", testGuaranteedUpdateComparesWhatFnSaw},
		{"Finalizers", testFinalizers},
		{"DeletePreconditions", testDeletePreconditions},
		{"WatchInitialList", testWatchInitialList},
		{"WatchOrder", testWatchOrder},
		{"WatchResume", testWatchResume},
		{"WatchAfterCompaction", testWatchAfterCompaction},
		{"WatchSelectorTransitions", testWatchSelectorTransitions},
		{"WatchEndsWithContext", testWatchEndsWithContext},
		{"WatchSlowConsumer", testWatchSlowConsumer},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, newBackend)
		})
	}
}

// Now is the clock of the suite's backends.
var Now = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func backend(t *testing.T, nb NewBackend) Backend {
	return nb(t, BackendOptions{Clock: func() time.Time { return Now }})
}

// NewVM is a Halted VM with a copy of labels.
func NewVM(ns, name string, labels map[string]string, finalizers ...string) *apiv1.VirtualMachine {
	return &apiv1.VirtualMachine{
		Metadata: &apiv1.ObjectMeta{Namespace: ns, Name: name, Labels: maps.Clone(labels), Finalizers: finalizers},
		Spec:     &apiv1.VirtualMachineSpec{RunStrategy: "Halted"},
	}
}

// MustCreate creates vm in s, failing the test on error.
func MustCreate(t *testing.T, s store.Store[*apiv1.VirtualMachine], vm *apiv1.VirtualMachine) *apiv1.VirtualMachine {
	t.Helper()
	out, err := s.Create(t.Context(), vm)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func names(vms []*apiv1.VirtualMachine) []string {
	var out []string
	for _, vm := range vms {
		out = append(out, vm.Metadata.Namespace+"/"+vm.Metadata.Name)
	}
	return out
}

func testCreateGet(t *testing.T, nb NewBackend) {
	s := backend(t, nb).VMs
	in := NewVM("ns", "a", map[string]string{"app": "web"})
	in.Metadata.ResourceVersion = 99 // ignored
	out := MustCreate(t, s, in)

	md := out.Metadata
	if md.Uid == "" || md.Generation != 1 || md.ResourceVersion <= 0 || !md.CreationTimestamp.AsTime().Equal(Now) {
		t.Errorf("created metadata %v: want uid, generation 1, resource version, creation timestamp %v", md, Now)
	}
	if in.Metadata.Uid != "" {
		t.Error("Create modified its argument")
	}
	got, err := s.Get(t.Context(), "ns", "a")
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(got, out) {
		t.Errorf("Get = %v, want %v", got, out)
	}

	kept := NewVM("ns", "b", nil)
	kept.Metadata.Generation = 7
	if out := MustCreate(t, s, kept); out.Metadata.Generation != 7 {
		t.Errorf("generation %d, want 7 kept", out.Metadata.Generation)
	}
}

func testCreateAlreadyExists(t *testing.T, nb NewBackend) {
	s := backend(t, nb).VMs
	MustCreate(t, s, NewVM("ns", "a", nil))
	_, err := s.Create(t.Context(), NewVM("ns", "a", nil))
	if !errors.Is(err, store.ErrAlreadyExists) {
		t.Fatalf("second Create: %v, want ErrAlreadyExists", err)
	}
	if want := `virtualmachine "ns/a": already exists`; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
}

func testInvalidNames(t *testing.T, nb NewBackend) {
	b := backend(t, nb)
	vms, nodes := b.VMs, b.Nodes
	ctx := t.Context()
	for name, err := range map[string]error{
		"no metadata":        func() error { _, err := vms.Create(ctx, &apiv1.VirtualMachine{}); return err }(),
		"no name":            func() error { _, err := vms.Create(ctx, NewVM("ns", "", nil)); return err }(),
		"no namespace":       func() error { _, err := vms.Create(ctx, NewVM("", "a", nil)); return err }(),
		"slash in name":      func() error { _, err := vms.Create(ctx, NewVM("ns", "a/b", nil)); return err }(),
		"slash in namespace": func() error { _, err := vms.Get(ctx, "n/s", "a"); return err }(),
		"node in namespace": func() error {
			_, err := nodes.Create(ctx, &apiv1.Node{Metadata: &apiv1.ObjectMeta{Namespace: "ns", Name: "n"}})
			return err
		}(),
		"list nodes in namespace": func() error { _, _, err := nodes.List(ctx, store.ListOptions{Namespace: "ns"}); return err }(),
		"bad selector":            func() error { _, _, err := vms.List(ctx, store.ListOptions{LabelSelector: "a in (("}); return err }(),
		"update without rv":       func() error { _, err := vms.Update(ctx, NewVM("ns", "a", nil)); return err }(),
		"watch bad selector": func() error {
			_, err := vms.Watch(ctx, store.WatchOptions{ListOptions: store.ListOptions{LabelSelector: "=="}})
			return err
		}(),
		"watch negative rv": func() error { _, err := vms.Watch(ctx, store.WatchOptions{ResourceVersion: -1}); return err }(),
	} {
		if !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}

func testGetNotFound(t *testing.T, nb NewBackend) {
	_, err := backend(t, nb).VMs.Get(t.Context(), "ns", "missing")
	if !errors.Is(err, store.ErrNotFound) || !strings.Contains(err.Error(), `"ns/missing"`) {
		t.Fatalf("Get: %v, want ErrNotFound naming ns/missing", err)
	}
}

func testList(t *testing.T, nb NewBackend) {
	s := backend(t, nb).VMs
	var last int64
	for _, vm := range []*apiv1.VirtualMachine{
		NewVM("ns", "web-2", map[string]string{"app": "web"}),
		NewVM("ns", "web-1", map[string]string{"app": "web", "tier": "front"}),
		NewVM("ns", "db", map[string]string{"app": "db"}),
		NewVM("ns-x", "web", map[string]string{"app": "web"}), // etcd key sorts before ns/...
		NewVM("other", "plain", nil),
	} {
		last = MustCreate(t, s, vm).Metadata.ResourceVersion
	}
	for _, tc := range []struct {
		opts store.ListOptions
		want []string
	}{
		{store.ListOptions{}, []string{"ns/db", "ns/web-1", "ns/web-2", "ns-x/web", "other/plain"}},
		{store.ListOptions{Namespace: "ns"}, []string{"ns/db", "ns/web-1", "ns/web-2"}},
		{store.ListOptions{Namespace: "n"}, nil},
		{store.ListOptions{LabelSelector: "app=web"}, []string{"ns/web-1", "ns/web-2", "ns-x/web"}},
		{store.ListOptions{Namespace: "ns", LabelSelector: "app in (web,db),tier!=front"}, []string{"ns/db", "ns/web-2"}},
		{store.ListOptions{LabelSelector: "!app"}, []string{"other/plain"}},
	} {
		got, rev, err := s.List(t.Context(), tc.opts)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(names(got), tc.want) {
			t.Errorf("List(%+v) = %v, want %v", tc.opts, names(got), tc.want)
		}
		if rev < last {
			t.Errorf("List revision %d before last write %d", rev, last)
		}
		for _, vm := range got {
			if vm.Metadata.ResourceVersion <= 0 {
				t.Errorf("%s has no resource version", vm.Metadata.Name)
			}
		}
	}
}

func testClusterScoped(t *testing.T, nb NewBackend) {
	s := backend(t, nb).Nodes
	for _, n := range []string{"b", "a"} {
		if _, err := s.Create(t.Context(), &apiv1.Node{Metadata: &apiv1.ObjectMeta{Name: n}}); err != nil {
			t.Fatal(err)
		}
	}
	got, _, err := s.List(t.Context(), store.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Metadata.Name != "a" || got[1].Metadata.Name != "b" {
		t.Errorf("List = %v", got)
	}
	if _, err := s.Get(t.Context(), "", "a"); err != nil {
		t.Error(err)
	}
}

func testUpdateConflict(t *testing.T, nb NewBackend) {
	s := backend(t, nb).VMs
	created := MustCreate(t, s, NewVM("ns", "a", nil))

	first, second := proto.Clone(created).(*apiv1.VirtualMachine), proto.Clone(created).(*apiv1.VirtualMachine)
	first.Spec.RunStrategy = "Always"
	updated, err := s.Update(t.Context(), first)
	if err != nil {
		t.Fatal(err)
	}
	if updated.Metadata.ResourceVersion <= created.Metadata.ResourceVersion || updated.Spec.RunStrategy != "Always" {
		t.Errorf("Update returned %v", updated)
	}
	second.Spec.RunStrategy = "Manual"
	_, err = s.Update(t.Context(), second)
	if !errors.Is(err, store.ErrConflict) {
		t.Fatalf("update from a stale read: %v, want ErrConflict", err)
	}
	got, _ := s.Get(t.Context(), "ns", "a")
	if got.Spec.RunStrategy != "Always" {
		t.Errorf("stored run strategy %q after a failed update", got.Spec.RunStrategy)
	}

	missing := NewVM("ns", "missing", nil)
	missing.Metadata.ResourceVersion = updated.Metadata.ResourceVersion
	if _, err := s.Update(t.Context(), missing); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("update of a missing object: %v, want ErrNotFound", err)
	}
}

func testGuaranteedUpdateConcurrent(t *testing.T, nb NewBackend) {
	s := backend(t, nb).VMs
	MustCreate(t, s, NewVM("ns", "counter", map[string]string{"n": "0"}))
	const writers = 20
	var calls atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for range writers {
		wg.Go(func() {
			_, err := s.GuaranteedUpdate(t.Context(), "ns", "counter", func(vm *apiv1.VirtualMachine) (*apiv1.VirtualMachine, error) {
				calls.Add(1)
				n, err := strconv.Atoi(vm.Metadata.Labels["n"])
				if err != nil {
					return nil, err
				}
				vm.Metadata.Labels["n"] = strconv.Itoa(n + 1)
				return vm, nil
			})
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.Get(t.Context(), "ns", "counter")
	if err != nil {
		t.Fatal(err)
	}
	if n := got.Metadata.Labels["n"]; n != strconv.Itoa(writers) {
		t.Errorf("counter = %s, want %d", n, writers)
	}
	t.Logf("%d writers needed %d attempts", writers, calls.Load())
}

func testGuaranteedUpdateRetriesWithLatest(t *testing.T, nb NewBackend) {
	s := backend(t, nb).VMs
	MustCreate(t, s, NewVM("ns", "a", nil))
	GuaranteedUpdateRace(t, s, s)
}

// GuaranteedUpdateRace checks that a write through other between s's
// GuaranteedUpdate read and its write of ns/a (a Halted VM) makes s call
// fn again with the latest object, and that neither write is lost. Both
// stores must be of the same objects.
func GuaranteedUpdateRace(t *testing.T, s, other store.Store[*apiv1.VirtualMachine]) {
	t.Helper()
	var seen []string
	out, err := s.GuaranteedUpdate(t.Context(), "ns", "a", func(vm *apiv1.VirtualMachine) (*apiv1.VirtualMachine, error) {
		seen = append(seen, vm.Spec.RunStrategy)
		if len(seen) == 1 {
			// Someone else writes between our read and our write.
			if _, err := other.GuaranteedUpdate(t.Context(), "ns", "a", func(vm *apiv1.VirtualMachine) (*apiv1.VirtualMachine, error) {
				vm.Spec.RunStrategy = "Manual"
				return vm, nil
			}); err != nil {
				return nil, err
			}
		}
		vm.Metadata.Labels = map[string]string{"mine": "yes"}
		return vm, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"Halted", "Manual"}; !slices.Equal(seen, want) {
		t.Errorf("fn saw run strategies %v, want %v", seen, want)
	}
	if out.Spec.RunStrategy != "Manual" || out.Metadata.Labels["mine"] != "yes" {
		t.Errorf("result %v lost a write", out)
	}
}

// GuaranteedUpdate writes nothing when fn changes nothing, and refuses an
// fn that fails or renames the object.
func testGuaranteedUpdateChecks(t *testing.T, nb NewBackend) {
	s := backend(t, nb).VMs
	created := MustCreate(t, s, NewVM("ns", "a", map[string]string{"k": "v"}))
	w, err := s.Watch(t.Context(), store.WatchOptions{ResourceVersion: created.Metadata.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	out, err := s.GuaranteedUpdate(t.Context(), "ns", "a", func(vm *apiv1.VirtualMachine) (*apiv1.VirtualMachine, error) {
		vm.Metadata.Labels["k"] = "v" // same value
		return vm, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(out, created) {
		t.Errorf("no-op GuaranteedUpdate returned %v, want %v", out, created)
	}

	boom := errors.New("boom")
	_, err = s.GuaranteedUpdate(t.Context(), "ns", "a", func(*apiv1.VirtualMachine) (*apiv1.VirtualMachine, error) { return nil, boom })
	if !errors.Is(err, boom) {
		t.Errorf("fn error: got %v", err)
	}
	for what, rename := range map[string]func(*apiv1.ObjectMeta){
		"name":      func(md *apiv1.ObjectMeta) { md.Name = "b" },
		"namespace": func(md *apiv1.ObjectMeta) { md.Namespace = "other" },
	} {
		_, err = s.GuaranteedUpdate(t.Context(), "ns", "a", func(vm *apiv1.VirtualMachine) (*apiv1.VirtualMachine, error) {
			rename(vm.Metadata)
			return vm, nil
		})
		if !errors.Is(err, store.ErrInvalid) {
			t.Errorf("fn changing the %s: %v, want ErrInvalid", what, err)
		}
	}
	_, err = s.GuaranteedUpdate(t.Context(), "ns", "missing", func(vm *apiv1.VirtualMachine) (*apiv1.VirtualMachine, error) { return vm, nil })
	if !errors.Is(err, store.ErrNotFound) {
		t.Errorf("missing object: %v, want ErrNotFound", err)
	}

	// None of that wrote: the next event is the next real write.
	changed, err := s.GuaranteedUpdate(t.Context(), "ns", "a", func(vm *apiv1.VirtualMachine) (*apiv1.VirtualMachine, error) {
		vm.Metadata.Labels["k"] = "w"
		return vm, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	Expect(t, w, apiv1.EventType_MODIFIED, "a", changed.Metadata.ResourceVersion)
	if got, _ := s.Get(t.Context(), "ns", "b"); got != nil {
		t.Errorf("renaming fn stored %v", got)
	}
}

// GuaranteedUpdate's compare-and-swap is against the version fn was
// given, whatever fn sets as metadata.resource_version: fn can neither
// make the write invalid (0) or fail (a version that never was), nor skip
// the check by naming a newer version than it saw.
func testGuaranteedUpdateComparesWhatFnSaw(t *testing.T, nb NewBackend) {
	s := backend(t, nb).VMs
	MustCreate(t, s, NewVM("ns", "a", nil))
	for _, rv := range []int64{0, 1 << 40} {
		calls := 0
		out, err := s.GuaranteedUpdate(t.Context(), "ns", "a", func(vm *apiv1.VirtualMachine) (*apiv1.VirtualMachine, error) {
			calls++
			vm.Metadata.ResourceVersion = rv
			vm.Metadata.Labels = map[string]string{"rv": strconv.FormatInt(rv, 10)}
			return vm, nil
		})
		if err != nil || calls != 1 || out.Metadata.Labels["rv"] != strconv.FormatInt(rv, 10) {
			t.Errorf("fn setting resource version %d: %v after %d calls (%v)", rv, err, calls, out.GetMetadata())
		}
	}

	var seen []string
	out, err := s.GuaranteedUpdate(t.Context(), "ns", "a", func(vm *apiv1.VirtualMachine) (*apiv1.VirtualMachine, error) {
		seen = append(seen, vm.Spec.RunStrategy)
		if len(seen) == 1 {
			other, err := s.GuaranteedUpdate(t.Context(), "ns", "a", func(vm *apiv1.VirtualMachine) (*apiv1.VirtualMachine, error) {
				vm.Spec.RunStrategy = "Manual"
				return vm, nil
			})
			if err != nil {
				return nil, err
			}
			// Claiming the newer version fn never saw must not let the
			// write overwrite it.
			vm.Metadata.ResourceVersion = other.Metadata.ResourceVersion
		}
		vm.Metadata.Labels = map[string]string{"mine": "yes"}
		return vm, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"Halted", "Manual"}; !slices.Equal(seen, want) || out.Spec.RunStrategy != "Manual" {
		t.Errorf("fn saw %v and wrote %q: a concurrent write was overwritten", seen, out.Spec.RunStrategy)
	}
}

func testFinalizers(t *testing.T, nb NewBackend) {
	s := backend(t, nb).VMs
	created := MustCreate(t, s, NewVM("ns", "a", nil, "virtplane.io/cleanup"))
	w, err := s.Watch(t.Context(), store.WatchOptions{ResourceVersion: created.Metadata.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}

	marked, deleted, err := s.Delete(t.Context(), "ns", "a", store.DeleteOptions{})
	if err != nil || deleted {
		t.Fatalf("Delete with finalizers: deleted=%v err=%v", deleted, err)
	}
	if !marked.Metadata.DeletionTimestamp.AsTime().Equal(Now) {
		t.Errorf("deletion timestamp %v, want %v", marked.Metadata.DeletionTimestamp, Now)
	}
	got, err := s.Get(t.Context(), "ns", "a")
	if err != nil {
		t.Fatalf("object with finalizers gone after Delete: %v", err)
	}
	if !proto.Equal(got, marked) {
		t.Errorf("Get = %v, want %v", got, marked)
	}
	Expect(t, w, apiv1.EventType_MODIFIED, "a", marked.Metadata.ResourceVersion)

	// Asking again writes nothing and keeps the first timestamp.
	again, deleted, err := s.Delete(t.Context(), "ns", "a", store.DeleteOptions{})
	if err != nil || deleted || !proto.Equal(again, marked) {
		t.Fatalf("second Delete = %v, %v, %v; want the marked object unchanged", again, deleted, err)
	}

	marked.Metadata.Finalizers = nil
	last, err := s.Update(t.Context(), marked)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(t.Context(), "ns", "a"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get after the last finalizer was removed: %v, want ErrNotFound", err)
	}
	e := Expect(t, w, apiv1.EventType_DELETED, "a", last.Metadata.ResourceVersion)
	if e.Object.Metadata.DeletionTimestamp == nil {
		t.Error("DELETED event lacks the last stored state")
	}
}

func testDeletePreconditions(t *testing.T, nb NewBackend) {
	s := backend(t, nb).VMs
	created := MustCreate(t, s, NewVM("ns", "a", nil))
	created.Spec.RunStrategy = "Always"
	updated, err := s.Update(t.Context(), created)
	if err != nil {
		t.Fatal(err)
	}
	md := updated.Metadata
	for _, opts := range []store.DeleteOptions{
		{UID: "other"},
		{ResourceVersion: md.ResourceVersion + 100},
		{UID: md.Uid, ResourceVersion: created.Metadata.ResourceVersion}, // an older version
	} {
		if _, _, err := s.Delete(t.Context(), "ns", "a", opts); !errors.Is(err, store.ErrConflict) {
			t.Errorf("Delete(%+v): %v, want ErrConflict", opts, err)
		}
	}
	last, deleted, err := s.Delete(t.Context(), "ns", "a", store.DeleteOptions{UID: md.Uid, ResourceVersion: md.ResourceVersion})
	if err != nil || !deleted {
		t.Fatalf("Delete: deleted=%v err=%v", deleted, err)
	}
	if last.Metadata.Uid != md.Uid || last.Metadata.ResourceVersion <= md.ResourceVersion {
		t.Errorf("Delete returned %v; want the last state at the deletion revision", last.Metadata)
	}
	if _, _, err := s.Delete(t.Context(), "ns", "a", store.DeleteOptions{}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("second Delete: %v, want ErrNotFound", err)
	}
}
