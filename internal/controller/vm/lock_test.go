package vm

import (
	"testing"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// A VM held by a snapshot or a restore gets no new instance whatever its
// run strategy or start request says; once unlocked it starts, and a
// running instance is never touched by the lock.
func TestLockedVMDoesNotStart(t *testing.T) {
	locks := map[string]func(*apiv1.VirtualMachineStatus){
		"snapshot": func(st *apiv1.VirtualMachineStatus) { st.SnapshotInProgress = "snap" },
		"restore":  func(st *apiv1.VirtualMachineStatus) { st.RestoreInProgress = "rest" },
	}
	starts := map[string]func() *apiv1.VirtualMachine{
		"Always": func() *apiv1.VirtualMachine { return newVM(apiv1.RunStrategyAlways) },
		"Once":   func() *apiv1.VirtualMachine { return newVM(apiv1.RunStrategyOnce) },
		"Manual+start": func() *apiv1.VirtualMachine {
			vm := newVM(apiv1.RunStrategyManual)
			vm.Status.StateChangeRequests = []*apiv1.StateChangeRequest{startReq()}
			return vm
		},
		"RerunOnFailure": func() *apiv1.VirtualMachine { return newVM(apiv1.RunStrategyRerunOnFailure) },
	}
	for lname, lock := range locks {
		for sname, mk := range starts {
			t.Run(lname+"/"+sname, func(t *testing.T) {
				vm := mk()
				lock(vm.Status)
				f := newFixture(t, vm, nil)
				f.reconcile(t)
				if a := f.vmiAction(); a != "none" {
					t.Fatalf("locked VM: VMI action %s", a)
				}
				f.vms.Update(t, "default", "web", func(vm *apiv1.VirtualMachine) {
					vm.Status.SnapshotInProgress, vm.Status.RestoreInProgress = "", ""
				})
				f.refresh()
				f.vmis.Store.ResetWrites()
				f.reconcile(t)
				if a := f.vmiAction(); a != "start" {
					t.Fatalf("unlocked VM: VMI action %s, want start", a)
				}
			})
		}
	}
	t.Run("running instance untouched", func(t *testing.T) {
		vm := newVM(apiv1.RunStrategyAlways)
		vm.Status.SnapshotInProgress = "snap"
		f := newFixture(t, vm, newVMI(apiv1.PhaseRunning, true))
		f.reconcile(t)
		if a := f.vmiAction(); a != "none" {
			t.Fatalf("VMI action %s", a)
		}
	})
}

func TestStartBlocked(t *testing.T) {
	for _, tc := range []struct {
		st   *apiv1.VirtualMachineStatus
		want string
	}{
		{nil, ""},
		{&apiv1.VirtualMachineStatus{}, ""},
		{&apiv1.VirtualMachineStatus{SnapshotInProgress: "s"}, `snapshot "s" in progress`},
		{&apiv1.VirtualMachineStatus{RestoreInProgress: "r"}, `restore "r" in progress`},
	} {
		if got := startBlocked(&apiv1.VirtualMachine{Status: tc.st}); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.st, got, tc.want)
		}
	}
}
