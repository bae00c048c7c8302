package vmi

import (
	"net/netip"
	"strings"
	"testing"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
)

// withForwards gives v one user-mode network with forwards fs.
func withForwards(v *apiv1.VirtualMachineInstance, fs ...*apiv1.PortForward) *apiv1.VirtualMachineInstance {
	return attached(v, netIface{&apiv1.Network{Name: "default", User: &apiv1.UserNetwork{PortForwards: fs}}, ""})
}

// fwd is a forward of host port port on addr ("" for the default
// 127.0.0.1) over protocol ("" for tcp).
func fwd(addr string, port int32, protocol string) *apiv1.PortForward {
	return &apiv1.PortForward{HostAddress: addr, HostPort: port, GuestPort: 80, Protocol: protocol}
}

// widePolicy also lets forwards bind 0.0.0.0 and 127.0.0.2.
func widePolicy() *validation.HostPolicy {
	p := netPolicy()
	p.ForwardAddresses = append(p.ForwardAddresses, netip.MustParseAddr("0.0.0.0"), netip.MustParseAddr("127.0.0.2"))
	return p
}

func unschedulableMessage(t *testing.T, f *fixture, name string) string {
	t.Helper()
	v := f.stored(name)
	c := apiv1.FindCondition(v.Status.Conditions, apiv1.ConditionPodScheduled)
	if v.Status.NodeName != "" || c.GetStatus() != apiv1.ConditionFalse || c.GetReason() != ReasonUnschedulable {
		t.Fatalf("%s: node %q, PodScheduled %v; want it unschedulable", name, v.Status.NodeName, c)
	}
	return c.GetMessage()
}

// Issue 33, defect 6: two instances never get the same host port on one
// node. A forward's host address, port and protocol is a resource of the
// node: held as soon as the first is placed (its reservation, before the
// cache shows it), while the cache shows it, and given back once it
// ended. 0.0.0.0 overlaps every address of its port and protocol; another
// address or protocol does not.
func TestPlaceByHostPort(t *testing.T) {
	f := newFixture(t, Options{HostPolicy: widePolicy()}, []*apiv1.Node{node("n1", "8", "16Gi", nil)},
		withForwards(vmi("first", 1, "1Gi"), fwd("", 18080, "")),
		withForwards(vmi("second", 1, "1Gi"), fwd("127.0.0.1", 18080, "tcp")),
		withForwards(vmi("wildcard", 1, "1Gi"), fwd("0.0.0.0", 18080, "")),
		withForwards(vmi("udp", 1, "1Gi"), fwd("", 18080, "udp")),
		withForwards(vmi("other-address", 1, "1Gi"), fwd("127.0.0.2", 18080, "")),
		withForwards(vmi("other-port", 1, "1Gi"), fwd("", 18081, "")),
	)
	place := func(name string) {
		t.Helper()
		if _, err := f.reconcile(name); err != nil {
			t.Fatal(err)
		}
	}
	place("first")
	if got := f.stored("first").Status.NodeName; got != "n1" {
		t.Fatalf("first placed on %q", got)
	}
	// Not synced: only the reservation knows first holds the port.
	place("second")
	if got, want := unschedulableMessage(t, f, "second"), "0/1 nodes are available: 1 node(s) had the host port 127.0.0.1:18080/tcp in use."; got != want {
		t.Fatalf("second: %q, want %q", got, want)
	}
	f.syncCaches()
	place("wildcard")
	if got, want := unschedulableMessage(t, f, "wildcard"), "0/1 nodes are available: 1 node(s) had the host port 0.0.0.0:18080/tcp in use."; got != want {
		t.Fatalf("wildcard: %q, want %q", got, want)
	}
	for _, name := range []string{"udp", "other-address", "other-port"} {
		place(name)
		if got := f.stored(name).Status.NodeName; got != "n1" {
			t.Errorf("%s placed on %q: its forward overlaps none", name, got)
		}
	}
	f.syncCaches()

	// first ends: second gets the port; the wildcard still overlaps the
	// other address's forward (and now second's).
	f.vmis.Update(t, "default", "first", func(v *apiv1.VirtualMachineInstance) { v.Status.Phase = apiv1.PhaseSucceeded })
	f.syncCaches()
	place("second")
	if got := f.stored("second").Status.NodeName; got != "n1" {
		t.Fatalf("second placed on %q once first ended, want n1", got)
	}
	f.syncCaches()
	place("wildcard")
	if got, want := unschedulableMessage(t, f, "wildcard"), "0/1 nodes are available: 1 node(s) had the host port 0.0.0.0:18080/tcp in use."; got != want {
		t.Fatalf("wildcard: %q, want %q", got, want)
	}
}

// With another node free, the second instance goes there, and the
// reasons count per node as kube-scheduler's do.
func TestHostPortInUseOnOneNode(t *testing.T) {
	f := newFixture(t, Options{}, []*apiv1.Node{node("a", "8", "16Gi", nil), node("b", "8", "8Gi", nil)},
		on(withForwards(vmi("first", 1, "1Gi"), fwd("", 18080, ""), fwd("", 18081, "")), "a", apiv1.PhaseRunning),
		withForwards(vmi("second", 1, "1Gi"), fwd("", 18080, "")),
		withForwards(vmi("third", 1, "1Gi"), fwd("", 18081, ""), fwd("", 18080, "")),
	)
	if _, err := f.reconcile("second"); err != nil {
		t.Fatal(err)
	}
	if got := f.stored("second").Status.NodeName; got != "b" {
		t.Fatalf("second placed on %q, want b (a has its port in use)", got)
	}
	if _, err := f.reconcile("third"); err != nil {
		t.Fatal(err)
	}
	// a holds both of third's ports, b (by second's reservation) 18080.
	want := "0/2 nodes are available: 1 node(s) had the host port 127.0.0.1:18081/tcp in use, 2 node(s) had the host port 127.0.0.1:18080/tcp in use."
	if got := unschedulableMessage(t, f, "third"); got != want {
		t.Fatalf("third: %q, want %q", got, want)
	}
}

// A migration's target holds the instance's host ports while the
// incoming QEMU binds them there, and the instance's own forwards never
// count against it.
func TestHostPortsFollowMigration(t *testing.T) {
	mover := on(withForwards(vmi("mover", 1, "1Gi"), fwd("", 18080, "")), "a", apiv1.PhaseRunning)
	f := newFixture(t, Options{}, []*apiv1.Node{migratable(node("a", "8", "16Gi", nil), "10.0.0.1"),
		migratable(node("b", "8", "16Gi", nil), "10.0.0.2"), migratable(node("c", "8", "8Gi", nil), "10.0.0.3")},
		mover, withForwards(vmi("late", 1, "1Gi"), fwd("", 18080, "")))
	if got, msg := f.c.PlaceMigrationTarget(f.stored("mover"), nil); got != "b" {
		t.Fatalf("mover's target = %q (%s), want b: its own port on a is excluded with a", got, msg)
	}
	f.vmis.Update(t, "default", "mover", func(v *apiv1.VirtualMachineInstance) {
		v.Status.MigrationState = &apiv1.MigrationState{MigrationUid: "m1", SourceNode: "a", TargetNode: "b"}
	})
	f.syncCaches()
	if _, err := f.reconcile("late"); err != nil {
		t.Fatal(err)
	}
	if got := f.stored("late").Status.NodeName; got != "c" {
		t.Fatalf("late placed on %q, want c: a and b hold the port", got)
	}
}

// Placement applies the policy too, to instances written before it
// changed or straight into etcd, with the field and the flag to change,
// and so does the choice of a migration target.
func TestPlacementAppliesHostPolicy(t *testing.T) {
	n := withNets(node("n1", "8", "16Gi", nil), []string{"docker0", "br0"}, []string{"default"})
	f := newFixture(t, Options{}, []*apiv1.Node{n, withNets(node("n2", "8", "16Gi", nil), []string{"docker0"}, nil)},
		attached(vmi("docker", 1, "1Gi"), bridgeNet("lan", "docker0", "")),
		withForwards(vmi("api", 1, "1Gi"), fwd("0.0.0.0", 7443, ""), fwd("", 80, "")),
		attached(vmi("nat", 1, "1Gi"), libvirtNet("nat", "default", "")),
		on(attached(vmi("running", 1, "1Gi"), bridgeNet("lan", "docker0", "")), "n1", apiv1.PhaseRunning),
	)
	for _, tc := range []struct{ name, want string }{
		{"docker", `0/2 nodes are available: the server's host-resource policy refuses the instance: spec.networks[0].bridge.bridge: ` +
			`Forbidden: bridge "docker0" is not one instances may attach to; the server allows none (its --allowed-bridges).`},
		{"api", `0/2 nodes are available: the server's host-resource policy refuses the instance: spec.networks[0].user.port_forwards[0].host_address: ` +
			`Forbidden: 0.0.0.0 is not an address port forwards may bind; the server allows 127.0.0.1 (its --port-forward-addresses) (and 2 more).`},
		{"nat", `0/2 nodes are available: the server's host-resource policy refuses the instance: spec.networks[0].network.name: ` +
			`Forbidden: libvirt network "default" is not one instances may attach to; the server allows none (its --allowed-networks).`},
	} {
		if _, err := f.reconcile(tc.name); err != nil {
			t.Fatal(err)
		}
		if got := unschedulableMessage(t, f, tc.name); got != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, got, tc.want)
		}
	}
	got, msg := f.c.PlaceMigrationTarget(f.stored("running"), nil)
	if got != "" || !strings.Contains(msg, `bridge "docker0" is not one instances may attach to`) {
		t.Errorf("migration target of an instance the policy refuses = %q, %q", got, msg)
	}
}

// The index gives back exactly one holding per remove: a migrating
// instance holds its ports on its target twice for a moment.
func TestPortIndexRemovesOneHolding(t *testing.T) {
	hp := validation.HostPort{Protocol: "tcp", Addr: netip.MustParseAddr("127.0.0.1"), Port: 18080}
	m := newPortIndex()
	m.add("b", "default/mover", []validation.HostPort{hp})
	m.add("b", "default/mover", []validation.HostPort{hp})
	m.remove("b", "default/mover", []validation.HostPort{hp})
	byNode := map[string][]validation.HostPort{}
	m.heldByOthers("default/other", []validation.HostPort{hp}, byNode)
	if len(byNode["b"]) != 1 {
		t.Fatalf("after one remove of two: %v", byNode)
	}
	m.remove("b", "default/mover", []validation.HostPort{hp})
	if len(m.bySlot) != 0 {
		t.Fatalf("after both removes: %v", m.bySlot)
	}
}
