package nodeagent

import (
	"context"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// The node registers what the host has and heartbeats; a stopping agent
// reports it unschedulable with a last heartbeat.
func TestRegisterHeartbeatAndUnschedulableOnStop(t *testing.T) {
	h := newHarness(t)
	_, stop := h.runAgent()
	var node *apiv1.Node
	testutil.Eventually(t, waitTimeout, "node registered and ready", func() bool {
		n, err := h.stores.Nodes.Get(h.ctx, "", testNode)
		node = n
		return err == nil && n.Status.GetSchedulable() && n.Status.GetHeartbeat() != nil
	})
	st := node.Status
	if st.Capacity["cpu"] != "4" || st.Capacity["memory"] != "8Gi" {
		t.Errorf("capacity %v", st.Capacity)
	}
	if st.Allocatable["cpu"] != "4" || st.Allocatable["memory"] != "7680Mi" {
		t.Errorf("allocatable %v, want memory 8Gi - 512Mi", st.Allocatable)
	}
	if node.Metadata.Labels[apiv1.LabelKVM] != "false" {
		t.Errorf("labels %v", node.Metadata.Labels)
	}
	ni := st.NodeInfo
	if ni.GetLibvirtVersion() != "10.0.0" || ni.GetQemuVersion() != "8.2.0" || ni.GetKvmUsable() ||
		ni.GetKernelVersion() != "6.1.0" || ni.GetArchitecture() != "amd64" || ni.GetHostname() != "host1" {
		t.Errorf("node info %v", ni)
	}
	// Saved after the heartbeat returns, which the store may show first.
	testutil.Eventually(t, waitTimeout, "lease expiry saved", func() bool {
		n, err := h.db.GetNode()
		return err == nil && !n.LeaseExpiry.IsZero()
	})
	stop()
	n, err := h.stores.Nodes.Get(h.ctx, "", testNode)
	if err != nil || n.Status.GetSchedulable() {
		t.Fatalf("after stop: schedulable=%v, %v", n.GetStatus().GetSchedulable(), err)
	}
}

// Each heartbeat renews the self-fencing lease of RestartElsewhere guests
// with the time left on the node's lease; Wait guests never get one.
func TestLeaseRenewedOnlyForRestartElsewhere(t *testing.T) {
	h := newHarness(t, harnessOptions{heartbeatInterval: time.Second, nodeLease: 40 * time.Second})
	_, _ = h.runAgent()
	h.createVMI("re", withPolicy(apiv1.NodeFailurePolicyRestartElsewhere))
	h.createVMI("w", withPolicy(apiv1.NodeFailurePolicyWait))
	h.createVMI("default-policy")
	for _, n := range []string{"re", "w", "default-policy"} {
		h.waitPhase(n, apiv1.PhaseRunning)
	}
	testutil.Eventually(t, waitTimeout, "two heartbeat renewals", func() bool {
		d, _ := h.fake.Domain(domainOf("re"))
		return len(d.Leases) >= 3 // armed at launch, then one per heartbeat
	})
	d, _ := h.fake.Domain(domainOf("re"))
	for _, l := range d.Leases {
		if l <= 30*time.Second || l > 40*time.Second {
			t.Errorf("lease %v: want the time left on a 40 s lease", l)
		}
	}
	for _, n := range []string{"w", "default-policy"} {
		if d, _ := h.fake.Domain(domainOf(n)); len(d.Leases) != 0 {
			t.Errorf("%s (Wait) got lease renewals %v", n, d.Leases)
		}
	}
	// The policy reaches the domain metadata, where the launcher's
	// watchdog reads it (docs/failover.md, point 3).
	for n, want := range map[string]string{"re": apiv1.NodeFailurePolicyRestartElsewhere, "w": apiv1.NodeFailurePolicyWait,
		"default-policy": apiv1.NodeFailurePolicyWait} {
		if d, _ := h.fake.Domain(domainOf(n)); d.NodeFailurePolicy != want {
			t.Errorf("%s: domain records policy %q, want %q", n, d.NodeFailurePolicy, want)
		}
	}
	for _, c := range h.fake.Calls() {
		if c.Op == "RenewLease" && c.Domain != domainOf("re") {
			t.Errorf("RenewLease on %s", c.Domain)
		}
		if c.Op == "RenewLease" && c.Lease <= 0 {
			t.Errorf("RenewLease(%v) would disarm the watchdog", c.Lease)
		}
	}
}

// A RestartElsewhere guest is not started without a valid lease.
func TestNoRestartElsewhereStartWithoutLease(t *testing.T) {
	h := newHarness(t)
	a := h.directAgent()
	a.lease.set(time.Time{})
	h.createVMI("nl", withPolicy(apiv1.NodeFailurePolicyRestartElsewhere))
	if wait := h.reconcile(a, "nl"); wait <= 0 {
		t.Fatal("no retry")
	}
	if h.fake.Count("Launch") != 0 {
		t.Fatal("started a RestartElsewhere guest without a lease")
	}
	a.lease.set(h.clock.Now().Add(40 * time.Second))
	h.reconcile(a, "nl")
	if h.phase("nl") != apiv1.PhaseRunning {
		t.Fatal("not started once the lease is valid")
	}
}

// When the lease runs out the agent destroys RestartElsewhere guests
// itself, in case a launcher's watchdog did not.
func TestSelfFenceAtLeaseExpiry(t *testing.T) {
	h := newHarness(t)
	a := h.directAgent()
	h.createVMI("re", withPolicy(apiv1.NodeFailurePolicyRestartElsewhere))
	h.createVMI("w")
	h.reconcile(a, "re")
	h.reconcile(a, "w")
	h.clock.Step(41 * time.Second)
	if !a.lease.expiredUnfenced(h.clock.Now()) {
		t.Fatal("lease not seen as expired")
	}
	a.selfFence(h.ctx, "test")
	if d, _ := h.fake.Domain(domainOf("re")); d.State != "Shutoff" {
		t.Errorf("RestartElsewhere domain %+v not destroyed", d)
	}
	if d, _ := h.fake.Domain(domainOf("w")); d.State != "Running" {
		t.Errorf("Wait domain %+v touched", d)
	}
	if a.lease.expiredUnfenced(h.clock.Now()) {
		t.Error("the same expiry fenced twice")
	}
}

// beatRecorder is the node service as heartbeats use it: it accepts every
// beat and keeps the image list each carried (nil for none).
type beatRecorder struct {
	NodeReporter // registration is not called by the heartbeat loop
	mu           sync.Mutex
	beats        []*apiv1.NodeImageList
}

func (b *beatRecorder) Heartbeat(_ context.Context, in *apiv1.HeartbeatRequest, _ ...grpc.CallOption) (*apiv1.HeartbeatResponse, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.beats = append(b.beats, in.GetImages())
	return &apiv1.HeartbeatResponse{LeaseDurationSeconds: 40, HeartbeatIntervalSeconds: 3600}, nil
}

func (b *beatRecorder) carried() []*apiv1.NodeImageList {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]*apiv1.NodeImageList(nil), b.beats...)
}

// handedImages is the image inventory as the heartbeat loop uses it, with
// the pending list set by the test. Its Changed channel is unbuffered, so
// a wake-up sent has been taken by the loop, and the next one is taken
// only once the loop handled it.
type handedImages struct {
	imageList // listing and registration are not called by the loop
	changed   chan struct{}
	mu        sync.Mutex
	pending   *apiv1.NodeImageList
}

func (h *handedImages) Changed() <-chan struct{} { return h.changed }

func (h *handedImages) setPending(l *apiv1.NodeImageList) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.pending = l
}

func (h *handedImages) Pending() *apiv1.NodeImageList {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.pending
}

func (h *handedImages) MarkSent(l *apiv1.NodeImageList) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if proto.Equal(l, h.pending) {
		h.pending = nil
	}
}

// The heartbeat loop beats early when the image inventory has a new list
// pending, once; a wake-up with nothing pending (a listing equal to what
// the server has) costs no beat. Its regular beat, an hour away on the
// fake clock, never comes.
func TestHeartbeatLoopBeatsEarlyForAPendingList(t *testing.T) {
	u := newUnit(t)
	nodes := &beatRecorder{}
	imgs := &handedImages{changed: make(chan struct{})}
	u.a.nodes, u.a.images = nodes, imgs
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); u.a.heartbeatLoop(ctx, time.Hour) }()
	defer func() { cancel(); <-done }()
	// Returns once the loop took the wake-up, so the one before it is
	// handled.
	wake := func() { imgs.changed <- struct{}{} }

	wake()
	wake()
	if b := nodes.carried(); len(b) != 0 {
		t.Fatalf("%d beats with nothing pending", len(b))
	}
	l := &apiv1.NodeImageList{Items: []*apiv1.NodeImage{{Name: "new.raw"}}}
	imgs.setPending(l)
	wake() // the early beat
	wake() // sent: nothing pending
	wake()
	if b := nodes.carried(); len(b) != 1 || !proto.Equal(b[0], l) {
		t.Fatalf("beats carried %v; want one, with the pending list", b)
	}
}
