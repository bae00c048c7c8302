package nodeagent

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/fake"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// The agent's loops on the fake clock: each wait is on that clock, so a
// test steps it exactly as far as it means to.

// fakeNodes is the node service: heartbeats grant a 40 s lease every
// 10 s, or fail while down.
type fakeNodes struct {
	mu    sync.Mutex
	down  bool
	beats int
}

func (f *fakeNodes) Register(context.Context, *apiv1.RegisterNodeRequest, ...grpc.CallOption) (*apiv1.Node, error) {
	return &apiv1.Node{}, nil
}

func (f *fakeNodes) Heartbeat(context.Context, *apiv1.HeartbeatRequest, ...grpc.CallOption) (*apiv1.HeartbeatResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.beats++
	if f.down {
		return nil, status.Error(codes.Unavailable, "control plane down")
	}
	return &apiv1.HeartbeatResponse{HeartbeatIntervalSeconds: 10, LeaseDurationSeconds: 40}, nil
}

func (f *fakeNodes) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.beats
}

// waitForTimer waits until the loop under test waits on the fake clock:
// nothing else of a unit agent does.
func (u *unit) waitForTimer() {
	u.t.Helper()
	testutil.Eventually(u.t, waitTimeout, "the loop waiting on the clock", u.clock.HasWaiters)
}

// While heartbeats fail the lease runs out on the agent's clock: the
// RestartElsewhere guest is destroyed when it ends, not a moment before,
// and only once; a Wait guest is left alone.
func TestHeartbeatLoopFencesWhenTheLeaseEnds(t *testing.T) {
	u := newUnit(t)
	nodes := &fakeNodes{}
	u.a.nodes = nodes
	u.create("re", withPolicy(apiv1.NodeFailurePolicyRestartElsewhere))
	u.create("w")
	u.mustReconcile("re")
	u.mustReconcile("w")
	if _, err := u.a.heartbeat(context.Background(), true); err != nil { // a lease of 40 s from now
		t.Fatal(err)
	}
	nodes.mu.Lock()
	nodes.down = true
	nodes.mu.Unlock()

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); u.a.heartbeatLoop(ctx, 10*time.Second) }()
	defer func() { cancel(); <-done }()
	for beat := 2; beat <= 4; beat++ { // 10, 20, 30 s: the lease holds
		u.waitForTimer()
		u.clock.Step(10 * time.Second)
		testutil.Eventually(t, waitTimeout, "a failed heartbeat", func() bool { return nodes.count() == beat })
	}
	u.waitForTimer() // the third failure was judged
	if d, _ := u.fake.Domain(domainOf("re")); d.State != fake.StateRunning {
		t.Fatalf("fenced before the lease ended: %+v", d)
	}
	u.clock.Step(10 * time.Second) // 40 s: the lease ends
	testutil.Eventually(t, waitTimeout, "the RestartElsewhere guest destroyed", func() bool {
		d, _ := u.fake.Domain(domainOf("re"))
		return d.State == fake.StateShutoff
	})
	u.waitForTimer()
	u.clock.Step(10 * time.Second)
	testutil.Eventually(t, waitTimeout, "another failed heartbeat", func() bool { return nodes.count() == 6 })
	u.waitForTimer()
	if n := u.fake.Count("Kill"); n != 1 {
		t.Errorf("%d kills; the same expiry must fence once", n)
	}
	if d, _ := u.fake.Domain(domainOf("w")); d.State != fake.StateRunning {
		t.Errorf("Wait guest touched: %+v", d)
	}
}

// retry backs off on the agent's clock: 100 ms, doubling, and never tries
// again before the backoff passed.
func TestRetryBacksOffOnTheClock(t *testing.T) {
	u := newUnit(t)
	var (
		mu       sync.Mutex
		attempts int
	)
	tries := func() int { mu.Lock(); defer mu.Unlock(); return attempts }
	done := make(chan error, 1)
	go func() {
		done <- retry(context.Background(), u.a, "test", func() error {
			mu.Lock()
			defer mu.Unlock()
			if attempts++; attempts < 4 {
				return errors.New("not yet")
			}
			return nil
		})
	}()
	for i, backoff := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond} {
		u.waitForTimer()
		u.clock.Step(backoff - time.Millisecond)
		if n := tries(); n != i+1 {
			t.Fatalf("attempt %d before its backoff of %v passed", n, backoff)
		}
		u.clock.Step(time.Millisecond)
		testutil.Eventually(t, waitTimeout, "the next attempt", func() bool { return tries() == i+2 })
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
