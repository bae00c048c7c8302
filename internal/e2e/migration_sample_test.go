package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// placementSampler samples, while migrations run, where a domain exists
// and where it executes, on every node's libvirtd.
//
// A sample reads each node's state twice and counts only when both reads
// agree: the reads of one pass are sequential virsh calls, so a pass that
// straddles a handover (the source pauses, the target resumes, within the
// downtime) could otherwise show the guest running on both nodes, or on
// none, without that ever having been so.
type placementSampler struct {
	c      *mnCluster
	domain string
	stop   context.CancelFunc
	done   chan struct{}

	mu         sync.Mutex
	samples    int      // consistent samples
	torn       int      // passes whose two reads differed
	overlapped int      // samples with the domain on two nodes (the target's incoming QEMU)
	bad        []string // samples that broke the rule
}

// samplePlacement starts sampling VM name's domain until finish.
func (c *mnCluster) samplePlacement(name string) *placementSampler {
	ctx, cancel := context.WithCancel(c.ctx)
	s := &placementSampler{c: c, domain: c.domain(name), stop: cancel, done: make(chan struct{})}
	go s.run(ctx)
	c.t.Cleanup(s.halt)
	return s
}

func (s *placementSampler) halt() {
	s.stop()
	<-s.done
}

func (s *placementSampler) run(ctx context.Context) {
	defer close(s.done)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		a, errA := s.pass(ctx)
		b, errB := s.pass(ctx)
		if ctx.Err() != nil {
			return
		}
		s.mu.Lock()
		switch {
		case errA != nil || errB != nil:
			s.bad = append(s.bad, fmt.Sprintf("reading the domain's state: %v %v", errA, errB))
		case !slices.Equal(a, b):
			s.torn++
		default:
			s.samples++
			s.check(a)
		}
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// pass reads the domain's state on every node: "" where it does not
// exist.
func (s *placementSampler) pass(ctx context.Context) ([]string, error) {
	out := make([]string, len(s.c.nodes))
	for i, n := range s.c.nodes {
		st, err := n.DomainState(ctx, s.domain)
		if err != nil {
			if strings.Contains(err.Error(), "failed to get domain") {
				continue
			}
			return nil, fmt.Errorf("node %s: %w", n.Name, err)
		}
		out[i] = st
	}
	return out, nil
}

// check records a sample that breaks the rule: the guest exists on at
// least one node and executes on at most one. During a handover the
// guest may execute nowhere for the downtime (source paused, target not
// yet resumed); it exists on both nodes while the target's incoming QEMU
// waits, paused. The caller holds s.mu.
func (s *placementSampler) check(states []string) {
	exist, running := 0, 0
	for _, st := range states {
		if st != "" {
			exist++
		}
		if strings.HasPrefix(st, "running") {
			running++
		}
	}
	if exist > 1 {
		s.overlapped++
	}
	if exist == 0 || running > 1 {
		s.bad = append(s.bad, fmt.Sprintf("%q", states))
	}
}

// finish stops sampling and fails t unless every sample kept the rule
// and some sampled a migration in flight.
func (s *placementSampler) finish(t *testing.T) {
	t.Helper()
	s.halt()
	s.mu.Lock()
	defer s.mu.Unlock()
	t.Logf("placement samples: %d consistent (%d during a migration, domain on two nodes), %d torn and skipped",
		s.samples, s.overlapped, s.torn)
	if len(s.bad) > 0 {
		t.Fatalf("the guest ran on more than one node, or on none, in %d samples (states per node %v): %v",
			len(s.bad), s.nodeNames(), s.bad)
	}
	if s.overlapped == 0 {
		t.Fatalf("no consistent sample caught a migration in flight (%d samples, %d torn): the check proved nothing", s.samples, s.torn)
	}
}

func (s *placementSampler) nodeNames() []string {
	var out []string
	for _, n := range s.c.nodes {
		out = append(out, n.Name)
	}
	return out
}
