package store_test

import (
	"context"
	"testing"

	"github.com/virtplane/terraform-provider-virtplane/internal/store"
	"github.com/virtplane/terraform-provider-virtplane/internal/store/storetest"
)

// The etcd store against the behaviour every backend shares, on real
// embedded etcd.
func TestConformance(t *testing.T) {
	storetest.RunConformance(t, func(t *testing.T, o storetest.BackendOptions) storetest.Backend {
		c := storetest.Client(t)
		if o.Isolated {
			c = storetest.NewServer(t).Client()
		}
		opts := store.Options{Prefix: storetest.Prefix(t), Clock: o.Clock}
		return storetest.Backend{
			VMs:   store.New(c, store.VirtualMachines, opts),
			Nodes: store.New(c, store.Nodes, opts),
			Compact: func(ctx context.Context, rev int64) error {
				_, err := c.Compact(ctx, rev)
				return err
			},
		}
	})
}

// With accounting on (it adds namespaces' keys to the transactions of
// writes) every behaviour stays the same.
func TestConformanceAccounting(t *testing.T) {
	storetest.RunConformance(t, func(t *testing.T, o storetest.BackendOptions) storetest.Backend {
		c := storetest.Client(t)
		if o.Isolated {
			c = storetest.NewServer(t).Client()
		}
		opts := store.Options{Prefix: storetest.Prefix(t), Clock: o.Clock, Accounting: true}
		return storetest.Backend{
			VMs:   store.New(c, store.VirtualMachines, opts),
			Nodes: store.New(c, store.Nodes, opts),
			Compact: func(ctx context.Context, rev int64) error {
				_, err := c.Compact(ctx, rev)
				return err
			},
		}
	})
}
