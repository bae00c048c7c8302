package apiserver

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// errorReason is the ErrorInfo reason of a status error.
func errorReason(err error) string {
	for _, d := range status.Convert(err).Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info.GetReason()
		}
	}
	return ""
}

// Evict shuts down what its strategy lets go, marks and refuses what has
// to migrate (or be moved by someone else), and refuses what may neither
// stop nor move; dry runs change nothing.
func TestEvictFollowsTheStrategy(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	strategy := func(s string) func(*apiv1.VirtualMachineInstance) {
		return func(v *apiv1.VirtualMachineInstance) { v.Spec.EvictionStrategy = s }
	}
	paused := func(v *apiv1.VirtualMachineInstance) {
		v.Spec.EvictionStrategy = apiv1.EvictionStrategyLiveMigrate
		v.Spec.Paused = true
	}
	f.runningInstance(t, "live", strategy(apiv1.EvictionStrategyLiveMigrate))
	f.runningInstance(t, "ext", strategy(apiv1.EvictionStrategyExternal))
	f.runningInstance(t, "none", func(v *apiv1.VirtualMachineInstance) {
		v.Spec.EvictionStrategy = apiv1.EvictionStrategyNone
		v.Metadata.Finalizers = []string{apiv1.FinalizerVMController} // its VM's, which holds it until its end is seen
	})
	f.runningInstance(t, "default", nil) // cluster default LiveMigrateIfPossible, migratable
	f.runningInstance(t, "paused", paused)
	evict := func(name string, dry bool) error {
		_, err := f.vmis.Evict(ctx, &apiv1.EvictVirtualMachineInstanceRequest{
			Key: &apiv1.ObjectKey{Namespace: "default", Name: name}, DryRun: dry})
		return err
	}

	for _, name := range []string{"live", "ext", "default"} {
		if err := evict(name, true); code(err) != codes.ResourceExhausted || errorReason(err) != apiv1.ReasonEvictionTriggeredEvacuation {
			t.Errorf("%s dry run: %v, want ResourceExhausted %s", name, err, apiv1.ReasonEvictionTriggeredEvacuation)
		}
		if storedVMI(t, f, name).GetStatus().GetEvacuationNodeName() != "" {
			t.Errorf("%s: a dry run marked it", name)
		}
		err := evict(name, false)
		if code(err) != codes.ResourceExhausted || !strings.Contains(status.Convert(err).Message(), "Eviction triggered evacuation of instance default/"+name) {
			t.Errorf("%s: %v", name, err)
		}
		if got := storedVMI(t, f, name).GetStatus().GetEvacuationNodeName(); got != "a" {
			t.Errorf("%s: evacuation_node_name %q, want a", name, got)
		}
	}
	err := evict("paused", false)
	if code(err) != codes.ResourceExhausted || errorReason(err) != apiv1.ReasonDisruptionBudget ||
		!strings.Contains(status.Convert(err).Message(), apiv1.ReasonPausedNotLiveMigratable) {
		t.Errorf("paused: %v, want ResourceExhausted %s saying why", err, apiv1.ReasonDisruptionBudget)
	}
	if v := storedVMI(t, f, "paused"); v.GetStatus().GetEvacuationNodeName() != "" || v.GetMetadata().GetDeletionTimestamp() != nil {
		t.Error("a refused eviction changed the instance")
	}

	if err := evict("none", true); err != nil {
		t.Fatal(err)
	}
	if storedVMI(t, f, "none").GetMetadata().GetDeletionTimestamp() != nil {
		t.Fatal("a dry run shut it down")
	}
	if err := evict("none", false); err != nil {
		t.Fatal(err)
	}
	v := storedVMI(t, f, "none")
	if v.GetMetadata().GetAnnotations()[apiv1.AnnotationEvicted] != "a" {
		t.Errorf("evicted instance not annotated: %v", v.GetMetadata())
	}
	if v.GetMetadata().GetDeletionTimestamp() == nil {
		t.Error("evicted instance not deleting")
	}
	if err := evict("missing", false); code(err) != codes.NotFound {
		t.Errorf("missing: %v, want NotFound", err)
	}
}

// Drain cordons and sets spec.drain; uncordon clears both; a node agent
// cannot clear its instances' evacuation mark.
func TestDrainAndMarkAreTheServers(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	registerNode(t, f, "a")
	n, err := f.nodes.Drain(ctx, &apiv1.CordonNodeRequest{Name: "a"})
	if err != nil || !n.GetSpec().GetUnschedulable() || !n.GetSpec().GetDrain() {
		t.Fatalf("drain: %v, %v", n.GetSpec(), err)
	}
	if n := registerNode(t, f, "a"); !n.GetSpec().GetDrain() {
		t.Fatal("re-registration cleared the drain")
	}
	// A finished drain's record does not answer for the next one.
	if _, err := f.st.Nodes.GuaranteedUpdate(ctx, "", "a", func(n *apiv1.Node) (*apiv1.Node, error) {
		n.Status.Evacuation = &apiv1.NodeEvacuation{Drained: true}
		n.Spec.Drain = false
		return n, nil
	}); err != nil {
		t.Fatal(err)
	}
	if n, err := f.nodes.Drain(ctx, &apiv1.CordonNodeRequest{Name: "a"}); err != nil || n.GetStatus().GetEvacuation() != nil {
		t.Fatalf("a new drain kept the old record: %v, %v", n.GetStatus().GetEvacuation(), err)
	}
	n, err = f.nodes.Uncordon(ctx, &apiv1.CordonNodeRequest{Name: "a"})
	if err != nil || n.GetSpec().GetUnschedulable() || n.GetSpec().GetDrain() {
		t.Fatalf("uncordon: %v, %v", n.GetSpec(), err)
	}

	marked := f.runningInstance(t, "web", func(v *apiv1.VirtualMachineInstance) { v.Status.EvacuationNodeName = "a" })
	marked.Status.EvacuationNodeName = ""
	if err := checkNodeStatusWrite(storedVMI(t, f, "web"), marked, "a"); code(err) != codes.PermissionDenied {
		t.Errorf("node clearing its mark: %v, want PermissionDenied", err)
	}
}

// Deleting a node fails its instances: refused while one may not be shut
// down, allowed once those have left or ended.
func TestNodeDeleteHonoursTheBudget(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	registerNode(t, f, "a")
	f.runningInstance(t, "stays", func(v *apiv1.VirtualMachineInstance) { v.Spec.EvictionStrategy = apiv1.EvictionStrategyLiveMigrate })
	f.runningInstance(t, "may-stop", func(v *apiv1.VirtualMachineInstance) { v.Spec.EvictionStrategy = apiv1.EvictionStrategyNone })
	_, err := f.nodes.Delete(ctx, &apiv1.DeleteNodeRequest{Name: "a"})
	if code(err) != codes.ResourceExhausted || errorReason(err) != apiv1.ReasonDisruptionBudget ||
		!strings.Contains(status.Convert(err).Message(), "default/stays (LiveMigrate)") || strings.Contains(status.Convert(err).Message(), "may-stop") {
		t.Fatalf("delete with a LiveMigrate instance: %v", err)
	}
	if _, err := f.nodes.Get(ctx, &apiv1.GetNodeRequest{Name: "a"}); err != nil {
		t.Fatalf("the refused delete removed the node: %v", err)
	}
	if _, err := f.st.VMIs.GuaranteedUpdate(ctx, "default", "stays", func(v *apiv1.VirtualMachineInstance) (*apiv1.VirtualMachineInstance, error) {
		v.Status.Phase = apiv1.PhaseSucceeded
		return v, nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.nodes.Delete(ctx, &apiv1.DeleteNodeRequest{Name: "a"}); err != nil {
		t.Fatalf("delete once the LiveMigrate instance ended: %v", err)
	}
}
