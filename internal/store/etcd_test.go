package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/store/storetest"
)

func TestCreateGet(t *testing.T) {
	t.Parallel()
	s := vmStore(t)
	in := newVM("ns", "a", map[string]string{"app": "web"})
	in.Metadata.ResourceVersion = 99 // ignored
	out := mustCreate(t, s, in)

	md := out.Metadata
	if md.Uid == "" || md.Generation != 1 || md.ResourceVersion <= 0 || !md.CreationTimestamp.AsTime().Equal(testNow) {
		t.Errorf("created metadata %v: want uid, generation 1, resource version, creation timestamp %v", md, testNow)
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

	kept := newVM("ns", "b", nil)
	kept.Metadata.Generation = 7
	if out := mustCreate(t, s, kept); out.Metadata.Generation != 7 {
		t.Errorf("generation %d, want 7 kept", out.Metadata.Generation)
	}
}

func TestCreateAlreadyExists(t *testing.T) {
	t.Parallel()
	s := vmStore(t)
	mustCreate(t, s, newVM("ns", "a", nil))
	_, err := s.Create(t.Context(), newVM("ns", "a", nil))
	if !errors.Is(err, ErrAlreadyExists) {
		t.Fatalf("second Create: %v, want ErrAlreadyExists", err)
	}
	if want := `virtualmachine "ns/a": already exists`; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
}

func TestInvalidNames(t *testing.T) {
	t.Parallel()
	vms := vmStore(t)
	nodes := New(storetest.Client(t), Nodes, testOptions(t))
	ctx := t.Context()
	for name, err := range map[string]error{
		"no metadata":        func() error { _, err := vms.Create(ctx, &apiv1.VirtualMachine{}); return err }(),
		"no name":            func() error { _, err := vms.Create(ctx, newVM("ns", "", nil)); return err }(),
		"no namespace":       func() error { _, err := vms.Create(ctx, newVM("", "a", nil)); return err }(),
		"slash in name":      func() error { _, err := vms.Create(ctx, newVM("ns", "a/b", nil)); return err }(),
		"slash in namespace": func() error { _, err := vms.Get(ctx, "n/s", "a"); return err }(),
		"node in namespace": func() error {
			_, err := nodes.Create(ctx, &apiv1.Node{Metadata: &apiv1.ObjectMeta{Namespace: "ns", Name: "n"}})
			return err
		}(),
		"list nodes in namespace": func() error { _, _, err := nodes.List(ctx, ListOptions{Namespace: "ns"}); return err }(),
		"bad selector":            func() error { _, _, err := vms.List(ctx, ListOptions{LabelSelector: "a in (("}); return err }(),
		"update without rv":       func() error { _, err := vms.Update(ctx, newVM("ns", "a", nil)); return err }(),
		"watch bad selector": func() error {
			_, err := vms.Watch(ctx, WatchOptions{ListOptions: ListOptions{LabelSelector: "=="}})
			return err
		}(),
	} {
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}

func TestGetNotFound(t *testing.T) {
	t.Parallel()
	_, err := vmStore(t).Get(t.Context(), "ns", "missing")
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), `"ns/missing"`) {
		t.Fatalf("Get: %v, want ErrNotFound naming ns/missing", err)
	}
}

func TestList(t *testing.T) {
	t.Parallel()
	s := vmStore(t)
	var last int64
	for _, vm := range []*apiv1.VirtualMachine{
		newVM("ns", "web-2", map[string]string{"app": "web"}),
		newVM("ns", "web-1", map[string]string{"app": "web", "tier": "front"}),
		newVM("ns", "db", map[string]string{"app": "db"}),
		newVM("ns-x", "web", map[string]string{"app": "web"}), // key sorts before ns/...
		newVM("other", "plain", nil),
	} {
		last = mustCreate(t, s, vm).Metadata.ResourceVersion
	}
	for _, tc := range []struct {
		opts ListOptions
		want []string
	}{
		{ListOptions{}, []string{"ns/db", "ns/web-1", "ns/web-2", "ns-x/web", "other/plain"}},
		{ListOptions{Namespace: "ns"}, []string{"ns/db", "ns/web-1", "ns/web-2"}},
		{ListOptions{Namespace: "n"}, nil},
		{ListOptions{LabelSelector: "app=web"}, []string{"ns/web-1", "ns/web-2", "ns-x/web"}},
		{ListOptions{Namespace: "ns", LabelSelector: "app in (web,db),tier!=front"}, []string{"ns/db", "ns/web-2"}},
		{ListOptions{LabelSelector: "!app"}, []string{"other/plain"}},
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

func TestClusterScoped(t *testing.T) {
	t.Parallel()
	s := New(storetest.Client(t), Nodes, testOptions(t))
	for _, n := range []string{"b", "a"} {
		if _, err := s.Create(t.Context(), &apiv1.Node{Metadata: &apiv1.ObjectMeta{Name: n}}); err != nil {
			t.Fatal(err)
		}
	}
	got, _, err := s.List(t.Context(), ListOptions{})
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

func TestUpdateConflict(t *testing.T) {
	t.Parallel()
	s := vmStore(t)
	created := mustCreate(t, s, newVM("ns", "a", nil))

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
	if !errors.Is(err, ErrConflict) {
		t.Fatalf("update from a stale read: %v, want ErrConflict", err)
	}
	got, _ := s.Get(t.Context(), "ns", "a")
	if got.Spec.RunStrategy != "Always" {
		t.Errorf("stored run strategy %q after a failed update", got.Spec.RunStrategy)
	}

	missing := newVM("ns", "missing", nil)
	missing.Metadata.ResourceVersion = updated.Metadata.ResourceVersion
	if _, err := s.Update(t.Context(), missing); !errors.Is(err, ErrNotFound) {
		t.Errorf("update of a missing object: %v, want ErrNotFound", err)
	}
}

func TestGuaranteedUpdateConcurrent(t *testing.T) {
	t.Parallel()
	s := vmStore(t)
	mustCreate(t, s, newVM("ns", "counter", map[string]string{"n": "0"}))
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

// countingKV counts the requests a store makes.
type countingKV struct {
	clientv3.KV
	gets, txns atomic.Int32
}

func (c *countingKV) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	c.gets.Add(1)
	return c.KV.Get(ctx, key, opts...)
}

func (c *countingKV) Txn(ctx context.Context) clientv3.Txn {
	c.txns.Add(1)
	return c.KV.Txn(ctx)
}

// A conflicting write makes GuaranteedUpdate retry with the object its
// failed transaction read, not with another Get.
func TestGuaranteedUpdateRetryReusesRead(t *testing.T) {
	t.Parallel()
	shared := storetest.Client(t)
	kv := &countingKV{KV: shared.KV}
	counted := clientv3.NewCtxClient(t.Context())
	counted.KV = kv
	opts := testOptions(t)
	s, other := New(counted, VirtualMachines, opts), New(shared, VirtualMachines, opts)
	mustCreate(t, other, newVM("ns", "a", nil))

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
	if g, x := kv.gets.Load(), kv.txns.Load(); g != 1 || x != 2 {
		t.Errorf("%d gets and %d txns, want 1 and 2", g, x)
	}
}

func TestGuaranteedUpdateNoop(t *testing.T) {
	t.Parallel()
	// A kind of its own keeps other tests out of the write counters.
	res := VirtualMachines
	res.Kind = "NoopTestMachine"
	s := New(storetest.Client(t), res, testOptions(t))
	// Counters are per process: count from here (-count=N reruns).
	writes := func(op string) func() float64 {
		c := writesTotal.WithLabelValues(res.Kind, op)
		base := counter(c)
		return func() float64 { return counter(c) - base }
	}
	creates, updates, deletes := writes("create"), writes("update"), writes("delete")

	created, err := s.Create(t.Context(), newVM("ns", "a", map[string]string{"k": "v"}))
	if err != nil {
		t.Fatal(err)
	}
	if got := creates(); got != 1 {
		t.Errorf("create writes = %v, want 1", got)
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
	if got := updates(); got != 0 {
		t.Errorf("update writes after a no-op = %v, want 0", got)
	}

	if _, err := s.GuaranteedUpdate(t.Context(), "ns", "a", func(vm *apiv1.VirtualMachine) (*apiv1.VirtualMachine, error) {
		vm.Metadata.Labels["k"] = "w"
		return vm, nil
	}); err != nil {
		t.Fatal(err)
	}
	if got := updates(); got != 1 {
		t.Errorf("update writes = %v, want 1", got)
	}

	boom := errors.New("boom")
	_, err = s.GuaranteedUpdate(t.Context(), "ns", "a", func(*apiv1.VirtualMachine) (*apiv1.VirtualMachine, error) { return nil, boom })
	if !errors.Is(err, boom) {
		t.Errorf("fn error: got %v", err)
	}
	_, err = s.GuaranteedUpdate(t.Context(), "ns", "a", func(vm *apiv1.VirtualMachine) (*apiv1.VirtualMachine, error) {
		vm.Metadata.Name = "b"
		return vm, nil
	})
	if !errors.Is(err, ErrInvalid) {
		t.Errorf("renaming fn: %v, want ErrInvalid", err)
	}
	_, err = s.GuaranteedUpdate(t.Context(), "ns", "missing", func(vm *apiv1.VirtualMachine) (*apiv1.VirtualMachine, error) { return vm, nil })
	if !errors.Is(err, ErrNotFound) {
		t.Errorf("missing object: %v, want ErrNotFound", err)
	}
	if _, _, err := s.Delete(t.Context(), "ns", "a", DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := deletes(); got != 1 {
		t.Errorf("delete writes = %v, want 1", got)
	}
	if got := updates(); got != 1 {
		t.Errorf("update writes after the failed calls = %v, want 1", got)
	}
}

func TestFinalizers(t *testing.T) {
	t.Parallel()
	s := vmStore(t)
	created := mustCreate(t, s, newVM("ns", "a", nil, "virtplane.io/cleanup"))
	w, err := s.Watch(t.Context(), WatchOptions{ResourceVersion: created.Metadata.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}

	marked, deleted, err := s.Delete(t.Context(), "ns", "a", DeleteOptions{})
	if err != nil || deleted {
		t.Fatalf("Delete with finalizers: deleted=%v err=%v", deleted, err)
	}
	if !marked.Metadata.DeletionTimestamp.AsTime().Equal(testNow) {
		t.Errorf("deletion timestamp %v, want %v", marked.Metadata.DeletionTimestamp, testNow)
	}
	got, err := s.Get(t.Context(), "ns", "a")
	if err != nil {
		t.Fatalf("object with finalizers gone after Delete: %v", err)
	}
	if !proto.Equal(got, marked) {
		t.Errorf("Get = %v, want %v", got, marked)
	}
	expect(t, w, apiv1.EventType_MODIFIED, "a", marked.Metadata.ResourceVersion)

	// Asking again writes nothing and keeps the first timestamp.
	again, deleted, err := s.Delete(t.Context(), "ns", "a", DeleteOptions{})
	if err != nil || deleted || !proto.Equal(again, marked) {
		t.Fatalf("second Delete = %v, %v, %v; want the marked object unchanged", again, deleted, err)
	}

	marked.Metadata.Finalizers = nil
	last, err := s.Update(t.Context(), marked)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(t.Context(), "ns", "a"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get after the last finalizer was removed: %v, want ErrNotFound", err)
	}
	e := expect(t, w, apiv1.EventType_DELETED, "a", last.Metadata.ResourceVersion)
	if e.Object.Metadata.DeletionTimestamp == nil {
		t.Error("DELETED event lacks the last stored state")
	}
}

func TestDeletePreconditions(t *testing.T) {
	t.Parallel()
	s := vmStore(t)
	created := mustCreate(t, s, newVM("ns", "a", nil))
	md := created.Metadata
	for _, opts := range []DeleteOptions{
		{UID: "other"},
		{ResourceVersion: md.ResourceVersion + 100},
		{UID: md.Uid, ResourceVersion: md.ResourceVersion - 1},
	} {
		if _, _, err := s.Delete(t.Context(), "ns", "a", opts); !errors.Is(err, ErrConflict) {
			t.Errorf("Delete(%+v): %v, want ErrConflict", opts, err)
		}
	}
	last, deleted, err := s.Delete(t.Context(), "ns", "a", DeleteOptions{UID: md.Uid, ResourceVersion: md.ResourceVersion})
	if err != nil || !deleted {
		t.Fatalf("Delete: deleted=%v err=%v", deleted, err)
	}
	if last.Metadata.Uid != md.Uid || last.Metadata.ResourceVersion <= md.ResourceVersion {
		t.Errorf("Delete returned %v; want the last state at the deletion revision", last.Metadata)
	}
	if _, _, err := s.Delete(t.Context(), "ns", "a", DeleteOptions{}); !errors.Is(err, ErrNotFound) {
		t.Errorf("second Delete: %v, want ErrNotFound", err)
	}
}

func TestRegisterMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	for range 2 {
		if err := RegisterMetrics(reg); err != nil {
			t.Fatal(err)
		}
	}
	s := New(storetest.Client(t), VirtualMachines, testOptions(t))
	if _, err := s.Get(t.Context(), "ns", "x"); !errors.Is(err, ErrNotFound) {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, mf := range mfs {
		got = append(got, mf.GetName())
	}
	for _, want := range []string{"virtplane_store_request_duration_seconds", "virtplane_store_writes_total"} {
		if !slices.Contains(got, want) {
			t.Errorf("metric %s not gathered; have %v", want, got)
		}
	}
}

func TestKeyLayout(t *testing.T) {
	t.Parallel()
	c := storetest.Client(t)
	name := fmt.Sprintf("layout-%d", time.Now().UnixNano())
	vm, err := New(c, VirtualMachines, Options{}).Create(t.Context(), newVM("ns", name, nil))
	if err != nil {
		t.Fatal(err)
	}
	node, err := New(c, Nodes, Options{Prefix: "/custom/"}).Create(t.Context(), &apiv1.Node{Metadata: &apiv1.ObjectMeta{Name: name}})
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]int64{
		"/virtplane/registry/virtualmachines/ns/" + name: vm.Metadata.ResourceVersion,
		"/custom/nodes/" + name:                          node.Metadata.ResourceVersion,
	} {
		resp, err := c.Get(t.Context(), key)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Kvs) != 1 || resp.Kvs[0].ModRevision != want {
			t.Fatalf("%s: %v, want one key at revision %d", key, resp.Kvs, want)
		}
		stored := &apiv1.VirtualMachine{} // the metadata field is the same in every kind
		if err := proto.Unmarshal(resp.Kvs[0].Value, stored); err != nil {
			t.Fatal(err)
		}
		if stored.Metadata.GetName() != name || stored.Metadata.ResourceVersion != 0 {
			t.Errorf("%s stores metadata %v; want the name and no resource version", key, stored.Metadata)
		}
	}
}
