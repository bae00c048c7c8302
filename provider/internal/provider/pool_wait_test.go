package provider

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// poolAt is pool db at generation gen wanting replicas VMs of strategy,
// whose status says observed, replicas, ready, updated and template
// generation tg.
func poolAt(gen int64, replicas int32, strategy string, observed int64, have, ready, updated int32, tg int64) *apiv1.VirtualMachinePool {
	return &apiv1.VirtualMachinePool{
		Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: "db", Generation: gen},
		Spec: &apiv1.VirtualMachinePoolSpec{Replicas: &replicas, VirtualMachineTemplate: &apiv1.VirtualMachineTemplateSpec{
			Spec: &apiv1.VirtualMachineSpec{RunStrategy: strategy},
		}},
		Status: &apiv1.VirtualMachinePoolStatus{ObservedGeneration: observed, Replicas: have, ReadyReplicas: ready,
			UpdatedReplicas: updated, TemplateGeneration: tg},
	}
}

// poolVM is VM db-<n> with printable status ps.
func poolVM(n, ps string) vmView {
	return vmView{vm: &apiv1.VirtualMachine{
		Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: "db-" + n, Uid: "vm-" + n},
		Spec:     &apiv1.VirtualMachineSpec{RunStrategy: apiv1.RunStrategyAlways},
		Status:   &apiv1.VirtualMachineStatus{PrintableStatus: ps},
	}}
}

func TestJudgePool(t *testing.T) {
	always := replicaTarget{generation: 3, ready: true}
	halted := replicaTarget{generation: 3}
	unschedulable := poolVM("1", apiv1.PrintableErrorUnschedulable)
	unschedulable.vmi = &apiv1.VirtualMachineInstance{Status: &apiv1.VirtualMachineInstanceStatus{
		Phase: apiv1.PhaseScheduling,
		Conditions: []*apiv1.Condition{{Type: apiv1.ConditionPodScheduled, Status: apiv1.ConditionFalse, Reason: "Unschedulable",
			Message: "0/2 nodes are available: 2 Insufficient memory."}},
	}}
	crash := poolVM("0", apiv1.PrintableCrashLoopBackOff)
	crash.vm.Status.StartFailure = &apiv1.VirtualMachineStartFailure{ConsecutiveFailCount: 2,
		LastFailureReason: "LauncherFailed", LastFailureMessage: "qemu: could not load kernel",
		RetryAfterTimestamp: timestamppb.New(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))}
	deleting := poolVM("2", apiv1.PrintableCrashLoopBackOff)
	deleting.vm.Metadata.DeletionTimestamp = timestamppb.Now()
	failure := &apiv1.Condition{Type: apiv1.ConditionReplicaFailure, Status: apiv1.ConditionTrue,
		Reason: apiv1.ReasonFailedScaleOut, Message: "quota exceeded"}
	withCond := func(p *apiv1.VirtualMachinePool, c *apiv1.Condition) *apiv1.VirtualMachinePool {
		p.Status.Conditions = append(p.Status.Conditions, c)
		return p
	}
	paused := poolAt(3, 2, "Always", 3, 0, 0, 0, 1)
	paused.Spec.Paused = true
	for _, c := range []struct {
		name string
		t    replicaTarget
		v    poolView
		done bool
		err  string
	}{
		{"done", always, poolView{pool: poolAt(3, 2, "Always", 3, 2, 2, 2, 3)}, true, ""},
		{"status from before the change", always, poolView{pool: poolAt(3, 2, "Always", 2, 2, 2, 2, 2)}, false, ""},
		{"not all ready", always, poolView{pool: poolAt(3, 2, "Always", 3, 2, 1, 2, 3)}, false, ""},
		{"rollout under way", always, poolView{pool: poolAt(3, 2, "Always", 3, 2, 2, 1, 2)}, false, ""},
		{"template generation behind", always, poolView{pool: poolAt(3, 2, "Always", 3, 2, 2, 2, 2)}, false, ""},
		{"scaling down", always, poolView{pool: poolAt(3, 1, "Always", 3, 2, 2, 2, 2)}, false, ""},
		{"halted VMs are never ready", halted, poolView{pool: poolAt(3, 2, "Halted", 3, 2, 0, 2, 3)}, true, ""},
		{"paused", always, poolView{pool: paused}, true, ""},
		{"replica failure", always, poolView{pool: withCond(poolAt(3, 2, "Always", 3, 1, 1, 1, 2), failure)}, false,
			"the pool controller reports FailedScaleOut: quota exceeded"},
		{"replica failure from before the change", always, poolView{pool: withCond(poolAt(3, 2, "Always", 2, 1, 1, 1, 2), failure)}, false, ""},
		{"unschedulable VM", always, poolView{pool: poolAt(3, 2, "Always", 3, 2, 1, 2, 3), vms: []vmView{poolVM("0", "Running"), unschedulable}}, false,
			"VM db-1 cannot run: no node can run it (ErrorUnschedulable): 0/2 nodes are available: 2 Insufficient memory"},
		{"crash loop", always, poolView{pool: poolAt(3, 2, "Always", 3, 2, 0, 2, 3), vms: []vmView{crash}}, false,
			"VM db-0 cannot run: it is in CrashLoopBackOff: its instance failed 2 time(s) in a row before reaching Running (last: LauncherFailed: qemu: could not load kernel)"},
		{"a VM on its way out is no reason", always, poolView{pool: poolAt(3, 2, "Always", 3, 2, 2, 2, 3), vms: []vmView{deleting}}, true, ""},
	} {
		v := judgePool(c.t, c.v)
		if v.done != c.done || (v.err == nil) != (c.err == "") || (v.err != nil && !strings.Contains(v.err.Error(), c.err)) {
			t.Errorf("%s: done %v err %v, want done %v err %q (state %s)", c.name, v.done, v.err, c.done, c.err, v.state)
		}
	}
}

func TestDescribePool(t *testing.T) {
	p := poolAt(4, 3, "Always", 4, 3, 2, 1, 3)
	p.Status.Conditions = []*apiv1.Condition{{Type: apiv1.ConditionReplicaPaused, Status: apiv1.ConditionFalse}}
	got := describePool(poolView{pool: p, vms: []vmView{poolVM("0", "Running"), poolVM("1", "Starting"), poolVM("2", "")}})
	want := "3 of 3 VMs, 2 ready, 1 on the current template (template generation 3, generation 4); VMs db-0 Running, db-1 Starting, db-2 (new)"
	if got != want {
		t.Errorf("describePool = %q\nwant %q", got, want)
	}
}
