package vmi

import (
	"strings"
	"testing"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

func withKVM(n *apiv1.Node, kvm bool) *apiv1.Node {
	return withNode(n, func(n *apiv1.Node) { n.Status.NodeInfo = &apiv1.NodeInfo{KvmUsable: kvm} })
}

// migratable gives n a migration address, as its agent's
// --migration-address registers.
func migratable(n *apiv1.Node, addr string) *apiv1.Node {
	return withNode(n, func(n *apiv1.Node) { n.Status.MigrationAddress = addr })
}

func TestPlaceMigrationTarget(t *testing.T) {
	// A VM with a persistent volume is pinned to its node; its migration
	// takes the volume along, so the pin does not bind the target.
	pinned := on(vmi("vm1", 1, "1Gi"), "a", apiv1.PhaseRunning)
	pinned.Spec.NodeSelector = map[string]string{apiv1.LabelNodeName: "a", "zone": "z1"}
	pinned.Spec.Volumes = []*apiv1.Volume{{Name: "data", Persistent: &apiv1.PersistentVolume{Size: "1Gi", Image: "only-on-a.qcow2"}}}
	zone := map[string]string{"zone": "z1"}
	f := newFixture(t, Options{}, []*apiv1.Node{
		migratable(withKVM(node("a", "4", "8Gi", zone), false), "10.0.0.1"),
		migratable(withKVM(node("b", "4", "8Gi", zone), true), "10.0.0.2"),  // another accelerator
		migratable(withKVM(node("c", "4", "8Gi", zone), false), "10.0.0.3"), // fits
		migratable(withKVM(node("d", "4", "8Gi", nil), false), "10.0.0.4"),  // another zone
		withKVM(node("e", "4", "8Gi", zone), false),                         // takes no migrations
	}, pinned)

	if got, msg := f.c.PlaceMigrationTarget(f.stored("vm1"), nil); got != "c" {
		t.Fatalf("target = %q (%s), want c", got, msg)
	}
	// A node that registered no migration address is never a target.
	if got, msg := f.c.PlaceMigrationTarget(f.stored("vm1"), map[string]string{apiv1.LabelNodeName: "e"}); got != "" || !strings.Contains(msg, "1 "+reasonNoMigrationAddress) {
		t.Fatalf("to e = %q, %q; want refused, saying it takes no migrations", got, msg)
	}
	// added narrows; the instance's own keys win.
	got, msg := f.c.PlaceMigrationTarget(f.stored("vm1"), map[string]string{apiv1.LabelNodeName: "b"})
	if got != "" || !strings.Contains(msg, "1 "+reasonAccelerator) || !strings.Contains(msg, "1 "+reasonSource) {
		t.Fatalf("to b = %q, %q; want refused naming the accelerator and the source", got, msg)
	}
	if got, _ := f.c.PlaceMigrationTarget(f.stored("vm1"), map[string]string{"zone": "elsewhere"}); got != "c" {
		t.Fatalf("a clashing added key moved the instance to %q; its own value must win", got)
	}
	// Without persistent volumes a pin to the node is the user's: it holds.
	userPinned := f.stored("vm1")
	userPinned.Spec.Volumes = nil
	if got, msg := f.c.PlaceMigrationTarget(userPinned, nil); got != "" || !strings.Contains(msg, reasonSelector) {
		t.Fatalf("a user-pinned instance got target %q (%s); want none, naming the selector", got, msg)
	}

	// While the migration runs, the target holds the instance's memory
	// there: a second instance that would only fit on c without it
	// does not fit.
	f.vmis.Update(t, "default", "vm1", func(v *apiv1.VirtualMachineInstance) {
		v.Status.MigrationState = &apiv1.MigrationState{MigrationUid: "m1", SourceNode: "a", TargetNode: "c"}
	})
	f.syncCaches()
	if used := f.c.usage.onNode("c"); used.memory == 0 {
		t.Fatal("the migration target holds nothing on its node")
	}
	f.vmis.Update(t, "default", "vm1", func(v *apiv1.VirtualMachineInstance) {
		v.Status.MigrationState.Completed = true
		v.Status.NodeName = "c"
	})
	f.syncCaches()
	if a, c := f.c.usage.onNode("a"), f.c.usage.onNode("c"); a.memory != 0 || c.memory == 0 {
		t.Fatalf("after the migration: a holds %v, c %v; want everything on c, once", a, c)
	}
	before := f.c.usage.onNode("c")
	f.vmis.Update(t, "default", "vm1", func(v *apiv1.VirtualMachineInstance) { v.Status.Phase = apiv1.PhaseSucceeded })
	f.syncCaches()
	if c := f.c.usage.onNode("c"); c.memory != 0 || before.memory == 0 {
		t.Fatalf("an ended instance still holds %v on c", c)
	}
}
