package pool

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

func TestFinalizerComesBeforeAnyVM(t *testing.T) {
	p := newPool(3)
	p.Metadata.Finalizers = nil
	f := newFixture(t, p)
	f.reconcile(t)
	if got := f.vmNames(t); len(got) != 0 {
		t.Fatalf("VMs %v made before the pool had its finalizer", got)
	}
	if !slices.Contains(f.pool(t).Metadata.Finalizers, apiv1.FinalizerPool) {
		t.Fatal("finalizer not added")
	}
	f.settle(t)
	if got, want := f.vmNames(t), names("web", 0, 1, 2); !slices.Equal(got, want) {
		t.Fatalf("VMs = %v, want %v", got, want)
	}
}

func TestScaleOutFromZero(t *testing.T) {
	p := newPool(3)
	f := newFixture(t, p)
	f.reconcile(t)
	if got, want := f.vmNames(t), names("web", 0, 1, 2); !slices.Equal(got, want) {
		t.Fatalf("VMs = %v, want %v", got, want)
	}
	rev := apiv1.PoolRevision(p.Spec.VirtualMachineTemplate)
	macs := map[string]bool{}
	for _, name := range f.vmNames(t) {
		vm := f.vms.Get(t, "default", name)
		md := vm.Metadata
		if md.Labels["app"] != "web" || md.Labels["tier"] != "front" || md.Labels[apiv1.LabelPoolRevision] != rev {
			t.Errorf("%s labels = %v", name, md.Labels)
		}
		if md.Annotations["team"] != "blue" {
			t.Errorf("%s annotations = %v", name, md.Annotations)
		}
		if got := vm.Spec.Template.Metadata.Labels[apiv1.LabelPoolRevision]; got != rev {
			t.Errorf("%s instance template revision = %q, want %q", name, got, rev)
		}
		if len(md.OwnerReferences) != 1 {
			t.Fatalf("%s owner references = %v", name, md.OwnerReferences)
		}
		o := md.OwnerReferences[0]
		if o.Kind != apiv1.KindPool || o.Name != "web" || o.Uid != "pool-uid" || !o.Controller {
			t.Errorf("%s owner reference = %v", name, o)
		}
		if vm.Spec.RunStrategy != apiv1.RunStrategyAlways || vm.Spec.Template.Spec.Domain.Memory.Guest != "128Mi" {
			t.Errorf("%s spec is not the template's: %v", name, vm.Spec)
		}
		mac := vm.Spec.Template.Spec.Domain.Devices.Interfaces[0].MacAddress
		if mac == "" || macs[mac] {
			t.Errorf("%s MAC %q: want one of its own", name, mac)
		}
		macs[mac] = true
	}
	// The template itself is untouched (no revision label, no MAC).
	if got := f.pool(t).Spec.VirtualMachineTemplate; got.Metadata.Labels[apiv1.LabelPoolRevision] != "" ||
		got.Spec.Template.Spec.Domain.Devices.Interfaces[0].MacAddress != "" {
		t.Errorf("the pool's template was changed: %v", got)
	}
}

func TestScaleOut3To5(t *testing.T) {
	p := newPool(3)
	f := newFixture(t, p, poolVMs(p, 3)...)
	f.settle(t)
	f.updatePool(t, func(p *apiv1.VirtualMachinePool) { *p.Spec.Replicas = 5 })
	f.reconcile(t)
	if got, want := f.written(), []string{"create web-3", "create web-4"}; !slices.Equal(got, want) {
		t.Fatalf("writes = %v, want %v", got, want)
	}
}

func TestScaleInOrders(t *testing.T) {
	// Creation times: web-0 newest, web-1 oldest, then 2, 3, 4 in order.
	created := []time.Duration{10 * time.Second, 0, time.Second, 2 * time.Second, 3 * time.Second}
	for order, want := range map[string][]string{
		"":                           names("web", 4, 3, 2), // unset: the default
		apiv1.ScaleInDescendingOrder: names("web", 4, 3, 2),
		apiv1.ScaleInAscendingOrder:  names("web", 0, 1, 2),
		apiv1.ScaleInNewest:          names("web", 0, 4, 3),
		apiv1.ScaleInOldest:          names("web", 1, 2, 3),
	} {
		t.Run(order, func(t *testing.T) {
			p := newPool(5)
			p.Spec.ScaleInOrder = order
			vms := poolVMs(p, 5)
			for i, vm := range vms {
				vm.Metadata.CreationTimestamp = timestamppb.New(t0.Add(created[i]))
			}
			f := newFixture(t, p, vms...)
			f.updatePool(t, func(p *apiv1.VirtualMachinePool) { *p.Spec.Replicas = 2 })
			f.reconcile(t)
			var deleted []string
			for _, w := range f.written() {
				name, ok := strings.CutPrefix(w, "delete ")
				if !ok {
					t.Fatalf("unexpected write %q", w)
				}
				deleted = append(deleted, name)
			}
			slices.Sort(deleted)
			if !slices.Equal(deleted, want) {
				t.Fatalf("deleted %v, want %v", deleted, want)
			}
		})
	}
}

func TestScaleInCountsVMsAlreadyBeingDeleted(t *testing.T) {
	p := newPool(5)
	vms := poolVMs(p, 5)
	// web-1 is on its way out already (the VM controller's finalizer
	// holds it while its instance stops).
	vms[1].Metadata.Finalizers = []string{apiv1.FinalizerVMController}
	vms[1].Metadata.DeletionTimestamp = timestamppb.New(t0)
	f := newFixture(t, p, vms...)
	f.updatePool(t, func(p *apiv1.VirtualMachinePool) { *p.Spec.Replicas = 3 })
	f.reconcile(t)
	if got, want := f.written(), []string{"delete web-4"}; !slices.Equal(got, want) {
		t.Fatalf("writes = %v, want %v", got, want)
	}
	if got := f.pool(t).Status.Replicas; got != 4 {
		t.Errorf("status.replicas = %d, want 4 (VMs being deleted are not counted)", got)
	}
}

func TestGapIsRefilledUnderItsOwnName(t *testing.T) {
	p := newPool(3)
	vms := poolVMs(p, 3)
	vms[1].Metadata.Finalizers = []string{apiv1.FinalizerVMController}
	f := newFixture(t, p, vms...)
	f.settle(t)

	// Deleted from outside: while it goes, it still counts.
	if _, _, err := f.vms.Store.Delete(context.Background(), "default", "web-1", store.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.sync(t)
	f.resetWrites()
	f.reconcile(t)
	if got := f.written(); len(got) != 0 {
		t.Fatalf("writes while web-1 is being deleted: %v", got)
	}
	// Gone: made again as web-1, not web-3.
	f.vms.Update(t, "default", "web-1", func(vm *apiv1.VirtualMachine) { vm.Metadata.Finalizers = nil })
	f.sync(t)
	f.resetWrites()
	f.reconcile(t)
	if got, want := f.written(), []string{"create web-1"}; !slices.Equal(got, want) {
		t.Fatalf("writes = %v, want %v", got, want)
	}
	if uid := f.vms.Get(t, "default", "web-1").Metadata.Uid; uid == "vm-uid-1" {
		t.Error("web-1 has the deleted VM's uid")
	}
}

func TestRelabelledVMIsReleasedAndReplaced(t *testing.T) {
	p := newPool(3)
	f := newFixture(t, p, poolVMs(p, 3)...)
	f.vms.Update(t, "default", "web-1", func(vm *apiv1.VirtualMachine) { vm.Metadata.Labels["app"] = "debug" })
	f.sync(t)
	f.resetWrites()
	f.reconcile(t)
	if got := f.vms.Get(t, "default", "web-1").Metadata.OwnerReferences; len(got) != 0 {
		t.Fatalf("web-1 still has owner references %v", got)
	}
	f.settle(t)
	// Its name is taken, so the replacement is the next free ordinal.
	if got, want := f.vmNames(t), names("web", 0, 1, 2, 3); !slices.Equal(got, want) {
		t.Fatalf("VMs = %v, want %v", got, want)
	}
	if got := f.vms.Get(t, "default", "web-1").Metadata.Labels["app"]; got != "debug" {
		t.Errorf("the released VM was changed: app=%q", got)
	}
	if got := f.pool(t).Status.Replicas; got != 3 {
		t.Errorf("status.replicas = %d, want 3", got)
	}
}

func TestOrphanIsNeverAdopted(t *testing.T) {
	p := newPool(3)
	orphan := poolVM(p, 1)
	orphan.Metadata.OwnerReferences = nil
	f := newFixture(t, p, orphan)
	f.settle(t)
	if got, want := f.vmNames(t), names("web", 0, 1, 2, 3); !slices.Equal(got, want) {
		t.Fatalf("VMs = %v, want %v", got, want)
	}
	if got := f.vms.Get(t, "default", "web-1").Metadata.OwnerReferences; len(got) != 0 {
		t.Errorf("the orphan was adopted: %v", got)
	}
	if got := f.pool(t).Status.Replicas; got != 3 {
		t.Errorf("status.replicas = %d, want 3", got)
	}
}

func TestAnotherPoolsVMsAreNotCounted(t *testing.T) {
	p := newPool(2)
	other := newPool(2)
	other.Metadata.Name, other.Metadata.Uid = "web-1", "other-uid" // its VMs are web-1-0, web-1-1
	f := newFixture(t, p, poolVMs(other, 2)...)
	f.settle(t)
	if got, want := f.vmNames(t), []string{"web-0", "web-1", "web-1-0", "web-1-1"}; !slices.Equal(got, want) {
		t.Fatalf("VMs = %v, want %v", got, want)
	}
}

func TestPausedPoolStandsStill(t *testing.T) {
	p := newPool(3)
	p.Spec.Paused = true
	f := newFixture(t, p, poolVMs(p, 5)...)
	f.reconcile(t)
	if got := f.written(); len(got) != 0 {
		t.Fatalf("a paused pool wrote VMs: %v", got)
	}
	c := apiv1.FindCondition(f.pool(t).Status.GetConditions(), apiv1.ConditionReplicaPaused)
	if c.GetStatus() != apiv1.ConditionTrue || c.GetReason() != apiv1.ReasonReplicaPaused || c.GetMessage() != "Pool controller is paused" {
		t.Fatalf("ReplicaPaused = %v", c)
	}
	f.updatePool(t, func(p *apiv1.VirtualMachinePool) { p.Spec.Paused = false })
	f.settle(t)
	if got, want := f.vmNames(t), names("web", 0, 1, 2); !slices.Equal(got, want) {
		t.Fatalf("VMs after resuming = %v, want %v", got, want)
	}
	if c := apiv1.FindCondition(f.pool(t).Status.GetConditions(), apiv1.ConditionReplicaPaused); c != nil {
		t.Fatalf("ReplicaPaused left after resuming: %v", c)
	}
}

func TestFailedScaleOutIsReportedAndCleared(t *testing.T) {
	f := newFixture(t, newPool(2))
	f.vms.Store.FailNext("create", errors.New("etcd is on fire"))
	if _, err := f.c.Reconcile(context.Background(), poolKey0); err == nil {
		t.Fatal("reconcile succeeded with a failing create")
	}
	c := apiv1.FindCondition(f.pool(t).Status.GetConditions(), apiv1.ConditionReplicaFailure)
	if c.GetStatus() != apiv1.ConditionTrue || c.GetReason() != apiv1.ReasonFailedScaleOut || !strings.Contains(c.GetMessage(), "etcd is on fire") {
		t.Fatalf("ReplicaFailure = %v", c)
	}
	if adds, _ := f.c.exp.Pending(poolKey0); adds != 0 {
		t.Fatalf("%d creations expected after a failed create", adds)
	}
	f.settle(t)
	if got, want := f.vmNames(t), names("web", 0, 1); !slices.Equal(got, want) {
		t.Fatalf("VMs = %v, want %v", got, want)
	}
	if c := apiv1.FindCondition(f.pool(t).Status.GetConditions(), apiv1.ConditionReplicaFailure); c != nil {
		t.Fatalf("ReplicaFailure left after a clean pass: %v", c)
	}
}

func TestFailedScaleInIsReported(t *testing.T) {
	p := newPool(3)
	f := newFixture(t, p, poolVMs(p, 3)...)
	f.updatePool(t, func(p *apiv1.VirtualMachinePool) { *p.Spec.Replicas = 1 })
	f.vms.Store.FailNext("delete", errors.New("disk full"))
	if _, err := f.c.Reconcile(context.Background(), poolKey0); err == nil {
		t.Fatal("reconcile succeeded with a failing delete")
	}
	c := apiv1.FindCondition(f.pool(t).Status.GetConditions(), apiv1.ConditionReplicaFailure)
	if c.GetReason() != apiv1.ReasonFailedScaleIn || !strings.Contains(c.GetMessage(), "disk full") {
		t.Fatalf("ReplicaFailure = %v", c)
	}
}

// A create that reached the store but not the cache (an earlier pass's
// whose answer was lost, or an earlier leader's) comes back as
// AlreadyExists: observed, not a failure, and never a VM too many.
func TestAlreadyExistsIsObserved(t *testing.T) {
	p := newPool(3)
	f := newFixture(t, p)
	f.vms.Store.Seed(poolVM(p, 1)) // in the store, not yet in the cache
	res := f.reconcile(t)
	if got, want := f.written(), []string{"create web-0", "create web-2"}; !slices.Equal(got, want) {
		t.Fatalf("writes = %v, want %v", got, want)
	}
	if res.RequeueAfter == 0 {
		t.Error("no requeue after finding the cache behind")
	}
	if c := apiv1.FindCondition(f.pool(t).Status.GetConditions(), apiv1.ConditionReplicaFailure); c != nil {
		t.Errorf("AlreadyExists reported as a failure: %v", c)
	}
	f.settle(t)
	if got, want := f.vmNames(t), names("web", 0, 1, 2); !slices.Equal(got, want) {
		t.Fatalf("VMs = %v, want %v", got, want)
	}
}

// A leader killed in the middle of a scale-out leaves some VMs made; the
// next leader starts from a fresh, synced cache and makes only the rest.
func TestNewLeaderFinishesAScaleOut(t *testing.T) {
	p := newPool(5)
	f := newFixture(t, p, poolVM(p, 0), poolVM(p, 1), poolVM(p, 3))
	f.settle(t)
	if got, want := f.vmNames(t), names("web", 0, 1, 2, 3, 4); !slices.Equal(got, want) {
		t.Fatalf("VMs = %v, want %v", got, want)
	}
}

// Until the cache shows its creates, a pass makes no more: the next one
// would otherwise create them again under the next free names.
func TestExpectationsHoldBackTheNextPass(t *testing.T) {
	f := newFixture(t, newPool(3))
	f.reconcile(t)
	f.resetWrites()
	res := f.reconcile(t) // the cache has not seen the creates
	if got := f.written(); len(got) != 0 {
		t.Fatalf("writes before the cache caught up: %v", got)
	}
	if res.RequeueAfter == 0 {
		t.Error("no requeue while waiting for the cache")
	}
	f.settle(t)
	if got := len(f.vmNames(t)); got != 3 {
		t.Fatalf("%d VMs, want 3", got)
	}
}

func TestBurstCapsAPass(t *testing.T) {
	f := newFixture(t, newPool(burstReplicas+10))
	f.reconcile(t)
	if got := len(f.vmNames(t)); got != burstReplicas {
		t.Fatalf("first pass made %d VMs, want %d", got, burstReplicas)
	}
	f.settle(t)
	if got := len(f.vmNames(t)); got != burstReplicas+10 {
		t.Fatalf("%d VMs, want %d", got, burstReplicas+10)
	}
}
