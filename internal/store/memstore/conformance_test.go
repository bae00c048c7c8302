package memstore_test

import (
	"context"
	"testing"

	"github.com/virtplane/terraform-provider-virtplane/internal/store"
	"github.com/virtplane/terraform-provider-virtplane/internal/store/memstore"
	"github.com/virtplane/terraform-provider-virtplane/internal/store/storetest"
)

// memstore against the behaviour every backend shares, so controller
// tests on it see what they would see on etcd.
func TestConformance(t *testing.T) {
	storetest.RunConformance(t, func(t *testing.T, o storetest.BackendOptions) storetest.Backend {
		db := memstore.NewDB(o.Clock)
		return storetest.Backend{
			VMs:     memstore.New(db, store.VirtualMachines),
			Nodes:   memstore.New(db, store.Nodes),
			Compact: func(_ context.Context, rev int64) error { return db.Compact(rev) },
		}
	})
}
