package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/testguest"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// guestReplicaSet is a replica set of the test guest selecting app=<name>.
func (c *mnCluster) guestReplicaSet(name string, replicas int32) *apiv1.VirtualMachineInstanceReplicaSet {
	labels := map[string]string{"app": name}
	tmpl := guestVM(c.ns, "", apiv1.RunStrategyAlways, c.nodes[0].Kernel, testguest.Cmdline()).Spec.Template
	tmpl.Metadata = &apiv1.ObjectMeta{Labels: labels}
	return &apiv1.VirtualMachineInstanceReplicaSet{
		Metadata: &apiv1.ObjectMeta{Namespace: c.ns, Name: name},
		Spec: &apiv1.VirtualMachineInstanceReplicaSetSpec{
			Replicas: proto.Int32(replicas),
			Selector: &apiv1.LabelSelector{MatchLabels: labels},
			Template: tmpl,
		},
	}
}

func (c *mnCluster) replicaSet(name string) *apiv1.VirtualMachineInstanceReplicaSet {
	c.t.Helper()
	rs, err := c.api.ReplicaSets.Get(c.ctx, &apiv1.GetReplicaSetRequest{Key: c.key(name)})
	if err != nil {
		c.t.Fatalf("getting replica set %s: %v", name, err)
	}
	return rs
}

// instancesOf lists the instances labelled app=app.
func (c *mnCluster) instancesOf(ctx context.Context, app string) ([]*apiv1.VirtualMachineInstance, error) {
	list, err := c.api.VMIs.List(ctx, &apiv1.ListVirtualMachineInstancesRequest{Options: &apiv1.ListOptions{
		Namespace: c.ns, LabelSelector: "app=" + app}})
	return list.GetItems(), err
}

// active reports an instance that counts as a replica: neither ended nor
// being deleted.
func active(v *apiv1.VirtualMachineInstance) bool {
	return v.GetMetadata().GetDeletionTimestamp() == nil && !apiv1.IsFinal(v.GetStatus().GetPhase())
}

// waitReplicas waits until the replica set app has exactly want
// instances, all Running and Ready on a node in on (any node when on is
// empty), and its status says so; it returns them by name.
func (c *mnCluster) waitReplicas(app string, want int, on ...string) map[string]*apiv1.VirtualMachineInstance {
	c.t.Helper()
	var got map[string]*apiv1.VirtualMachineInstance
	testutil.EventuallyNoError(c.t, 2*bootTimeout, fmt.Sprintf("%d instances of %s running", want, app), func() error {
		items, err := c.instancesOf(c.ctx, app)
		if err != nil {
			return err
		}
		got = map[string]*apiv1.VirtualMachineInstance{}
		for _, v := range items {
			st := v.GetStatus()
			if !active(v) || st.GetPhase() != apiv1.PhaseRunning || !apiv1.IsConditionTrue(st.GetConditions(), apiv1.ConditionReady) {
				return fmt.Errorf("%s: %s on %q", v.GetMetadata().GetName(), st.GetPhase(), st.GetNodeName())
			}
			if len(on) > 0 && !slices.Contains(on, st.GetNodeName()) {
				return fmt.Errorf("%s runs on %s", v.GetMetadata().GetName(), st.GetNodeName())
			}
			got[v.GetMetadata().GetName()] = v
		}
		if len(got) != want {
			return fmt.Errorf("%d instances %v", len(got), slices.Sorted(maps.Keys(got)))
		}
		if st := c.replicaSet(app).GetStatus(); st.GetReplicas() != int32(want) || st.GetReadyReplicas() != int32(want) {
			return fmt.Errorf("status %v", st)
		}
		return nil
	})
	return got
}

// waitBooted waits until the guest of each instance has printed its boot
// line on the console of the node it runs on.
func (c *mnCluster) waitBooted(vmis map[string]*apiv1.VirtualMachineInstance) {
	c.t.Helper()
	for _, v := range vmis {
		c.nodeNamed(v.GetStatus().GetNodeName()).console(c.t, v.GetMetadata().GetUid()).waitMarker(testguest.MarkerBooted, bootTimeout)
	}
}

// countSampler lists a replica set's instances through the API and keeps
// the most it ever saw, all of them and the active ones, with the passes
// that saw more than limit.
type countSampler struct {
	*sampler
	mu                   sync.Mutex
	maxListed, maxActive int
	over                 []string
}

func (c *mnCluster) sampleCount(app string, every time.Duration, limit int) *countSampler {
	s := &countSampler{}
	s.sampler = c.sample(every, func(ctx context.Context) error {
		items, err := c.instancesOf(ctx, app)
		if err != nil {
			return err
		}
		n := 0
		for _, v := range items {
			if active(v) {
				n++
			}
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		s.maxListed, s.maxActive = max(s.maxListed, len(items)), max(s.maxActive, n)
		if len(items) > limit {
			var names []string
			for _, v := range items {
				names = append(names, v.GetMetadata().GetName()+"="+v.GetStatus().GetPhase())
			}
			sort.Strings(names)
			s.over = append(s.over, fmt.Sprintf("%s: %d instances (%d active): %v", time.Now().Format("15:04:05.000"), len(items), n, names))
		}
		return nil
	})
	return s
}

func (s *countSampler) result() (maxListed, maxActive int, over []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.maxListed, s.maxActive, slices.Clone(s.over)
}

// TestReplicaSetNodeFence: a replica set of 4 on two nodes; one node
// loses power (agent, launchers, libvirtd and guests SIGKILLed) and is
// fenced once its lease has run out: its instances fail and the replica
// set replaces them on the survivor, whose own instances keep running.
func TestReplicaSetNodeFence(t *testing.T) {
	const lease, heartbeat = 10 * time.Second, 2 * time.Second
	c := newMultiNodeCluster(t, mnOptions{nodeLease: lease, heartbeat: heartbeat})
	t.Cleanup(c.dumpOnFailure)

	began := time.Now()
	if _, err := c.api.ReplicaSets.Create(c.ctx, &apiv1.CreateReplicaSetRequest{ReplicaSet: c.guestReplicaSet("web", 4)}); err != nil {
		t.Fatal(err)
	}
	before := c.waitReplicas("web", 4)
	ready := time.Since(began)
	c.waitBooted(before)
	report(t, "replica set of 4 on 2 nodes: created to 4 ready in %s, guests booted in %s",
		ready.Round(time.Millisecond), time.Since(began).Round(time.Millisecond))

	// The node with the most instances goes down.
	per := map[string][]string{}
	for name, v := range before {
		per[v.GetStatus().GetNodeName()] = append(per[v.GetStatus().GetNodeName()], name)
	}
	down := c.nodes[0]
	if len(per[c.nodes[1].Name]) > len(per[down.Name]) {
		down = c.nodes[1]
	}
	survivor := c.otherNode(down)
	kept := map[string]int{}
	for _, name := range per[survivor.Name] {
		kept[name] = c.waitQEMUPid(survivor, name)
	}
	report(t, "placement: %d instances on %s (to lose power), %d on %s", len(per[down.Name]), down.Name, len(per[survivor.Name]), survivor.Name)

	count := c.sampleCount("web", 100*time.Millisecond, 4+len(per[down.Name]))
	if err := c.PowerOff(down.Node); err != nil {
		t.Fatal(err)
	}
	off := time.Now()

	// Fenced once its heartbeat is older than the lease; refused before.
	var fenced *apiv1.FenceNodeResponse
	testutil.EventuallyNoError(t, lease+stateTimeout, "node "+down.Name+" fenced", func() error {
		var err error
		fenced, err = c.api.Nodes.Fence(c.ctx, &apiv1.FenceNodeRequest{Name: down.Name})
		if status.Code(err) != codes.FailedPrecondition && err != nil {
			t.Fatalf("fencing %s: %v", down.Name, err)
		}
		return err
	})
	fencedAt := time.Now()
	var failed []string
	for _, k := range fenced.GetFailedInstances() {
		failed = append(failed, k.GetName())
	}
	slices.Sort(failed)
	slices.Sort(per[down.Name])
	if !slices.Equal(failed, per[down.Name]) {
		t.Errorf("the fence failed %v, want the instances that were on %s: %v", failed, down.Name, per[down.Name])
	}
	report(t, "node %s powered off; fenced %s later (lease %s), failing %d instances",
		down.Name, fencedAt.Sub(off).Round(time.Millisecond), lease, len(failed))

	after := c.waitReplicas("web", 4, survivor.Name)
	ready = time.Since(fencedAt)
	c.waitBooted(after)
	report(t, "4 instances ready on %s %s after the fence, the replacements' guests booted in %s",
		survivor.Name, ready.Round(time.Millisecond), time.Since(fencedAt).Round(time.Millisecond))
	for name, pid := range kept {
		if after[name] == nil || after[name].GetMetadata().GetUid() != before[name].GetMetadata().GetUid() {
			t.Errorf("%s, on the survivor, was replaced", name)
		}
		if got := survivor.QEMUPid(c.domain(name)); got != pid {
			t.Errorf("%s's QEMU on the survivor is %d, was %d", name, got, pid)
		}
	}
	for _, name := range per[down.Name] {
		if after[name] != nil {
			t.Errorf("%s, failed by the fence, still counts", name)
		}
	}
	// The failed instances are deleted once replaced.
	testutil.EventuallyNoError(t, stateTimeout, "the failed instances deleted", func() error {
		items, err := c.instancesOf(c.ctx, "web")
		if err != nil {
			return err
		}
		if len(items) != 4 {
			return fmt.Errorf("%d instances", len(items))
		}
		return nil
	})
	passes, errs := count.halt()
	maxListed, maxActive, over := count.result()
	report(t, "instances sampled every 100 ms: at most %d listed, %d active (%d samples, %d failed)", maxListed, maxActive, passes, errs)
	if maxActive > 4 {
		t.Errorf("%d instances were active at once, more than the 4 replicas", maxActive)
	}
	if len(over) > 0 {
		t.Errorf("more instances than the replicas and the failed ones:\n%s", strings.Join(over, "\n"))
	}
}

// TestReplicaSetServerKilledDuringScaleUp: the only server is SIGKILLed
// as soon as the first of 6 instances exists, and started again; through
// it all the replica set never has more than 6 instances (sampled every
// 50 ms) and ends with exactly 6 running; scaled to 2, exactly 2 remain.
func TestReplicaSetServerKilledDuringScaleUp(t *testing.T) {
	c := newMultiNodeCluster(t, mnOptions{serverArgs: []string{"--leader-lease", haLeaderLease.String()}})
	t.Cleanup(c.dumpOnFailure)
	srv := c.Servers[0]

	// The kill comes from a watch, the quickest the first create can be
	// seen.
	ctx, cancel := context.WithCancel(c.ctx)
	defer cancel()
	w, err := c.api.VMIs.Watch(ctx, &apiv1.WatchVirtualMachineInstancesRequest{Options: &apiv1.WatchOptions{Namespace: c.ns}})
	if err != nil {
		t.Fatal(err)
	}
	killed := make(chan error, 1)
	var killedAt time.Time
	go func() {
		for {
			ev, err := w.Recv()
			if err != nil {
				killed <- fmt.Errorf("watch ended before an instance showed: %w", err)
				return
			}
			if ev.GetObject() != nil {
				killedAt = time.Now()
				killed <- srv.Kill()
				return
			}
		}
	}()

	count := c.sampleCount("burst", 50*time.Millisecond, 6)
	began := time.Now()
	if _, err := c.api.ReplicaSets.Create(c.ctx, &apiv1.CreateReplicaSetRequest{ReplicaSet: c.guestReplicaSet("burst", 6)}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-killed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(stateTimeout):
		t.Fatal("no instance showed within a minute")
	}
	cancel()
	if err := c.StartServer(c.ctx, srv); err != nil {
		t.Fatal(err)
	}
	c.waitLeader(nil)
	takeover := time.Since(killedAt)
	items, err := c.instancesOf(c.ctx, "burst")
	if err != nil {
		t.Fatal(err)
	}
	before := 0
	for _, v := range items {
		if v.GetMetadata().GetCreationTimestamp().AsTime().Before(killedAt) {
			before++
		}
	}
	report(t, "server SIGKILLed %s after the replica set was created, when the first instance showed; %d of 6 instances were made before the kill; restarted and leading again %s after the kill",
		killedAt.Sub(began).Round(time.Millisecond), before, takeover.Round(time.Millisecond))

	c.waitBooted(c.waitReplicas("burst", 6))
	report(t, "6 instances ready and their guests booted %s after the replica set was created", time.Since(began).Round(time.Millisecond))
	testutil.ConsistentlyNoError(t, 3*time.Second, "exactly 6 instances", func() error {
		items, err := c.instancesOf(c.ctx, "burst")
		if err == nil && len(items) != 6 {
			err = fmt.Errorf("%d instances", len(items))
		}
		return err
	})

	scaled := time.Now()
	if _, err := c.api.ReplicaSets.Scale(c.ctx, &apiv1.ScaleRequest{Key: c.key("burst"), Replicas: 2}); err != nil {
		t.Fatal(err)
	}
	left := c.waitReplicas("burst", 2)
	instancesGone := time.Since(scaled)
	testutil.EventuallyNoError(t, stateTimeout, "the other 4 guests gone", func() error {
		var doms []string
		for _, n := range c.nodes {
			ds, err := n.Domains(c.ctx)
			if err != nil {
				return err
			}
			doms = append(doms, ds...)
		}
		if len(doms) != 2 {
			return fmt.Errorf("domains %v", doms)
		}
		for name := range left {
			if !slices.Contains(doms, c.domain(name)) {
				return fmt.Errorf("domains %v, want %s's", doms, name)
			}
		}
		return nil
	})
	testutil.ConsistentlyNoError(t, 3*time.Second, "exactly 2 instances", func() error {
		items, err := c.instancesOf(c.ctx, "burst")
		if err == nil && len(items) != 2 {
			err = fmt.Errorf("%d instances", len(items))
		}
		return err
	})
	report(t, "scaled 6 → 2: 2 instances left in %s, the other guests' domains gone in %s",
		instancesGone.Round(time.Millisecond), time.Since(scaled).Round(time.Millisecond))

	passes, errs := count.halt()
	maxListed, maxActive, over := count.result()
	report(t, "instances sampled every 50 ms through the run: at most %d listed (%d active) in %d samples (%d failed while the server was away)",
		maxListed, maxActive, passes, errs)
	if len(over) > 0 {
		t.Errorf("more than 6 instances:\n%s", strings.Join(over, "\n"))
	}
	if maxListed != 6 {
		t.Errorf("at most %d instances seen, want 6", maxListed)
	}
}
