package store

import (
	"maps"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	clientv3 "go.etcd.io/etcd/client/v3"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/store/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

var testNow = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func testOptions(t *testing.T) Options {
	return Options{Prefix: storetest.Prefix(t), Clock: func() time.Time { return testNow }}
}

// vmStore is a store under a key prefix of the test's own on the shared
// server.
func vmStore(t *testing.T) Store[*apiv1.VirtualMachine] {
	return New(storetest.Client(t), VirtualMachines, testOptions(t))
}

func vmStoreWith(t *testing.T, c *clientv3.Client) Store[*apiv1.VirtualMachine] {
	return New(c, VirtualMachines, testOptions(t))
}

func newVM(ns, name string, labels map[string]string, finalizers ...string) *apiv1.VirtualMachine {
	return &apiv1.VirtualMachine{
		Metadata: &apiv1.ObjectMeta{Namespace: ns, Name: name, Labels: maps.Clone(labels), Finalizers: finalizers},
		Spec:     &apiv1.VirtualMachineSpec{RunStrategy: "Halted"},
	}
}

func mustCreate(t *testing.T, s Store[*apiv1.VirtualMachine], vm *apiv1.VirtualMachine) *apiv1.VirtualMachine {
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

// next is the next event, failing the test if none comes soon.
func next[T Object](t *testing.T, ch <-chan Event[T]) Event[T] {
	t.Helper()
	select {
	case e, ok := <-ch:
		if !ok {
			t.Fatal("watch channel closed")
		}
		return e
	case <-time.After(10 * time.Second):
		t.Fatal("no watch event within 10s")
	}
	panic("unreachable")
}

// expect checks the next event's type, object name and, when rev > 0,
// revision.
func expect(t *testing.T, ch <-chan Event[*apiv1.VirtualMachine], typ apiv1.EventType, name string, rev int64) Event[*apiv1.VirtualMachine] {
	t.Helper()
	e := next(t, ch)
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

func counter(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		panic(err)
	}
	return m.GetCounter().GetValue()
}
