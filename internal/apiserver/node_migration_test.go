package apiserver

import (
	"context"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/virtplane/terraform-provider-virtplane/internal/api/migrationdest"
	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

func migrationNode(name, addr string) *apiv1.RegisterNodeRequest {
	return &apiv1.RegisterNodeRequest{Node: &apiv1.Node{
		Metadata: &apiv1.ObjectMeta{Name: name},
		Status:   &apiv1.NodeStatus{Allocatable: map[string]string{"cpu": "4", "memory": "8Gi"}, Schedulable: true, MigrationAddress: addr},
	}}
}

// TestRegisterMigrationAddress: a node registers where migrations to it
// go only as a unicast IP literal in the operator's networks that no
// other node holds; each refusal is InvalidArgument naming the field.
func TestRegisterMigrationAddress(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	srv := New(f.st, Options{Clock: func() time.Time { return f.now },
		MigrationDestinations: migrationdest.Policy{Networks: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}}})
	nodes := newNodeService(srv)

	n, err := nodes.Register(ctx, migrationNode("a", "10.0.0.1"))
	if err != nil || n.GetStatus().GetMigrationAddress() != "10.0.0.1" {
		t.Fatalf("Register a at 10.0.0.1 = %v, %v", n.GetStatus(), err)
	}
	// Again, the same address: its own.
	if _, err := nodes.Register(ctx, migrationNode("a", "10.0.0.1")); err != nil {
		t.Fatalf("re-registering a: %v", err)
	}
	for _, tc := range []struct{ name, node, addr, want string }{
		{"another node's address", "b", "10.0.0.1", "node a registered it"},
		{"outside the networks", "b", "192.168.1.2", "--migration-networks 10.0.0.0/8,fd00::/8"},
		{"loopback", "b", "127.0.0.1", "loopback"},
		{"unspecified", "b", "0.0.0.0", "unspecified"},
		{"multicast", "b", "ff02::1", "multicast"},
		{"a host name", "b", "node-b.example", "not an IP address"},
		{"not canonical", "b", "fd00::0:2", "written as fd00::2"},
	} {
		_, err := nodes.Register(ctx, migrationNode(tc.node, tc.addr))
		if code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "status.migration_address") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Register %s at %q = %v; want InvalidArgument naming status.migration_address, saying %q", tc.name, tc.node, tc.addr, err, tc.want)
		}
	}
	if _, err := f.st.Nodes.Get(ctx, "", "b"); err == nil {
		t.Fatal("a refused registration stored the node")
	}
	// a moves; its old address is free.
	if _, err := nodes.Register(ctx, migrationNode("a", "10.0.0.5")); err != nil {
		t.Fatal(err)
	}
	if n, err := nodes.Register(ctx, migrationNode("b", "10.0.0.1")); err != nil || n.GetStatus().GetMigrationAddress() != "10.0.0.1" {
		t.Fatalf("b at a's old address = %v, %v", n.GetStatus(), err)
	}
	// Without one the node takes no migrations; that clears it.
	if n, err := nodes.Register(ctx, migrationNode("b", "")); err != nil || n.GetStatus().GetMigrationAddress() != "" {
		t.Fatalf("b without an address = %v, %v", n.GetStatus(), err)
	}
}

// listCounter counts the Node lists a server makes.
type listCounter struct {
	store.Store[*apiv1.Node]
	lists atomic.Int32
}

func (c *listCounter) List(ctx context.Context, opts store.ListOptions) ([]*apiv1.Node, int64, error) {
	c.lists.Add(1)
	return c.Store.List(ctx, opts)
}

// TestRegisterKeepsTheNodesOwnAddress: a node registering again with the
// address it holds (every agent start) reads no other Node; only a claim
// of a new address does. Two nodes that both hold one (two servers'
// Register calls raced) can still restart their agents (the handoff
// sends no migration to either), and a third still cannot claim it.
func TestRegisterKeepsTheNodesOwnAddress(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	st := f.st
	counter := &listCounter{Store: st.Nodes}
	st.Nodes = counter
	nodes := newNodeService(New(st, Options{Clock: func() time.Time { return f.now }}))

	if _, err := nodes.Register(ctx, migrationNode("a", "10.0.0.1")); err != nil {
		t.Fatal(err)
	}
	if n := counter.lists.Load(); n != 1 {
		t.Fatalf("a's first registration listed the nodes %d times, want 1", n)
	}
	for range 3 {
		if _, err := nodes.Register(ctx, migrationNode("a", "10.0.0.1")); err != nil {
			t.Fatal(err)
		}
	}
	if n := counter.lists.Load(); n != 1 {
		t.Fatalf("re-registering a's own address listed the nodes %d more times, want 0", n-1)
	}

	// The race another server lost: b stored with a's address.
	if _, err := nodes.Register(ctx, migrationNode("b", "10.0.0.2")); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Nodes.GuaranteedUpdate(ctx, "", "b", func(n *apiv1.Node) (*apiv1.Node, error) {
		n.Status.MigrationAddress = "10.0.0.1"
		return n, nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b"} {
		if n, err := nodes.Register(ctx, migrationNode(name, "10.0.0.1")); err != nil || n.GetStatus().GetMigrationAddress() != "10.0.0.1" {
			t.Errorf("%s restarting with the address it holds: %v, %v", name, n.GetStatus(), err)
		}
	}
	if _, err := nodes.Register(ctx, migrationNode("c", "10.0.0.1")); code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "registered it") {
		t.Errorf("c claiming a held address: %v; want InvalidArgument", err)
	}
}
