package provider

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

func TestDrainRemaining(t *testing.T) {
	draining := func(ev *apiv1.NodeEvacuation) *apiv1.Node {
		return &apiv1.Node{Spec: &apiv1.NodeSpec{Unschedulable: true, Drain: true}, Status: &apiv1.NodeStatus{Evacuation: ev}}
	}
	for _, c := range []struct {
		name string
		node *apiv1.Node
		want string
	}{
		{"not read", nil, "the node could not be read"},
		{"no report", draining(nil), "the evacuation controller has not reported on the drain yet"},
		{"empty report", draining(&apiv1.NodeEvacuation{}), "no instance is left, but the evacuation controller has not reported the node drained yet"},
		{"remaining", draining(&apiv1.NodeEvacuation{Remaining: []*apiv1.Evacuee{
			{Namespace: "default", Name: "web", EvictionStrategy: "LiveMigrate", State: "Blocked",
				Message: "it is not live-migratable: a host disk (HostDisk)"},
			{Namespace: "prod", Name: "db", EvictionStrategy: "External", State: "External"},
		}}), "default/web (LiveMigrate, Blocked: it is not live-migratable: a host disk (HostDisk)); prod/db (External, External)"},
	} {
		if got := drainRemaining(c.node); got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
	}
}

// fakeNodes answers Get with the nodes of seq in turn, the last one
// forever; an error in errs at the same index is returned instead.
type fakeNodes struct {
	apiv1.NodesClient
	mu   sync.Mutex
	seq  []*apiv1.Node
	errs []error
	gets int
}

func (f *fakeNodes) Get(context.Context, *apiv1.GetNodeRequest, ...grpc.CallOption) (*apiv1.Node, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	i := min(f.gets, len(f.seq)-1)
	f.gets++
	if i < len(f.errs) && f.errs[i] != nil {
		return nil, f.errs[i]
	}
	return f.seq[i], nil
}

func TestWaitDrained(t *testing.T) {
	old := drainPollInterval
	drainPollInterval = time.Millisecond
	t.Cleanup(func() { drainPollInterval = old })

	node := func(drain, done bool, remaining ...*apiv1.Evacuee) *apiv1.Node {
		return &apiv1.Node{
			Metadata: &apiv1.ObjectMeta{Name: "n1"},
			Spec:     &apiv1.NodeSpec{Unschedulable: true, Drain: drain},
			Status:   &apiv1.NodeStatus{Evacuation: &apiv1.NodeEvacuation{Drained: done, Remaining: remaining}},
		}
	}
	web := &apiv1.Evacuee{Namespace: "default", Name: "web", EvictionStrategy: "LiveMigrate", State: "Migrating"}
	blocked := &apiv1.Evacuee{Namespace: "default", Name: "web", EvictionStrategy: "LiveMigrate", State: "Blocked", Message: "it is not live-migratable"}
	unavailable := status.Error(codes.Unavailable, "connection refused")

	t.Run("drained", func(t *testing.T) {
		f := &fakeNodes{seq: []*apiv1.Node{node(true, false, web), node(true, false, web), node(true, true)}, errs: []error{nil, unavailable}}
		n, err := waitDrained(context.Background(), f, "n1")
		if err != nil || !n.Drained() {
			t.Fatalf("waitDrained = %v, %v; want the drained node", n, err)
		}
	})
	t.Run("canceled", func(t *testing.T) {
		f := &fakeNodes{seq: []*apiv1.Node{node(true, false, web), node(false, false)}}
		if _, err := waitDrained(context.Background(), f, "n1"); !errors.Is(err, errDrainCanceled) {
			t.Fatalf("err = %v, want errDrainCanceled", err)
		}
	})
	t.Run("deleted", func(t *testing.T) {
		f := &fakeNodes{seq: []*apiv1.Node{node(true, false, web), nil}, errs: []error{nil, status.Error(codes.NotFound, "gone")}}
		if _, err := waitDrained(context.Background(), f, "n1"); status.Code(err) != codes.NotFound {
			t.Fatalf("err = %v, want NotFound", err)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		f := &fakeNodes{seq: []*apiv1.Node{node(true, false, blocked)}}
		n, err := waitDrained(ctx, f, "n1")
		if !errors.Is(err, errWaitTimeout) || n == nil {
			t.Fatalf("waitDrained = %v, %v; want the last node and errWaitTimeout", n, err)
		}
		if want := "default/web (LiveMigrate, Blocked: it is not live-migratable)"; !strings.HasSuffix(err.Error(), want) {
			t.Errorf("err = %q, want it to end with %q", err, want)
		}
	})
}
