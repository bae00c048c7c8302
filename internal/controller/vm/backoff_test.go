package vm

import (
	"context"
	"testing"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

func TestCrashLoopBackoffAndReset(t *testing.T) {
	f := newFixture(t, newVM("Always"), newVMI(apiv1.PhaseFailed, false))
	f.reconcile(t)
	vm := f.vm(t)
	sf := vm.Status.StartFailure
	if sf.GetConsecutiveFailCount() != 1 || sf.LastFailedVmiUid != "vmi-uid" || !sf.RetryAfterTimestamp.AsTime().Equal(t0.Add(10*time.Second)) {
		t.Fatalf("start failure %v", sf)
	}
	if vm.Status.PrintableStatus != apiv1.PrintableCrashLoopBackOff {
		t.Fatalf("printable %s", vm.Status.PrintableStatus)
	}
	// The failed VMI was released and deleted in one write.
	if ws := f.vmis.Store.Writes(); len(ws) != 1 || ws[0].Op != "delete" {
		t.Fatalf("vmi writes %v", ws)
	}
	// Gone from the cache: no start before the backoff ends.
	f.refresh()
	f.vmis.Store.ResetWrites()
	if d := f.reconcile(t); d != 10*time.Second || f.vmiAction() != "none" {
		t.Fatalf("started during backoff (requeue %v, action %s)", d, f.vmiAction())
	}
	f.now = t0.Add(10 * time.Second)
	f.refresh()
	f.reconcile(t)
	if f.vmiAction() != "start" {
		t.Fatal("not started after backoff")
	}
	// The same failed VMI is counted once; a new one that runs resets it.
	f.refresh()
	vmi, _ := f.vmis.Store.Get(context.Background(), "default", "web")
	vmi.Status.Phase = apiv1.PhaseRunning
	vmi.Status.PhaseTransitionTimestamps = append(vmi.Status.PhaseTransitionTimestamps, &apiv1.PhaseTransitionTimestamp{Phase: "Running"})
	if _, err := f.vmis.Store.Update(context.Background(), vmi); err != nil {
		t.Fatal(err)
	}
	f.refresh()
	f.reconcile(t)
	if vm := f.vm(t); vm.Status.StartFailure != nil || vm.Status.PrintableStatus != apiv1.PrintableRunning {
		t.Fatalf("after running: %v %s", vm.Status.StartFailure, vm.Status.PrintableStatus)
	}
}

func TestStartBackoffMath(t *testing.T) {
	cases := []struct {
		n      int32
		r      float64
		lo, hi time.Duration
	}{
		{1, 0, 10 * time.Second, 10 * time.Second},
		{1, 0.999, 14 * time.Second, 15 * time.Second},
		{2, 0, 40 * time.Second, 40 * time.Second},
		{2, 0.999, 59 * time.Second, 60 * time.Second},
		{3, 0, 90 * time.Second, 90 * time.Second},
		{3, 0.999, 134 * time.Second, 135 * time.Second},
		{4, 0, 160 * time.Second, 160 * time.Second},
		{4, 0.999, 239 * time.Second, 240 * time.Second},
		{5, 0, 250 * time.Second, 250 * time.Second},
		{5, 0.999, 300 * time.Second, 300 * time.Second},
		{6, 0, 300 * time.Second, 300 * time.Second},
		{1000, 0.5, 300 * time.Second, 300 * time.Second},
		{0, 0.5, 0, 0},
	}
	for _, c := range cases {
		if d := StartBackoff(c.n, c.r); d < c.lo || d > c.hi {
			t.Errorf("StartBackoff(%d, %v) = %v, want [%v, %v]", c.n, c.r, d, c.lo, c.hi)
		}
	}
}

func TestStartFailureClearedForManualAndByRunning(t *testing.T) {
	vm := newVM("Manual")
	vm.Status.StartFailure = &apiv1.VirtualMachineStartFailure{ConsecutiveFailCount: 3}
	f := newFixture(t, vm, nil)
	f.reconcile(t)
	if f.vm(t).Status.StartFailure != nil {
		t.Fatal("Manual keeps a start failure")
	}
	vm = newVM("Once")
	vm.Status.StartFailure = &apiv1.VirtualMachineStartFailure{ConsecutiveFailCount: 1, LastFailedVmiUid: "x"}
	f = newFixture(t, vm, newVMI(apiv1.PhaseFailed, false))
	f.reconcile(t)
	if sf := f.vm(t).Status.StartFailure; sf.GetConsecutiveFailCount() != 2 {
		t.Fatalf("Once does not count failures: %v", sf)
	}
	if ps := f.vm(t).Status.PrintableStatus; ps != apiv1.PrintableCrashLoopBackOff {
		t.Fatalf("Once printable %s", ps)
	}
}

// The VMI's deletion can reach the cache before our VM status write does;
// a pass on that stale VM must not start a VMI inside the backoff it just
// recorded.
func TestStaleVMCacheDoesNotSkipBackoff(t *testing.T) {
	f := newFixture(t, newVM("Always"), newVMI(apiv1.PhaseFailed, false))
	f.reconcile(t)
	if f.vm(t).Status.GetStartFailure().GetConsecutiveFailCount() != 1 {
		t.Fatal("failure not recorded")
	}
	// Only the VMI cache catches up.
	f.vmis.Informer.Fill()
	f.c.exp.DeletionObserved("default/web")
	f.vmis.Store.ResetWrites()
	if d := f.reconcile(t); d == 0 {
		t.Fatal("no requeue on a stale VM cache")
	}
	if f.vmiAction() != "none" {
		t.Fatalf("acted on a stale VM: %s", f.vmiAction())
	}
	// Once the VM cache catches up, the backoff holds.
	f.refresh()
	if d := f.reconcile(t); d != 10*time.Second || f.vmiAction() != "none" {
		t.Fatalf("requeue %v action %s", d, f.vmiAction())
	}
}

// The VM keeps why its last instance failed: the instance is deleted
// before the retry, and users need the cause (e.g. libvirt's message).
func TestStartFailureKeepsCause(t *testing.T) {
	vmi := newVMI(apiv1.PhaseFailed, false)
	vmi.Status.Conditions = []*apiv1.Condition{{Type: apiv1.ConditionSynchronized, Status: "False",
		Reason: "SyncFailed", Message: "unable to stat: /images/vmlinuz: No such file or directory"}}
	f := newFixture(t, newVM("Always"), vmi)
	f.reconcile(t)
	sf := f.vm(t).Status.StartFailure
	if sf.GetLastFailureReason() != "SyncFailed" || sf.GetLastFailureMessage() != "unable to stat: /images/vmlinuz: No such file or directory" {
		t.Fatalf("start failure %v", sf)
	}
	vmi = newVMI(apiv1.PhaseFailed, false)
	vmi.Status.Reason, vmi.Status.Message = "GuestCrashed", "the guest kernel panicked"
	f = newFixture(t, newVM("Always"), vmi)
	f.reconcile(t)
	if sf := f.vm(t).Status.StartFailure; sf.GetLastFailureReason() != "GuestCrashed" || sf.GetLastFailureMessage() != "the guest kernel panicked" {
		t.Fatalf("start failure %v", sf)
	}
}
