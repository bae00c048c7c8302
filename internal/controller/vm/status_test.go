package vm

import (
	"context"
	"fmt"
	"testing"

	"google.golang.org/protobuf/types/known/timestamppb"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

func TestConditionsAndRestartRequired(t *testing.T) {
	vmi := newVMI(apiv1.PhaseRunning, true)
	vmi.Status.Conditions = []*apiv1.Condition{
		{Type: apiv1.ConditionReady, Status: "True", Reason: "GuestRunning"},
		{Type: apiv1.ConditionPaused, Status: "True", Reason: "PausedByUser"},
		{Type: apiv1.ConditionPodScheduled, Status: "True"},
		{Type: apiv1.ConditionSoftwareEmulation, Status: "True"},
	}
	vm := newVM("Always")
	vm.Metadata.Generation = 2
	vm.Spec.Template.Spec.Domain.Memory.Guest = "256Mi"
	f := newFixture(t, vm, vmi)
	f.reconcile(t)
	st := f.vm(t).Status
	has := func(typ, status string) bool { return apiv1.FindCondition(st.Conditions, typ).GetStatus() == status }
	if !has("Ready", "True") || !has("Paused", "True") || !has("SoftwareEmulation", "True") || !has("RestartRequired", "True") {
		t.Fatalf("conditions %v", st.Conditions)
	}
	if apiv1.FindCondition(st.Conditions, apiv1.ConditionPodScheduled) != nil {
		t.Fatal("PodScheduled=True mirrored")
	}
	if st.PrintableStatus != apiv1.PrintablePaused || !st.Ready || !st.Created || st.ObservedGeneration != 1 || st.DesiredGeneration != 2 {
		t.Fatalf("status %v", st)
	}
	// A failing action shows in Failure.
	f = newFixture(t, newVM("Always"), nil)
	f.vmis.Store.FailNext("create", fmt.Errorf("disk full"))
	if _, err := f.c.Reconcile(context.Background(), "default/web"); err == nil {
		t.Fatal("create failure not returned")
	}
	fc := apiv1.FindCondition(f.vm(t).Status.Conditions, apiv1.ConditionFailure)
	if fc.GetStatus() != "True" || fc.GetReason() != "FailedCreate" {
		t.Fatalf("failure condition %v", fc)
	}
	f.refresh()
	f.reconcile(t)
	if apiv1.FindCondition(f.vm(t).Status.Conditions, apiv1.ConditionFailure) != nil {
		t.Fatal("Failure not cleared after a clean pass")
	}
}

// Printable statuses in KubeVirt's evaluation order (behaviour §2.1).
func TestPrintableStatusOrder(t *testing.T) {
	now := timestamppb.New(t0)
	withCond := func(phase string, c ...*apiv1.Condition) *apiv1.VirtualMachineInstance {
		v := newVMI(phase, phase == "Running")
		v.Status.Conditions = c
		return v
	}
	deleting := newVMI("Running", true)
	deleting.Metadata.DeletionTimestamp = now
	terminatingVM := newVM("Always")
	terminatingVM.Metadata.DeletionTimestamp = now
	migratingVMI := newVMI("Running", true)
	migratingVMI.Status.MigrationState = &apiv1.MigrationState{StartTimestamp: now}
	crashVM := newVM("Always")
	crashVM.Status.StartFailure = &apiv1.VirtualMachineStartFailure{ConsecutiveFailCount: 1}
	crashManual := newVM("Manual")
	crashManual.Status.StartFailure = &apiv1.VirtualMachineStartFailure{ConsecutiveFailCount: 1}
	cases := []struct {
		name     string
		vm       *apiv1.VirtualMachine
		vmi      *apiv1.VirtualMachineInstance
		add, del bool
		want     string
	}{
		{"terminating beats everything", terminatingVM, deleting, false, false, "Terminating"},
		{"stopping: VMI deleting", newVM("Always"), deleting, false, false, "Stopping"},
		{"stopping: delete expected", newVM("Always"), newVMI("Running", true), false, true, "Stopping"},
		{"migrating", newVM("Always"), migratingVMI, false, false, "Migrating"},
		{"paused", newVM("Always"), withCond("Running", &apiv1.Condition{Type: "Paused", Status: "True"}), false, false, "Paused"},
		{"running", newVM("Always"), newVMI("Running", true), false, false, "Running"},
		{"data volume error", newVM("Always"), withCond("Pending", &apiv1.Condition{Type: "Synchronized", Status: "False", Reason: "DataVolumeError"}), false, false, "DataVolumeError"},
		{"unschedulable", newVM("Always"), withCond("Pending", &apiv1.Condition{Type: "PodScheduled", Status: "False", Reason: "Unschedulable"}), false, false, "ErrorUnschedulable"},
		{"provisioning", newVM("Always"), withCond("Pending", &apiv1.Condition{Type: "Provisioning", Status: "True"}), false, false, "Provisioning"},
		{"starting: create expected", newVM("Always"), nil, true, false, "Starting"},
		{"starting: scheduled", newVM("Always"), newVMI("Scheduled", false), false, false, "Starting"},
		{"crash loop", crashVM, nil, false, false, "CrashLoopBackOff"},
		{"no crash loop for Manual", crashManual, nil, false, false, "Stopped"},
		{"stopped: final", newVM("Once"), newVMI("Succeeded", true), false, false, "Stopped"},
		{"stopped: absent", newVM("Halted"), nil, false, false, "Stopped"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := PrintableStatus(c.vm, c.vmi, c.add, c.del); got != c.want {
				t.Fatalf("got %s, want %s", got, c.want)
			}
		})
	}
}
