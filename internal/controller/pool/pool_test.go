package pool

import (
	"context"
	"errors"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

func TestDeletionCascadesThenDropsTheFinalizer(t *testing.T) {
	p := newPool(3)
	vms := poolVMs(p, 3)
	for _, vm := range vms {
		vm.Metadata.Finalizers = []string{apiv1.FinalizerVMController}
	}
	f := newFixture(t, p, vms...)
	f.runAll(t, true)
	f.settle(t)

	if _, _, err := f.pools.Store.Delete(context.Background(), "default", "web", store.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.sync(t)
	f.resetWrites()
	f.reconcile(t)
	if got, want := f.written(), []string{"delete web-0", "delete web-1", "delete web-2"}; !slices.Equal(got, want) {
		t.Fatalf("writes = %v, want %v", got, want)
	}

	// The VM controller still holds them (their instances stop first):
	// the pool waits, and asks for nothing twice.
	f.sync(t)
	f.resetWrites()
	f.reconcile(t)
	if got := f.written(); len(got) != 0 {
		t.Fatalf("writes while the VMs go: %v", got)
	}
	if !slices.Contains(f.pool(t).Metadata.Finalizers, apiv1.FinalizerPool) {
		t.Fatal("finalizer dropped while VMs remain")
	}

	// Two are gone, one is left.
	for _, name := range []string{"web-0", "web-1"} {
		f.vms.Update(t, "default", name, func(vm *apiv1.VirtualMachine) { vm.Metadata.Finalizers = nil })
	}
	f.sync(t)
	f.reconcile(t)
	if !slices.Contains(f.pool(t).Metadata.Finalizers, apiv1.FinalizerPool) {
		t.Fatal("finalizer dropped while web-2 remains")
	}
	f.vms.Update(t, "default", "web-2", func(vm *apiv1.VirtualMachine) { vm.Metadata.Finalizers = nil })
	f.sync(t)
	f.reconcile(t)
	if _, err := f.pools.Store.Get(context.Background(), "default", "web"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("pool still stored after its VMs went (err %v)", err)
	}
	f.sync(t)
	f.reconcile(t) // a pass over a pool that is gone does nothing
}

// A deleted pool whose create the cache has not shown must not drop its
// finalizer: the VM would be left behind.
func TestDeletionWaitsForExpectedCreations(t *testing.T) {
	f := newFixture(t, newPool(1))
	f.reconcile(t) // creates web-0; the cache has not seen it
	f.pools.Update(t, "default", "web", func(p *apiv1.VirtualMachinePool) { p.Metadata.DeletionTimestamp = apiv1.Timestamp(t0) })
	f.pools.Sync(t)
	f.resetWrites()
	f.reconcile(t)
	if !slices.Contains(f.pool(t).Metadata.Finalizers, apiv1.FinalizerPool) {
		t.Fatal("finalizer dropped before the cache showed the pool's VM")
	}
	f.vms.Sync(t)
	f.reconcile(t)
	if got := f.written(); !slices.Equal(got, []string{"delete web-0"}) {
		t.Fatalf("writes = %v, want [delete web-0]", got)
	}
}

func TestStatus(t *testing.T) {
	f := runningPool(t, 3, "1")
	f.setReady(t, "web-1", false)
	f.reconcile(t)
	st := f.pool(t).Status
	want := &apiv1.VirtualMachinePoolStatus{
		Replicas: 3, ReadyReplicas: 2, UpdatedReplicas: 3, LabelSelector: "app=web",
		ObservedGeneration: 1, TemplateGeneration: 1,
	}
	if !proto.Equal(st, want) {
		t.Fatalf("status = %v, want %v", st, want)
	}
	// Written only on change.
	f.sync(t)
	f.resetWrites()
	f.reconcile(t)
	if ws := f.pools.Store.Writes(); len(ws) != 0 {
		t.Fatalf("pool written with nothing changed: %v", ws)
	}
}

func TestInvalidSpecIsNotActedOn(t *testing.T) {
	p := newPool(3)
	p.Spec.Selector.MatchLabels = map[string]string{"app": "db"} // not the template's
	f := newFixture(t, p, poolVMs(newPool(3), 2)...)
	if _, err := f.c.Reconcile(context.Background(), poolKey0); err == nil {
		t.Fatal("no error for a selector that does not match the template")
	}
	if ws := f.vms.Store.Writes(); len(ws) != 0 {
		t.Fatalf("VM writes = %v", ws)
	}
}

// drain empties the queue without processing.
func (f *fixture) drain() {
	for f.c.queue.Len() > 0 {
		k, _ := f.c.queue.Get()
		f.c.queue.Done(k)
	}
}

func TestEventsQueueThePool(t *testing.T) {
	p := newPool(1)
	f := newFixture(t, p, poolVMs(p, 1)...)
	queued := func() bool {
		t.Helper()
		defer f.drain()
		if f.c.queue.Len() == 0 {
			return false
		}
		k, _ := f.c.queue.Get()
		f.c.queue.Done(k)
		if k != poolKey0 {
			t.Fatalf("queued %q", k)
		}
		return true
	}
	f.drain()

	vm := f.vms.Get(t, "default", "web-0")
	vmi := f.startVMI(t, vm, false)
	f.vmis.Sync(t)
	if !queued() {
		t.Error("an instance starting did not queue its VM's pool")
	}
	f.vmis.Update(t, "default", "web-0", func(vmi *apiv1.VirtualMachineInstance) { vmi.Status.NodeName = "n1" })
	f.vmis.Sync(t)
	if queued() {
		t.Error("an instance update that changes nothing the pool reads queued it")
	}
	f.vmis.Update(t, "default", "web-0", func(vmi *apiv1.VirtualMachineInstance) { setReady(&vmi.Status.Conditions, true) })
	f.vmis.Sync(t)
	if !queued() {
		t.Error("an instance getting ready did not queue its VM's pool")
	}
	if _, _, err := f.vmis.Store.Delete(context.Background(), "default", vmi.Metadata.Name, store.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.vmis.Sync(t)
	if !queued() {
		t.Error("an instance going did not queue its VM's pool")
	}
	f.vms.Update(t, "default", "web-0", func(vm *apiv1.VirtualMachine) { vm.Metadata.Labels["app"] = "debug" })
	f.vms.Sync(t)
	if !queued() {
		t.Error("a VM update did not queue its pool")
	}
	f.vms.Update(t, "default", "web-0", func(vm *apiv1.VirtualMachine) { vm.Metadata.OwnerReferences = nil })
	f.vms.Sync(t)
	if !queued() {
		t.Error("a VM's release did not queue its former pool")
	}
	f.vms.Update(t, "default", "web-0", func(vm *apiv1.VirtualMachine) { vm.Metadata.Labels["x"] = "y" })
	f.vms.Sync(t)
	if queued() {
		t.Error("an orphan's update queued a pool")
	}
}
