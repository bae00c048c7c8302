package replicaset

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller/controllertest"
	"github.com/virtplane/terraform-provider-virtplane/internal/informer"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
	"github.com/virtplane/terraform-provider-virtplane/internal/store/memstore"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// The controller driven by its informers' events, as the leader runs it:
// scale up, down, and delete.
func TestRunFollowsEvents(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	db := memstore.NewDB(nil)
	rss := memstore.New(db, store.ReplicaSets)
	vmis := memstore.New(db, store.VirtualMachineInstances)
	rsInf := informer.New(rss, store.ListOptions{}, controllertest.Discard())
	vmiInf := informer.New(vmis, store.ListOptions{}, controllertest.Discard())
	c := New(Options{BurstReplicas: 10}, rsInf, vmiInf, rss, vmis, controllertest.Discard())
	var wg sync.WaitGroup
	for _, run := range []func(context.Context){rsInf.Run, vmiInf.Run, func(ctx context.Context) { c.Run(ctx, 3) }} {
		wg.Add(1)
		go func() { defer wg.Done(); run(ctx) }()
	}
	t.Cleanup(func() { cancel(); wg.Wait() })

	rs := newRS(25)
	rs.Metadata.Finalizers = nil
	if _, err := rss.Create(ctx, rs); err != nil {
		t.Fatal(err)
	}
	settle := func(n int32) {
		t.Helper()
		testutil.EventuallyNoError(t, 10*time.Second, fmt.Sprintf("%d instances", n), func() error {
			got, _, err := vmis.List(ctx, store.ListOptions{})
			if err != nil {
				return err
			}
			cur, err := rss.Get(ctx, "default", "web")
			if err != nil {
				return err
			}
			if len(got) != int(n) || cur.GetStatus().GetReplicas() != n {
				return fmt.Errorf("%d instances, status %d", len(got), cur.GetStatus().GetReplicas())
			}
			return nil
		})
	}
	settle(25)
	scale := func(n int32) {
		t.Helper()
		if _, err := rss.GuaranteedUpdate(ctx, "default", "web", func(rs *apiv1.VirtualMachineInstanceReplicaSet) (*apiv1.VirtualMachineInstanceReplicaSet, error) {
			rs.Spec.Replicas = &n
			return rs, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	scale(4)
	settle(4)
	scale(12)
	settle(12)

	if _, _, err := rss.Delete(ctx, "default", "web", store.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyNoError(t, 10*time.Second, "the replica set and its instances gone", func() error {
		if _, err := rss.Get(ctx, "default", "web"); !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("replica set: %v", err)
		}
		if got, _, _ := vmis.List(ctx, store.ListOptions{}); len(got) != 0 {
			return fmt.Errorf("%d instances left", len(got))
		}
		return nil
	})
}

// One pass creating 200 instances against the in-memory store: the
// controller's own cost of a scale-up (etcd adds a round trip per
// slow-start batch and per Parallelism creates).
func BenchmarkScaleUp200(b *testing.B) {
	for b.Loop() {
		b.StopTimer()
		f := newFixture(b, Options{}, newRS(200))
		b.StartTimer()
		f.reconcile(b)
	}
}
