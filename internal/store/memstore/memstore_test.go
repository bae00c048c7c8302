package memstore_test

import (
	"errors"
	"testing"
	"testing/synctest"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
	"github.com/virtplane/terraform-provider-virtplane/internal/store/memstore"
	"github.com/virtplane/terraform-provider-virtplane/internal/store/storetest"
)

// An injected conflict behaves like a lost compare-and-swap: GuaranteedUpdate
// calls fn again with the stored object, and an injected conflict on a
// plain Update leaves the object as it was.
func TestFailNextConflictIsRetriedLikeALostCAS(t *testing.T) {
	s := memstore.New(memstore.NewDB(nil), store.VirtualMachines)
	storetest.MustCreate(t, s, storetest.NewVM("ns", "a", nil))
	s.FailNext("update", store.ErrConflict)
	calls := 0
	out, err := s.GuaranteedUpdate(t.Context(), "ns", "a", func(vm *apiv1.VirtualMachine) (*apiv1.VirtualMachine, error) {
		calls++
		if vm == nil {
			return nil, errors.New("fn got no object")
		}
		vm.Metadata.Labels = map[string]string{"k": "v"}
		return vm, nil
	})
	if err != nil || calls != 2 || out.GetMetadata().GetLabels()["k"] != "v" {
		t.Fatalf("GuaranteedUpdate after an injected conflict: %v after %d calls (%v)", err, calls, out)
	}
	if w := s.Writes(); len(w) != 2 || w[1].Op != "update" {
		t.Errorf("writes %v, want the create and one update", w)
	}
}

// A watch from a revision not written yet delivers only what comes after
// it, as etcd's does, even when it looked (and found nothing) before the
// store got there. Not in the conformance suite: on a shared etcd other
// tests' writes move the revision.
func TestWatchFromFutureRevisionAfterAnIdlePass(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memstore.New(memstore.NewDB(nil), store.VirtualMachines)
		first := storetest.MustCreate(t, s, storetest.NewVM("ns", "first", nil))
		w, err := s.Watch(t.Context(), store.WatchOptions{ResourceVersion: first.Metadata.ResourceVersion + 2})
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // the watch found nothing after its revision and waits
		var last *apiv1.VirtualMachine
		for _, name := range []string{"b", "c", "d"} {
			last = storetest.MustCreate(t, s, storetest.NewVM("ns", name, nil))
		}
		storetest.Expect(t, w, apiv1.EventType_ADDED, "d", last.Metadata.ResourceVersion)
	})
}
