package apiserver

import (
	"context"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// Register stores the node's bridges and libvirt networks, sorted; a
// heartbeat replaces them only when it carries an inventory, and keeps
// them (and the lease) when the one it carries is invalid.
func TestNodeNetworksRegisterAndHeartbeat(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	n := nodeWithImages("host-1")
	n.Status.Bridges = []string{"vpguest0", "br0"}
	n.Status.Networks = []string{"lan", "default"}
	got, err := f.nodes.Register(ctx, &apiv1.RegisterNodeRequest{Node: n})
	if err != nil {
		t.Fatal(err)
	}
	want := func(got *apiv1.Node, bridges, networks []string) {
		t.Helper()
		if !slices.Equal(got.Status.Bridges, bridges) || !slices.Equal(got.Status.Networks, networks) {
			t.Fatalf("bridges %q networks %q; want %q %q", got.Status.Bridges, got.Status.Networks, bridges, networks)
		}
	}
	want(got, []string{"br0", "vpguest0"}, []string{"default", "lan"})

	heartbeat := func(inv *apiv1.NodeNetworkInventory) *apiv1.Node {
		t.Helper()
		f.now = f.now.Add(10 * time.Second)
		if _, err := f.nodes.Heartbeat(ctx, &apiv1.HeartbeatRequest{Name: "host-1", Schedulable: true, NetworkInventory: inv}); err != nil {
			t.Fatal(err)
		}
		n, err := f.nodes.Get(ctx, &apiv1.GetNodeRequest{Name: "host-1"})
		if err != nil {
			t.Fatal(err)
		}
		if !n.Status.Heartbeat.AsTime().Equal(f.now) {
			t.Fatalf("heartbeat not recorded: %v", n.Status.Heartbeat.AsTime())
		}
		return n
	}
	want(heartbeat(nil), []string{"br0", "vpguest0"}, []string{"default", "lan"})
	want(heartbeat(&apiv1.NodeNetworkInventory{Bridges: []string{"br1", "br0"}}), []string{"br0", "br1"}, nil)
	want(heartbeat(&apiv1.NodeNetworkInventory{Bridges: []string{"a/b"}, Networks: []string{"x"}}), []string{"br0", "br1"}, nil)
	want(heartbeat(&apiv1.NodeNetworkInventory{}), nil, nil)

	bad := nodeWithImages("host-1")
	bad.Status.Bridges = []string{"a-bridge-name-too-long"}
	if _, err := f.nodes.Register(ctx, &apiv1.RegisterNodeRequest{Node: bad}); code(err) != codes.InvalidArgument {
		t.Fatalf("register with an invalid bridge name: %v", err)
	}
}
