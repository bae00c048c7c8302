package store_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
	"github.com/virtplane/terraform-provider-virtplane/internal/store/storetest"
)

// The tests are an external package because storetest, which runs the
// conformance suite, imports the store.

func TestMain(m *testing.M) { storetest.Main(m) }

func testOptions(t *testing.T) store.Options {
	return store.Options{Prefix: storetest.Prefix(t), Clock: func() time.Time { return storetest.Now }}
}

func vmStoreWith(t *testing.T, c *clientv3.Client) store.Store[*apiv1.VirtualMachine] {
	return store.New(c, store.VirtualMachines, testOptions(t))
}

// writes reads the store's write counter of kind and op through reg.
func writes(t *testing.T, reg *prometheus.Registry, kind, op string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "virtplane_store_writes_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["kind"] == kind && labels["op"] == op {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}
