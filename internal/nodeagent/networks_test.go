package nodeagent

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// recordingInventories keeps the network inventories heartbeats carried
// (nil for none).
type recordingInventories struct {
	apiv1.NodesClient
	mu    sync.Mutex
	beats []*apiv1.NodeNetworkInventory
}

func (r *recordingInventories) Heartbeat(ctx context.Context, in *apiv1.HeartbeatRequest, opts ...grpc.CallOption) (*apiv1.HeartbeatResponse, error) {
	resp, err := r.NodesClient.Heartbeat(ctx, in, opts...)
	if err == nil {
		r.mu.Lock()
		r.beats = append(r.beats, in.GetNetworkInventory())
		r.mu.Unlock()
	}
	return resp, err
}

// sent returns the inventories heartbeats carried, and how many
// heartbeats there were.
func (r *recordingInventories) sent() (out []*apiv1.NodeNetworkInventory, beats int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, l := range r.beats {
		if l != nil {
			out = append(out, l)
		}
	}
	return out, len(r.beats)
}

// The node registers with its bridges and libvirt networks (the launcher
// tools' list-networks); a new bridge goes out with an early heartbeat,
// once, and is on the Node long before the next regular beat.
func TestNetworksRegisteredAndSentOnChange(t *testing.T) {
	const refresh = time.Second
	h := newHarness(t, harnessOptions{heartbeatInterval: time.Hour})
	rec := &recordingInventories{NodesClient: h.api.Nodes}
	h.api.Nodes = rec
	var mu sync.Mutex
	bridges := []string{"br0"}
	setBridges := func(b ...string) { mu.Lock(); bridges = b; mu.Unlock() }
	h.runAgent(h.onFakeClock, func(o *Options) {
		o.Timing.NetworkRefreshPeriod = refresh
		o.ListBridges = func(context.Context) ([]string, error) {
			mu.Lock()
			defer mu.Unlock()
			return slices.Clone(bridges), nil
		}
	})
	stored := func() string {
		n, err := h.stores.Nodes.Get(h.ctx, "", testNode)
		if err != nil {
			return ""
		}
		return strings.Join(n.GetStatus().GetBridges(), ",") + " | " + strings.Join(n.GetStatus().GetNetworks(), ",")
	}
	testutil.Eventually(t, waitTimeout, "node registered with its networks", func() bool { return stored() == "br0 | default" })
	testutil.Eventually(t, waitTimeout, "first heartbeat", func() bool { _, n := rec.sent(); return n >= 1 })
	if sent, _ := rec.sent(); len(sent) != 0 {
		t.Fatalf("the first heartbeat repeated the registered inventory: %v", sent)
	}

	setBridges("vpguest0", "br0")
	h.stepUntil(refresh, "the new bridge sent before the next regular heartbeat", func() bool { sent, _ := rec.sent(); return len(sent) == 1 })
	if got := stored(); got != "br0,vpguest0 | default" {
		t.Fatalf("stored %q", got)
	}
	// Unchanged listings cost no beat.
	for range 5 {
		h.clock.Step(refresh)
	}
	setBridges()
	h.stepUntil(refresh, "the bridges' removal sent", func() bool { sent, _ := rec.sent(); return len(sent) == 2 })
	if sent, beats := rec.sent(); beats != 3 || stored() != " | default" {
		t.Fatalf("%d heartbeats carried %d inventories, stored %q; want one early beat per change", beats, len(sent), stored())
	}
}
