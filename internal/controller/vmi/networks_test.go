package vmi

import (
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
)

// netPolicy is the default host-resource policy with the bridges and
// libvirt networks these tests attach to allowed.
func netPolicy() *validation.HostPolicy {
	p := validation.DefaultHostPolicy()
	p.Bridges, p.Networks = []string{"br0", "br1", "br9", "vpguest0"}, []string{"default", "lan"}
	return p
}

// withNets gives a node bridges and libvirt networks.
func withNets(n *apiv1.Node, bridges, networks []string) *apiv1.Node {
	return withNode(n, func(n *apiv1.Node) { n.Status.Bridges, n.Status.Networks = bridges, networks })
}

// attached gives v one interface per network, with the MAC given for it
// ("" for none).
func attached(v *apiv1.VirtualMachineInstance, nets ...netIface) *apiv1.VirtualMachineInstance {
	devs := &apiv1.Devices{}
	for _, n := range nets {
		v.Spec.Networks = append(v.Spec.Networks, n.net)
		devs.Interfaces = append(devs.Interfaces, &apiv1.Interface{Name: n.net.Name, MacAddress: n.mac})
	}
	v.Spec.Domain.Devices = devs
	return v
}

type netIface struct {
	net *apiv1.Network
	mac string
}

func bridgeNet(name, bridge, mac string) netIface {
	return netIface{&apiv1.Network{Name: name, Bridge: &apiv1.BridgeNetwork{Bridge: bridge}}, mac}
}

func libvirtNet(name, network, mac string) netIface {
	return netIface{&apiv1.Network{Name: name, Network: &apiv1.LibvirtNetwork{Name: network}}, mac}
}

func userNet(name, mac string) netIface {
	return netIface{&apiv1.Network{Name: name, User: &apiv1.UserNetwork{}}, mac}
}

func TestNetworkNeedsAndNodeMACs(t *testing.T) {
	v := attached(vmi("web", 1, "1Gi"),
		bridgeNet("lan", "br1", "02:AA:00:00:00:01"),
		bridgeNet("lan2", "br0", "02:aa:00:00:00:01"), // the same MAC, spelt otherwise
		bridgeNet("again", "br1", ""),                 // no MAC yet
		libvirtNet("virt", "default", "02:aa:00:00:00:02"),
		userNet("default", "02:aa:00:00:00:03"), // user mode: private to the guest
	)
	bridges, networks := networkNeeds(v.Spec)
	if !slices.Equal(bridges, []string{"br0", "br1"}) || !slices.Equal(networks, []string{"default"}) {
		t.Errorf("networkNeeds = %q, %q", bridges, networks)
	}
	if got := nodeMACs(v.Spec); !slices.Equal(got, []string{"02:aa:00:00:00:01", "02:aa:00:00:00:02"}) {
		t.Errorf("nodeMACs = %q", got)
	}
	if b, n := networkNeeds(vmi("plain", 1, "1Gi").Spec); b != nil || n != nil {
		t.Errorf("no networks: %q, %q", b, n)
	}
	if got := nodeMACs(vmi("plain", 1, "1Gi").Spec); got != nil {
		t.Errorf("no interfaces: %q", got)
	}
}

// Each missing bridge and libvirt network, and each MAC in use, is a
// reason of its own, counted per node as kube-scheduler counts its
// filters' reasons; node state comes first, resources last.
func TestChooseNetworks(t *testing.T) {
	req := resources{milliCPU: 100, memory: 1184 * mi}
	plain := func(name string) *apiv1.Node { return node(name, "4", "8Gi", nil) }
	both := withNets(plain("both"), []string{"br0", "vpguest0"}, []string{"default", "lan"})
	onlyBridge := withNets(plain("bridge"), []string{"br0"}, []string{"default"})
	onlyNet := withNets(plain("net"), []string{"virbr0"}, []string{"lan"})
	for _, tc := range []struct {
		name              string
		bridges, networks []string
		nodes             []candidate
		want              string
		message           string
	}{
		{name: "no networks needed: any node", nodes: []candidate{{node: plain("a")}}, want: "a"},
		{
			name: "the node with the bridge", bridges: []string{"br0"},
			nodes: []candidate{{node: onlyNet}, {node: onlyBridge, used: resources{memory: 6 * 1024 * mi}}}, want: "bridge",
		},
		{
			name: "the node with the libvirt network", networks: []string{"lan"},
			nodes: []candidate{{node: onlyBridge}, {node: onlyNet}}, want: "net",
		},
		{
			name: "the node with both", bridges: []string{"br0"}, networks: []string{"lan"},
			nodes: []candidate{{node: onlyBridge}, {node: onlyNet}, {node: both, used: resources{memory: 6 * 1024 * mi}}}, want: "both",
		},
		{
			name: "no node has the bridge", bridges: []string{"br0"},
			nodes:   []candidate{{node: plain("a")}, {node: onlyNet}},
			message: "0/2 nodes are available: 2 node(s) didn't have bridge br0.",
		},
		{
			name: "no node has the libvirt network", networks: []string{"lan"},
			nodes:   []candidate{{node: plain("a")}, {node: onlyBridge}},
			message: "0/2 nodes are available: 2 node(s) didn't have libvirt network lan.",
		},
		{
			name: "one reason per missing thing", bridges: []string{"br0", "br9"}, networks: []string{"lan"},
			nodes: []candidate{{node: onlyBridge}, {node: onlyNet}},
			message: "0/2 nodes are available: 1 node(s) didn't have bridge br0, 1 node(s) didn't have libvirt network lan, " +
				"2 node(s) didn't have bridge br9.",
		},
		{
			name: "a MAC another instance holds", bridges: []string{"br0"},
			nodes:   []candidate{{node: both, macsInUse: []string{"02:aa:00:00:00:01"}}, {node: plain("a")}},
			message: "0/2 nodes are available: 1 node(s) didn't have bridge br0, 1 node(s) had an instance with MAC 02:aa:00:00:00:01.",
		},
		{
			name: "a MAC in use on one node: the other", bridges: []string{"br0"},
			nodes: []candidate{{node: both, macsInUse: []string{"02:aa:00:00:00:01"}}, {node: onlyBridge, used: resources{memory: 6 * 1024 * mi}}},
			want:  "bridge",
		},
		{
			name: "node state before networks", bridges: []string{"br0"},
			nodes:   []candidate{{node: withNode(plain("a"), func(n *apiv1.Node) { n.Spec.Unschedulable = true })}},
			message: "0/1 nodes are available: 1 node(s) were unschedulable.",
		},
		{
			name: "networks before resources", bridges: []string{"br0"},
			nodes:   []candidate{{node: plain("a"), used: resources{memory: 8 * 1024 * mi}}, {node: onlyBridge, used: resources{memory: 8 * 1024 * mi}}},
			message: "0/2 nodes are available: 1 Insufficient memory, 1 node(s) didn't have bridge br0.",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := choose(needs{req: req, bridges: tc.bridges, networks: tc.networks}, nil, tc.nodes)
			if got.node != tc.want || got.message != tc.message {
				t.Fatalf("choose = %+v; want node %q message %q", got, tc.want, tc.message)
			}
		})
	}
}

// The controller places by the VMI's networks and writes the message
// unchanged into PodScheduled, which the VM's ErrorUnschedulable shows.
func TestPlaceByNetworks(t *testing.T) {
	nodes := []*apiv1.Node{
		withNets(node("big", "4", "8Gi", nil), nil, []string{"default"}),
		withNets(node("small", "4", "4Gi", nil), []string{"br0"}, nil),
	}
	f := newFixture(t, Options{HostPolicy: netPolicy()}, nodes,
		attached(vmi("web", 1, "1Gi"), bridgeNet("lan", "br0", "02:aa:00:00:00:01")),
		attached(vmi("lost", 1, "1Gi"), libvirtNet("lan", "lan", ""), bridgeNet("b", "br1", "")),
	)
	if _, err := f.reconcile("web"); err != nil {
		t.Fatal(err)
	}
	if got := f.stored("web").Status.NodeName; got != "small" {
		t.Errorf("web placed on %q, want small (the only node with br0)", got)
	}
	if _, err := f.reconcile("lost"); err != nil {
		t.Fatal(err)
	}
	c := apiv1.FindCondition(f.stored("lost").Status.Conditions, apiv1.ConditionPodScheduled)
	want := "0/2 nodes are available: 2 node(s) didn't have bridge br1, 2 node(s) didn't have libvirt network lan."
	if c.GetStatus() != apiv1.ConditionFalse || c.GetReason() != ReasonUnschedulable || c.GetMessage() != want {
		t.Errorf("PodScheduled = %v; want False/%s %q", c, ReasonUnschedulable, want)
	}
}

// A node where another instance has one of the VMI's MACs on a bridge is
// unfit: as soon as the first is placed (its reservation, before the
// cache shows it), while the cache shows it, and no longer once it ended.
// The instance's own MACs never count against it.
func TestPlaceByMAC(t *testing.T) {
	nodes := []*apiv1.Node{
		migratable(withNets(node("a", "4", "8Gi", nil), []string{"br0"}, nil), "10.0.0.1"),
		migratable(withNets(node("b", "4", "4Gi", nil), []string{"br0"}, nil), "10.0.0.2"),
	}
	const mac = "02:aa:00:00:00:01"
	f := newFixture(t, Options{HostPolicy: netPolicy()}, nodes,
		attached(vmi("first", 1, "1Gi"), bridgeNet("lan", "br0", mac)),
		attached(vmi("second", 1, "1Gi"), bridgeNet("lan", "br0", "02:AA:00:00:00:01")),
		attached(vmi("third", 1, "1Gi"), bridgeNet("lan", "br0", mac)),
		// The same MAC on user-mode networking clashes with nothing.
		attached(vmi("user", 1, "1Gi"), userNet("default", mac)),
	)
	if _, err := f.reconcile("first"); err != nil {
		t.Fatal(err)
	}
	if got := f.stored("first").Status.NodeName; got != "a" {
		t.Fatalf("first placed on %q, want a (most free memory)", got)
	}
	// Not synced: only the reservation knows first is on a.
	if _, err := f.reconcile("second"); err != nil {
		t.Fatal(err)
	}
	if got := f.stored("second").Status.NodeName; got != "b" {
		t.Fatalf("second placed on %q, want b: a has its MAC", got)
	}
	f.syncCaches()
	if _, err := f.reconcile("third"); err != nil {
		t.Fatal(err)
	}
	c := apiv1.FindCondition(f.stored("third").Status.Conditions, apiv1.ConditionPodScheduled)
	if want := "0/2 nodes are available: 2 node(s) had an instance with MAC " + mac + "."; c.GetMessage() != want {
		t.Fatalf("third: PodScheduled %v, want message %q", c, want)
	}
	if _, err := f.reconcile("user"); err != nil {
		t.Fatal(err)
	}
	if got := f.stored("user").Status.NodeName; got == "" {
		t.Fatal("a user-mode interface's MAC kept the instance off every node")
	}

	// first itself, migrating: its MAC on a is its own.
	if got, msg := f.c.PlaceMigrationTarget(f.stored("first"), nil); got != "" ||
		msg != "0/2 nodes are available: 1 node(s) had an instance with MAC "+mac+", 1 node(s) were the source." {
		t.Fatalf("first's migration target = %q, %q", got, msg)
	}
	f.vmis.Update(t, "default", "first", func(v *apiv1.VirtualMachineInstance) { v.Status.Phase = apiv1.PhaseSucceeded })
	f.syncCaches()
	if _, err := f.reconcile("third"); err != nil {
		t.Fatal(err)
	}
	if got := f.stored("third").Status.NodeName; got != "a" {
		t.Fatalf("third placed on %q once first ended, want a", got)
	}
}

// A migration's target holds the instance's MACs while it runs, and the
// node it ends on keeps holding them after.
func TestMACsFollowMigration(t *testing.T) {
	const mac = "02:aa:00:00:00:01"
	mover := on(attached(vmi("mover", 1, "1Gi"), bridgeNet("lan", "br0", mac)), "a", apiv1.PhaseRunning)
	f := newFixture(t, Options{HostPolicy: netPolicy()}, []*apiv1.Node{
		withNets(node("a", "4", "8Gi", nil), []string{"br0"}, nil),
		withNets(node("b", "4", "8Gi", nil), []string{"br0"}, nil),
	}, mover)
	inUse := func(self string) map[string][]string {
		byNode := map[string][]string{}
		f.c.usage.inUse(self, holdings{macs: []string{mac}}, byNode, nil)
		return byNode
	}
	held := func(node string) bool { return len(inUse("default/other")[node]) > 0 }
	if !held("a") || held("b") {
		t.Fatalf("before: a %v, b %v", held("a"), held("b"))
	}
	if got := inUse("default/mover"); len(got) != 0 {
		t.Fatalf("the instance's own MAC counts against it: %q", got)
	}
	f.vmis.Update(t, "default", "mover", func(v *apiv1.VirtualMachineInstance) {
		v.Status.MigrationState = &apiv1.MigrationState{MigrationUid: "m1", SourceNode: "a", TargetNode: "b"}
	})
	f.syncCaches()
	if !held("a") || !held("b") {
		t.Fatalf("migrating: a %v, b %v; want both", held("a"), held("b"))
	}
	f.vmis.Update(t, "default", "mover", func(v *apiv1.VirtualMachineInstance) {
		v.Status.MigrationState.Completed = true
		v.Status.NodeName = "b"
	})
	f.syncCaches()
	if held("a") || !held("b") {
		t.Fatalf("after: a %v, b %v; want b only", held("a"), held("b"))
	}
	f.vmis.Update(t, "default", "mover", func(v *apiv1.VirtualMachineInstance) { v.Status.Phase = apiv1.PhaseSucceeded })
	f.syncCaches()
	if held("b") || len(f.c.usage.macs.bySlot) != 0 {
		t.Fatalf("an ended instance still holds %v", f.c.usage.macs.bySlot)
	}
}

// A migration target must have the instance's bridges too.
func TestMigrationTargetNeedsNetworks(t *testing.T) {
	v := on(attached(vmi("vm1", 1, "1Gi"), bridgeNet("lan", "br0", "")), "a", apiv1.PhaseRunning)
	f := newFixture(t, Options{HostPolicy: netPolicy()}, []*apiv1.Node{
		migratable(withNets(node("a", "4", "8Gi", nil), []string{"br0"}, nil), "10.0.0.1"),
		migratable(node("b", "4", "8Gi", map[string]string{"zone": "z2"}), "10.0.0.2"),
		migratable(withNets(node("c", "4", "4Gi", nil), []string{"br0"}, nil), "10.0.0.3"),
	}, v)
	if got, msg := f.c.PlaceMigrationTarget(f.stored("vm1"), nil); got != "c" {
		t.Fatalf("target = %q (%s), want c", got, msg)
	}
	got, msg := f.c.PlaceMigrationTarget(f.stored("vm1"), map[string]string{"zone": "z2"})
	if want := "0/3 nodes are available: 1 node(s) didn't have bridge br0, 1 node(s) didn't match node selector, 1 node(s) were the source."; got != "" || msg != want {
		t.Fatalf("to b = %q, %q; want %q", got, msg, want)
	}
}

// A node's new bridge or libvirt network wakes the waiting VMIs.
func TestPlacementRelevantChangeSeesNetworks(t *testing.T) {
	before := node("n", "4", "8Gi", nil)
	for _, after := range []*apiv1.Node{
		withNets(before, []string{"br0"}, nil),
		withNets(before, nil, []string{"lan"}),
	} {
		if !placementRelevantChange(before, after) {
			t.Errorf("%v → %v is not a placement-relevant change", before.Status, after.Status)
		}
	}
	if placementRelevantChange(before, proto.Clone(before).(*apiv1.Node)) {
		t.Error("an unchanged node counts as placement-relevant")
	}
}
