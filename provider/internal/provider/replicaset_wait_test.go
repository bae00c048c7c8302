package provider

import (
	"strings"
	"testing"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// rsAt is replica set web at generation 2 wanting replicas instances,
// whose status says observed, have and ready.
func rsAt(replicas int32, observed int64, have, ready int32) *apiv1.VirtualMachineInstanceReplicaSet {
	return &apiv1.VirtualMachineInstanceReplicaSet{
		Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: "web", Generation: 2},
		Spec:     &apiv1.VirtualMachineInstanceReplicaSetSpec{Replicas: &replicas},
		Status:   &apiv1.VirtualMachineInstanceReplicaSetStatus{ObservedGeneration: observed, Replicas: have, ReadyReplicas: ready},
	}
}

func rsInstance(name, phase string, conds ...*apiv1.Condition) *apiv1.VirtualMachineInstance {
	return &apiv1.VirtualMachineInstance{
		Metadata: &apiv1.ObjectMeta{Name: name},
		Status:   &apiv1.VirtualMachineInstanceStatus{Phase: phase, Conditions: conds},
	}
}

func TestJudgeReplicaSet(t *testing.T) {
	tg := replicaTarget{generation: 2, ready: true}
	unsched := &apiv1.Condition{Type: apiv1.ConditionPodScheduled, Status: apiv1.ConditionFalse, Reason: "Unschedulable",
		Message: "0/2 nodes are available: 2 node(s) didn't match node selector."}
	failed := rsInstance("web-bbbbb", apiv1.PhaseFailed)
	failed.Status.Reason, failed.Status.Message = "LauncherFailed", "qemu exited"
	paused := rsAt(3, 2, 0, 0)
	paused.Spec.Paused = true
	for _, c := range []struct {
		name string
		v    replicaSetView
		done bool
		err  string
	}{
		{"done", replicaSetView{rs: rsAt(2, 2, 2, 2)}, true, ""},
		{"not seen yet", replicaSetView{rs: rsAt(2, 1, 2, 2)}, false, ""},
		{"not ready", replicaSetView{rs: rsAt(2, 2, 2, 1)}, false, ""},
		{"scaled to 0", replicaSetView{rs: rsAt(0, 2, 0, 0)}, true, ""},
		{"paused", replicaSetView{rs: paused}, true, ""},
		{"unschedulable", replicaSetView{rs: rsAt(2, 2, 2, 0), vmis: []*apiv1.VirtualMachineInstance{
			rsInstance("web-aaaaa", apiv1.PhaseScheduling, unsched)}}, false,
			"no node can run instance web-aaaaa (Unschedulable): 0/2 nodes are available: 2 node(s) didn't match node selector. Check"},
		{"failed", replicaSetView{rs: rsAt(2, 2, 1, 1), vmis: []*apiv1.VirtualMachineInstance{
			rsInstance("web-aaaaa", apiv1.PhaseRunning), failed}}, false,
			"instance web-bbbbb failed (LauncherFailed: qemu exited)"},
		{"an unschedulable instance that ended is no reason", replicaSetView{rs: rsAt(1, 2, 1, 1), vmis: []*apiv1.VirtualMachineInstance{
			rsInstance("web-aaaaa", apiv1.PhaseSucceeded, unsched)}}, true, ""},
	} {
		v := judgeReplicaSet(tg, c.v)
		if v.done != c.done || (v.err == nil) != (c.err == "") || (v.err != nil && !strings.Contains(v.err.Error(), c.err)) {
			t.Errorf("%s: done %v err %v, want done %v err %q (state %s)", c.name, v.done, v.err, c.done, c.err, v.state)
		}
	}
}
