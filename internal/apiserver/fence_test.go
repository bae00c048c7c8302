package apiserver

import (
	"context"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

func registerNode(t *testing.T, f *fixture, name string) *apiv1.Node {
	t.Helper()
	n, err := f.nodes.Register(context.Background(), &apiv1.RegisterNodeRequest{Node: &apiv1.Node{
		Metadata: &apiv1.ObjectMeta{Name: name},
		Status: &apiv1.NodeStatus{
			Allocatable: map[string]string{"cpu": "4", "memory": "8Gi"},
			Schedulable: true,
		},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// placedVMI stores an instance on node in phase, as the controllers and
// the node agent would have left it.
func placedVMI(t *testing.T, f *fixture, name, node, phase string) {
	t.Helper()
	_, err := f.st.VMIs.Create(context.Background(), &apiv1.VirtualMachineInstance{
		Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: name, Labels: map[string]string{apiv1.LabelNodeName: node}},
		Spec:     &apiv1.VirtualMachineInstanceSpec{},
		Status:   &apiv1.VirtualMachineInstanceStatus{Phase: phase, NodeName: node},
	})
	if err != nil {
		t.Fatal(err)
	}
}

func storedVMI(t *testing.T, f *fixture, name string) *apiv1.VirtualMachineInstance {
	t.Helper()
	v, err := f.st.VMIs.Get(context.Background(), "default", name)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func keyNames(keys []*apiv1.ObjectKey) []string {
	var out []string
	for _, k := range keys {
		out = append(out, k.GetNamespace()+"/"+k.GetName())
	}
	return out
}

func TestFenceRefusesNodeThatHeartbeats(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	registerNode(t, f, "host-1")
	placedVMI(t, f, "web", "host-1", apiv1.PhaseRunning)
	for _, tc := range []struct {
		age  time.Duration
		want string
	}{
		{3 * time.Second, "node host-1 is Ready: last heartbeat 3s ago; fence only a node that is down"},
		// Just inside the 40s lease: never rounded up to the lease.
		{39*time.Second + 600*time.Millisecond, "node host-1 is Ready: last heartbeat 39s ago; fence only a node that is down"},
	} {
		now := f.now
		f.now = now.Add(tc.age)
		_, err := f.nodes.Fence(ctx, &apiv1.FenceNodeRequest{Name: "host-1"})
		f.now = now
		st, _ := status.FromError(err)
		if st.Code() != codes.FailedPrecondition {
			t.Fatalf("fence %v after a heartbeat: %v", tc.age, err)
		}
		if want := tc.want; st.Message() != want {
			t.Fatalf("message %q, want %q", st.Message(), want)
		}
	}
	n, _ := f.nodes.Get(ctx, &apiv1.GetNodeRequest{Name: "host-1"})
	if apiv1.FindCondition(n.Status.Conditions, apiv1.ConditionNodeFenced) != nil || !n.Status.Schedulable {
		t.Fatalf("refused fence changed the node: %v", n.Status)
	}
	if v := storedVMI(t, f, "web"); v.Status.Phase != apiv1.PhaseRunning {
		t.Fatalf("refused fence failed an instance: %v", v.Status)
	}
	if _, err := f.nodes.Fence(ctx, &apiv1.FenceNodeRequest{Name: "ghost"}); code(err) != codes.NotFound {
		t.Fatalf("unknown node: %v", err)
	}
	if _, err := f.nodes.Fence(ctx, &apiv1.FenceNodeRequest{}); code(err) != codes.InvalidArgument {
		t.Fatalf("no name: %v", err)
	}
}

func TestFenceFailsInstancesIdempotently(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	registerNode(t, f, "host-1")
	registerNode(t, f, "host-2")
	placedVMI(t, f, "running", "host-1", apiv1.PhaseRunning)
	placedVMI(t, f, "scheduled", "host-1", apiv1.PhaseScheduled)
	placedVMI(t, f, "pending", "host-1", apiv1.PhasePending)
	placedVMI(t, f, "done", "host-1", apiv1.PhaseSucceeded)
	placedVMI(t, f, "elsewhere", "host-2", apiv1.PhaseRunning)
	placedVMI(t, f, "unplaced", "", apiv1.PhasePending)

	f.now = f.now.Add(40 * time.Second) // exactly one lease of silence
	resp, err := f.nodes.Fence(ctx, &apiv1.FenceNodeRequest{Name: "host-1"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"default/pending", "default/running", "default/scheduled"}
	if got := keyNames(resp.FailedInstances); !slices.Equal(got, want) {
		t.Fatalf("failed_instances %v, want %v", got, want)
	}
	fenced := apiv1.FindCondition(resp.Node.Status.Conditions, apiv1.ConditionNodeFenced)
	if fenced.GetStatus() != apiv1.ConditionTrue || fenced.GetReason() != "FencedByOperator" || resp.Node.Status.Schedulable {
		t.Fatalf("node after fence: %v", resp.Node.Status)
	}
	for _, name := range []string{"running", "scheduled", "pending"} {
		st := storedVMI(t, f, name).Status
		ts := st.PhaseTransitionTimestamps
		if st.Phase != apiv1.PhaseFailed || st.Reason != "NodeUnresponsive" || st.Message != "node fenced by operator" ||
			len(ts) != 1 || ts[0].Phase != apiv1.PhaseFailed || !ts[0].Time.AsTime().Equal(f.now) {
			t.Fatalf("%s after fence: %v", name, st)
		}
	}
	for name, phase := range map[string]string{"done": apiv1.PhaseSucceeded, "elsewhere": apiv1.PhaseRunning, "unplaced": apiv1.PhasePending} {
		if got := storedVMI(t, f, name).Status.Phase; got != phase {
			t.Fatalf("%s: phase %s, want %s", name, got, phase)
		}
	}

	// Again, later: same answer, nothing written.
	before := map[string]int64{}
	for _, name := range want {
		before[name] = storedVMI(t, f, name[len("default/"):]).Metadata.ResourceVersion
	}
	f.now = f.now.Add(time.Minute)
	again, err := f.nodes.Fence(ctx, &apiv1.FenceNodeRequest{Name: "host-1"})
	if err != nil {
		t.Fatal(err)
	}
	if got := keyNames(again.FailedInstances); !slices.Equal(got, want) {
		t.Fatalf("second fence reported %v", got)
	}
	if again.Node.Metadata.ResourceVersion != resp.Node.Metadata.ResourceVersion {
		t.Fatal("second fence rewrote the node")
	}
	for _, name := range want {
		if rv := storedVMI(t, f, name[len("default/"):]).Metadata.ResourceVersion; rv != before[name] {
			t.Fatalf("second fence rewrote %s", name)
		}
	}
}

func TestFencedNodeTakesWorkOnlyAfterReRegistering(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	registerNode(t, f, "host-1")
	f.now = f.now.Add(time.Hour)
	if _, err := f.nodes.Fence(ctx, &apiv1.FenceNodeRequest{Name: "host-1"}); err != nil {
		t.Fatal(err)
	}
	// A heartbeat alone (a partition healing) does not lift the fence.
	f.now = f.now.Add(time.Second)
	if _, err := f.nodes.Heartbeat(ctx, &apiv1.HeartbeatRequest{Name: "host-1", Schedulable: true}); err != nil {
		t.Fatal(err)
	}
	n, _ := f.nodes.Get(ctx, &apiv1.GetNodeRequest{Name: "host-1"})
	if apiv1.FindCondition(n.Status.Conditions, apiv1.ConditionNodeFenced).GetStatus() != apiv1.ConditionTrue {
		t.Fatalf("heartbeat lifted the fence: %v", n.Status.Conditions)
	}
	// Re-registering (the agent restarted) does.
	n = registerNode(t, f, "host-1")
	if c := apiv1.FindCondition(n.Status.Conditions, apiv1.ConditionNodeFenced); c != nil {
		t.Fatalf("fence kept after re-registration: %v", c)
	}
	if apiv1.FindCondition(n.Status.Conditions, apiv1.ConditionReady).GetStatus() != apiv1.ConditionTrue || !n.Status.Schedulable {
		t.Fatalf("re-registered node: %v", n.Status)
	}
}
