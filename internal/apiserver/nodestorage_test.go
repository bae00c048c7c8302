package apiserver

import (
	"strings"
	"testing"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

func TestHeartbeatStorageAddressesAreNodesOwn(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	for _, name := range []string{"a", "b"} {
		if _, err := f.st.Nodes.Create(ctx, &apiv1.Node{Metadata: &apiv1.ObjectMeta{Name: name}, Status: &apiv1.NodeStatus{}}); err != nil {
			t.Fatal(err)
		}
	}
	beat := func(node, addr string) *apiv1.NodeStorage {
		t.Helper()
		_, err := f.nodes.Heartbeat(ctx, &apiv1.HeartbeatRequest{Name: node, Schedulable: true, Storage: &apiv1.NodeStorageList{
			Items: []*apiv1.NodeStorage{{Class: "ceph", Ready: true, Address: addr}},
		}})
		if err != nil {
			t.Fatal(err)
		}
		n, err := f.st.Nodes.Get(ctx, "", node)
		if err != nil || len(n.GetStatus().GetStorage()) != 1 {
			t.Fatalf("node %s: %v %v", node, n, err)
		}
		return n.Status.Storage[0]
	}
	if e := beat("a", "169.254.7.1"); !e.Ready || e.Address != "169.254.7.1" {
		t.Fatalf("a's own address: %v", e)
	}
	// b claims a's address: fencing b would cut a off.
	if e := beat("b", "169.254.7.1"); e.Ready || e.Address != "" || !strings.Contains(e.Message, "node a's") {
		t.Fatalf("b claiming a's address: %v", e)
	}
	if e := beat("b", "169.254.7.2"); !e.Ready || e.Address != "169.254.7.2" {
		t.Fatalf("b's own address: %v", e)
	}
	// Invalid lists keep the stored one.
	if _, err := f.nodes.Heartbeat(ctx, &apiv1.HeartbeatRequest{Name: "b", Schedulable: true, Storage: &apiv1.NodeStorageList{
		Items: []*apiv1.NodeStorage{{Class: "ceph", Address: "not-an-ip"}},
	}}); err != nil {
		t.Fatal(err)
	}
	if n, _ := f.st.Nodes.Get(ctx, "", "b"); n.GetStatus().GetStorage()[0].GetAddress() != "169.254.7.2" {
		t.Fatalf("invalid list replaced the stored one: %v", n.GetStatus().GetStorage())
	}
}
