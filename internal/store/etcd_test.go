package store_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
	"github.com/virtplane/terraform-provider-virtplane/internal/store/storetest"
)

// What every backend does is in storetest.RunConformance
// (conformance_test.go); these tests are about the etcd store alone.

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
	s, other := store.New(counted, store.VirtualMachines, opts), store.New(shared, store.VirtualMachines, opts)
	storetest.MustCreate(t, other, storetest.NewVM("ns", "a", nil))

	storetest.GuaranteedUpdateRace(t, s, other)
	if g, x := kv.gets.Load(), kv.txns.Load(); g != 1 || x != 2 {
		t.Errorf("%d gets and %d txns, want 1 and 2", g, x)
	}
}

// The write counter counts transactions that wrote: none for a no-op or
// failed GuaranteedUpdate.
func TestWriteMetrics(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	if err := store.RegisterMetrics(reg); err != nil {
		t.Fatal(err)
	}
	// A kind of its own keeps other tests out of the write counters.
	res := store.VirtualMachines
	res.Kind = "NoopTestMachine"
	s := store.New(storetest.Client(t), res, testOptions(t))
	// Counters are per process: count from here (-count=N reruns).
	counter := func(op string) func() float64 {
		base := writes(t, reg, res.Kind, op)
		return func() float64 { return writes(t, reg, res.Kind, op) - base }
	}
	creates, updates, deletes := counter("create"), counter("update"), counter("delete")

	if _, err := s.Create(t.Context(), storetest.NewVM("ns", "a", map[string]string{"k": "v"})); err != nil {
		t.Fatal(err)
	}
	if got := creates(); got != 1 {
		t.Errorf("create writes = %v, want 1", got)
	}
	setK := func(v string) error {
		_, err := s.GuaranteedUpdate(t.Context(), "ns", "a", func(vm *apiv1.VirtualMachine) (*apiv1.VirtualMachine, error) {
			vm.Metadata.Labels["k"] = v
			return vm, nil
		})
		return err
	}
	if err := setK("v"); err != nil { // same value
		t.Fatal(err)
	}
	if got := updates(); got != 0 {
		t.Errorf("update writes after a no-op = %v, want 0", got)
	}
	if err := setK("w"); err != nil {
		t.Fatal(err)
	}
	if got := updates(); got != 1 {
		t.Errorf("update writes = %v, want 1", got)
	}

	boom := errors.New("boom")
	if _, err := s.GuaranteedUpdate(t.Context(), "ns", "a", func(*apiv1.VirtualMachine) (*apiv1.VirtualMachine, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Errorf("fn error: got %v", err)
	}
	if _, err := s.GuaranteedUpdate(t.Context(), "ns", "a", func(vm *apiv1.VirtualMachine) (*apiv1.VirtualMachine, error) {
		vm.Metadata.Name = "b"
		return vm, nil
	}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("renaming fn: %v, want ErrInvalid", err)
	}
	if _, _, err := s.Delete(t.Context(), "ns", "a", store.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := deletes(); got != 1 {
		t.Errorf("delete writes = %v, want 1", got)
	}
	if got := updates(); got != 1 {
		t.Errorf("update writes after the failed calls = %v, want 1", got)
	}
}

func TestRegisterMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	for range 2 {
		if err := store.RegisterMetrics(reg); err != nil {
			t.Fatal(err)
		}
	}
	s := store.New(storetest.Client(t), store.VirtualMachines, testOptions(t))
	if _, err := s.Get(t.Context(), "ns", "x"); !errors.Is(err, store.ErrNotFound) {
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
	vm, err := store.New(c, store.VirtualMachines, store.Options{}).Create(t.Context(), storetest.NewVM("ns", name, nil))
	if err != nil {
		t.Fatal(err)
	}
	node, err := store.New(c, store.Nodes, store.Options{Prefix: "/custom/"}).Create(t.Context(), &apiv1.Node{Metadata: &apiv1.ObjectMeta{Name: name}})
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
