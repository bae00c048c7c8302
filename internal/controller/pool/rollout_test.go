package pool

import (
	"context"
	"fmt"
	"slices"
	"testing"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// runningPool is a settled pool of n VMs, each with a Running, Ready
// instance.
func runningPool(t *testing.T, n int32, maxUnavailable string) *fixture {
	t.Helper()
	p := newPool(n)
	p.Spec.MaxUnavailable = maxUnavailable
	f := newFixture(t, p, poolVMs(p, int(n))...)
	f.runAll(t, true)
	f.settle(t)
	st := f.pool(t).Status
	if st.UpdatedReplicas != n || st.ReadyReplicas != n || st.TemplateGeneration != 1 {
		t.Fatalf("settled status = %v", st)
	}
	return f
}

func changeMemory(t *testing.T, f *fixture, guest string) {
	t.Helper()
	f.updatePool(t, func(p *apiv1.VirtualMachinePool) {
		p.Spec.VirtualMachineTemplate.Spec.Template.Spec.Domain.Memory.Guest = guest
	})
	f.resetWrites()
}

func TestReplicasOnlyChangeRollsNothing(t *testing.T) {
	f := runningPool(t, 3, "1")
	f.updatePool(t, func(p *apiv1.VirtualMachinePool) { *p.Spec.Replicas = 4 })
	f.resetWrites()
	f.reconcile(t)
	if got, want := f.written(), []string{"create web-3"}; !slices.Equal(got, want) {
		t.Fatalf("writes = %v, want %v", got, want)
	}
	f.runAll(t, true)
	f.settle(t)
	if got := f.restartRequested(t); len(got) != 0 {
		t.Fatalf("restarts queued: %v", got)
	}
	st := f.pool(t).Status
	if st.UpdatedReplicas != 4 || st.TemplateGeneration != 2 || st.ObservedGeneration != 2 {
		t.Fatalf("status = %v", st)
	}
}

func TestTemplateChangeRollsOneAtATime(t *testing.T) {
	f := runningPool(t, 3, "1")
	changeMemory(t, f, "256Mi")
	rev := apiv1.PoolRevision(f.pool(t).Spec.VirtualMachineTemplate)

	for i, name := range names("web", 0, 1, 2) {
		res := f.reconcile(t)
		if got, want := f.written(), []string{"update " + name}; !slices.Equal(got, want) {
			t.Fatalf("step %d: writes = %v, want %v", i, got, want)
		}
		if got := f.restartRequested(t); !slices.Equal(got, []string{name}) {
			t.Fatalf("step %d: restarts queued for %v, want %s", i, got, name)
		}
		if res.RequeueAfter != rolloutInterval {
			t.Errorf("step %d: requeue after %v, want %v", i, res.RequeueAfter, rolloutInterval)
		}
		vm := f.vms.Get(t, "default", name)
		if vm.Spec.Template.Spec.Domain.Memory.Guest != "256Mi" || vm.Metadata.Labels[apiv1.LabelPoolRevision] != rev ||
			vm.Spec.Template.Metadata.Labels[apiv1.LabelPoolRevision] != rev || vm.Metadata.Generation != 2 {
			t.Fatalf("step %d: %s not on the new template: %v", i, name, vm)
		}

		// Nothing more while that VM is down.
		f.sync(t)
		f.resetWrites()
		f.reconcile(t)
		if got := f.written(); len(got) != 0 {
			t.Fatalf("step %d: writes while %s restarts: %v", i, name, got)
		}
		if got := f.pool(t).Status.UpdatedReplicas; got != int32(i) {
			t.Fatalf("step %d: updated_replicas = %d before the restart, want %d", i, got, i)
		}

		f.runAll(t, true) // the VM controller restarts it
		f.resetWrites()
	}
	f.settle(t)
	st := f.pool(t).Status
	if st.UpdatedReplicas != 3 || st.TemplateGeneration != 2 || st.ReadyReplicas != 3 {
		t.Fatalf("status after the rollout = %v", st)
	}
	if res := f.reconcile(t); res.RequeueAfter != 0 {
		t.Errorf("requeue after %v once the rollout is done", res.RequeueAfter)
	}
	for _, name := range names("web", 0, 1, 2) {
		vmi := f.vmis.Get(t, "default", name)
		if vmi.Spec.Domain.Memory.Guest != "256Mi" || vmi.Metadata.Labels[apiv1.LabelPoolRevision] != rev {
			t.Errorf("%s's instance is not on the new template: %v", name, vmi)
		}
	}
}

func TestTemplateChangeRollsAllWith100Percent(t *testing.T) {
	f := runningPool(t, 3, "100%")
	changeMemory(t, f, "256Mi")
	f.reconcile(t)
	if got, want := f.restartRequested(t), names("web", 0, 1, 2); !slices.Equal(got, want) {
		t.Fatalf("restarts queued for %v, want %v", got, want)
	}
	f.runAll(t, true)
	f.settle(t)
	if st := f.pool(t).Status; st.UpdatedReplicas != 3 || st.TemplateGeneration != 2 {
		t.Fatalf("status = %v", st)
	}
}

func TestTemplateChangeRollsAPercentageRoundedUp(t *testing.T) {
	f := runningPool(t, 5, "30%") // 1.5 → 2
	changeMemory(t, f, "256Mi")
	f.reconcile(t)
	if got, want := f.restartRequested(t), names("web", 0, 1); !slices.Equal(got, want) {
		t.Fatalf("restarts queued for %v, want %v", got, want)
	}
}

func TestUnreadyVMsRollFirst(t *testing.T) {
	f := runningPool(t, 3, "1")
	f.setReady(t, "web-2", false)
	changeMemory(t, f, "256Mi")
	f.reconcile(t)
	if got := f.restartRequested(t); !slices.Equal(got, []string{"web-2"}) {
		t.Fatalf("restarts queued for %v, want [web-2]", got)
	}
	// web-2 was down already: restarting it took nothing down, and the
	// one unavailable VM fills the budget.
	f.sync(t)
	f.resetWrites()
	f.reconcile(t)
	if got := f.written(); len(got) != 0 {
		t.Fatalf("writes while web-2 restarts: %v", got)
	}
}

// With every VM down, the minimum of one per pass keeps the rollout
// going: a new template may be what fixes them.
func TestRolloutOfUnavailableVMsMovesOnePerPass(t *testing.T) {
	f := runningPool(t, 3, "1")
	for _, n := range names("web", 0, 1, 2) {
		f.setReady(t, n, false)
	}
	changeMemory(t, f, "256Mi")
	f.reconcile(t)
	if got := f.restartRequested(t); !slices.Equal(got, []string{"web-0"}) {
		t.Fatalf("restarts queued for %v, want [web-0]", got)
	}
}

func TestVMsWithoutInstancesAreUpdatedAtOnce(t *testing.T) {
	p := newPool(3)
	p.Spec.MaxUnavailable = "1"
	f := newFixture(t, p, poolVMs(p, 3)...)
	f.settle(t)
	changeMemory(t, f, "256Mi")
	f.reconcile(t)
	if got, want := f.written(), []string{"update web-0", "update web-1", "update web-2"}; !slices.Equal(got, want) {
		t.Fatalf("writes = %v, want %v", got, want)
	}
	if got := f.restartRequested(t); len(got) != 0 {
		t.Fatalf("restarts queued: %v", got)
	}
	// Not updated until their instances start from the new template.
	f.sync(t)
	f.reconcile(t)
	if got := f.pool(t).Status.UpdatedReplicas; got != 0 {
		t.Fatalf("updated_replicas = %d before any instance started", got)
	}
	f.runAll(t, true)
	f.settle(t)
	if st := f.pool(t).Status; st.UpdatedReplicas != 3 || st.TemplateGeneration != 2 {
		t.Fatalf("status = %v", st)
	}
}

func TestRolloutKeepsMACs(t *testing.T) {
	f := runningPool(t, 1, "1")
	mac := f.vms.Get(t, "default", "web-0").Spec.Template.Spec.Domain.Devices.Interfaces[0].MacAddress
	changeMemory(t, f, "256Mi")
	f.reconcile(t)
	if got := f.vms.Get(t, "default", "web-0").Spec.Template.Spec.Domain.Devices.Interfaces[0].MacAddress; got != mac || got == "" {
		t.Fatalf("MAC %q after the rollout, was %q", got, mac)
	}
}

// A VM whose user queued requests gets the template, and its restart
// waits until the requests are done.
func TestRestartWaitsForTheUsersRequests(t *testing.T) {
	f := runningPool(t, 1, "1")
	uid := f.vmis.Get(t, "default", "web-0").Metadata.Uid
	f.vms.Update(t, "default", "web-0", func(vm *apiv1.VirtualMachine) {
		vm.Status.StateChangeRequests = []*apiv1.StateChangeRequest{{Action: apiv1.StateChangeStop, Uid: uid}}
	})
	f.sync(t)
	changeMemory(t, f, "256Mi")
	f.reconcile(t)
	vm := f.vms.Get(t, "default", "web-0")
	if vm.Spec.Template.Spec.Domain.Memory.Guest != "256Mi" || len(vm.Status.StateChangeRequests) != 1 {
		t.Fatalf("web-0 = %v, want the template and the user's request alone", vm)
	}
	// The user's request is done without a stop (say, withdrawn): the
	// instance still runs the old template and is restarted now.
	f.vms.Update(t, "default", "web-0", func(vm *apiv1.VirtualMachine) { vm.Status.StateChangeRequests = nil })
	f.sync(t)
	f.resetWrites()
	f.reconcile(t)
	if got := f.restartRequested(t); !slices.Equal(got, []string{"web-0"}) {
		t.Fatalf("restarts queued for %v, want [web-0]", got)
	}
}

func TestOnceVMIsRestartedByDeletingItsInstance(t *testing.T) {
	p := newPool(1)
	p.Spec.VirtualMachineTemplate.Spec.RunStrategy = apiv1.RunStrategyOnce
	f := newFixture(t, p, poolVMs(p, 1)...)
	f.runAll(t, true)
	f.settle(t)
	changeMemory(t, f, "256Mi")
	f.reconcile(t)
	if got := f.written(); !slices.Equal(got, []string{"update web-0"}) {
		t.Fatalf("writes = %v, want [update web-0]", got)
	}
	if got := f.restartRequested(t); len(got) != 0 {
		t.Fatalf("restart verb used on a Once VM: %v", got)
	}
	f.sync(t)
	f.resetWrites()
	f.reconcile(t)
	ws := f.vmis.Store.Writes()
	if len(ws) != 1 || ws[0].Op != "delete" || ws[0].Key != "default/web-0" {
		t.Fatalf("instance writes = %v, want web-0's deleted", ws)
	}
}

func TestHaltedTemplateStopsWithoutRestart(t *testing.T) {
	f := runningPool(t, 2, "1")
	f.updatePool(t, func(p *apiv1.VirtualMachinePool) {
		p.Spec.VirtualMachineTemplate.Spec.RunStrategy = apiv1.RunStrategyHalted
	})
	f.resetWrites()
	f.reconcile(t)
	if got, want := f.written(), []string{"update web-0", "update web-1"}; !slices.Equal(got, want) {
		t.Fatalf("writes = %v, want %v", got, want)
	}
	if got := f.restartRequested(t); len(got) != 0 {
		t.Fatalf("restarts queued: %v", got)
	}
}

func TestConflictRequeuesWithoutFailure(t *testing.T) {
	f := runningPool(t, 1, "1")
	changeMemory(t, f, "256Mi")
	f.vms.Store.FailNext("update", fmt.Errorf("virtualmachine: %w", store.ErrConflict))
	if _, err := f.c.Reconcile(context.Background(), poolKey0); err == nil {
		t.Fatal("reconcile succeeded through a conflict")
	}
	if c := apiv1.FindCondition(f.pool(t).Status.GetConditions(), apiv1.ConditionReplicaFailure); c != nil {
		t.Fatalf("a conflict reported as a failure: %v", c)
	}
	f.sync(t)
	f.reconcile(t)
	if got := f.restartRequested(t); !slices.Equal(got, []string{"web-0"}) {
		t.Fatalf("restarts queued for %v, want [web-0]", got)
	}
}

func TestFailedUpdateIsReported(t *testing.T) {
	f := runningPool(t, 1, "1")
	changeMemory(t, f, "256Mi")
	f.vms.Store.FailNext("update", fmt.Errorf("quota exceeded"))
	if _, err := f.c.Reconcile(context.Background(), poolKey0); err == nil {
		t.Fatal("reconcile succeeded through a failing update")
	}
	c := apiv1.FindCondition(f.pool(t).Status.GetConditions(), apiv1.ConditionReplicaFailure)
	if c.GetReason() != apiv1.ReasonFailedUpdate {
		t.Fatalf("ReplicaFailure = %v", c)
	}
}

// A pass must not decide from a VM older than its own write: it would
// see the restart not queued yet and count the VM as available.
func TestStaleVMCacheHoldsTheRollout(t *testing.T) {
	f := runningPool(t, 3, "100%")
	changeMemory(t, f, "256Mi")
	f.c.vmWrit.Wrote("default/web-0", 1<<40) // a write the cache has not shown
	res := f.reconcile(t)
	if got := f.written(); len(got) != 0 {
		t.Fatalf("writes from a stale cache: %v", got)
	}
	if res.RequeueAfter == 0 {
		t.Error("no requeue")
	}
}

func TestVMsBeingDeletedAreNotRolled(t *testing.T) {
	f := runningPool(t, 2, "100%")
	f.vms.Update(t, "default", "web-1", func(vm *apiv1.VirtualMachine) {
		vm.Metadata.Finalizers = []string{apiv1.FinalizerVMController}
	})
	if _, _, err := f.vms.Store.Delete(context.Background(), "default", "web-1", store.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.sync(t)
	changeMemory(t, f, "256Mi")
	f.reconcile(t)
	if got := f.written(); !slices.Equal(got, []string{"update web-0"}) {
		t.Fatalf("writes = %v, want [update web-0]", got)
	}
}
