package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/nodedir"
	"github.com/virtplane/terraform-provider-virtplane/internal/testguest"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// drainTimeout bounds a whole drain here: two sequential migrations, a
// paused guest's shutdown and boot elsewhere under TCG, and the restarts.
const drainTimeout = 8 * time.Minute

// TestDrainEvacuatesByStrategy drains a node of three holding four guests
// with one migration at a time per node: the two LiveMigrate guests
// migrate with no gap in their console counters, the
// LiveMigrateIfPossible guest that is paused (not live-migratable) is
// restarted on another node, the None guest (run strategy Manual) is
// stopped, and the node ends empty. The server and the drained node's
// agent are SIGKILLed during the drain; it resumes. Then a LiveMigrate
// guest pinned to the node holds a drain up until its timeout, which
// names it, and uncordon cancels the drain and lets guests on again.
func TestDrainEvacuatesByStrategy(t *testing.T) {
	c := newMultiNodeCluster(t, mnOptions{nodes: 3, serverArgs: append([]string{"--migrations-per-node", "1"}, loopbackImageSource...)})
	src := c.nodes[0]

	// Everything starts on src: the others are cordoned meanwhile.
	for _, n := range c.nodes[1:] {
		c.node("cordon", n)
	}
	live := []string{"live-a", "live-b"}
	for _, name := range live {
		vm := guestVM(c.ns, name, apiv1.RunStrategyAlways, src.Kernel, "virtplane.tick")
		vm.Spec.Template.Spec.EvictionStrategy = apiv1.EvictionStrategyLiveMigrate
		c.create(vm)
	}
	paused := guestVM(c.ns, "paused", apiv1.RunStrategyAlways, src.Kernel, "")
	paused.Spec.Template.Spec.EvictionStrategy = apiv1.EvictionStrategyLiveMigrateIfPossible
	// A paused guest ignores the power button: killed after this.
	grace := int64(2)
	paused.Spec.Template.Spec.TerminationGracePeriodSeconds = &grace
	c.create(paused)
	none := guestVM(c.ns, "none", apiv1.RunStrategyManual, src.Kernel, "")
	none.Spec.Template.Spec.EvictionStrategy = apiv1.EvictionStrategyNone
	c.create(none)
	if _, err := c.api.VMs.Start(c.ctx, &apiv1.StartVirtualMachineRequest{Key: c.key("none")}); err != nil {
		t.Fatal(err)
	}
	uids := map[string]string{}
	for _, name := range []string{"live-a", "live-b", "paused", "none"} {
		v := c.waitRunning(name)
		if v.GetStatus().GetNodeName() != src.Name {
			t.Fatalf("%s runs on %s, want %s", name, v.GetStatus().GetNodeName(), src.Name)
		}
		uids[name] = v.GetMetadata().GetUid()
	}
	if _, err := c.api.VMs.Pause(c.ctx, &apiv1.PauseVirtualMachineRequest{Key: c.key("paused")}); err != nil {
		t.Fatal(err)
	}
	for _, n := range c.nodes[1:] {
		c.node("uncordon", n)
	}
	testutil.Eventually(t, stateTimeout, "LiveMigratable reported", func() bool {
		return apiv1.IsConditionTrue(c.vmi("live-a").GetStatus().GetConditions(), apiv1.ConditionLiveMigratable) &&
			apiv1.IsConditionTrue(c.vmi("live-b").GetStatus().GetConditions(), apiv1.ConditionLiveMigratable) &&
			apiv1.FindCondition(c.vmi("paused").GetStatus().GetConditions(), apiv1.ConditionLiveMigratable).GetStatus() == apiv1.ConditionFalse
	})
	legs := map[string][]*console{}
	t.Cleanup(func() {
		for _, cs := range legs {
			for _, l := range cs {
				l.close()
			}
		}
	})
	follow := func(name string, n *mnNode) *console {
		d, err := nodedir.Layout{Root: n.NodeDir}.VMIDir(uids[name])
		if err != nil {
			t.Fatal(err)
		}
		con := followConsole(t, nodedir.ConsoleLogPath(d))
		legs[name] = append(legs[name], con)
		return con
	}
	for _, name := range live {
		follow(name, src).waitMarker(testguest.MarkerTick+" n=5", bootTimeout)
	}

	sampler := c.sampleOutbound(src.Name)
	drain := c.startDrain(src.Name, drainTimeout)

	// SIGKILL the server once the first evacuation migration exists,
	// and the drained node's agent once one has succeeded.
	testutil.Eventually(t, drainTimeout, "an evacuation migration", func() bool { return len(c.evacuations(src.Name)) > 0 })
	if err := c.Servers[0].Kill(); err != nil {
		t.Fatal(err)
	}
	if err := c.StartServer(c.ctx, c.Servers[0]); err != nil {
		t.Fatal(err)
	}
	t.Log("server SIGKILLed and restarted during the drain")
	testutil.Eventually(t, drainTimeout, "an evacuation migration to succeed", func() bool {
		for _, m := range c.evacuations(src.Name) {
			if m.GetStatus().GetPhase() == apiv1.MigrationSucceeded {
				return true
			}
		}
		return false
	})
	if err := src.KillAgent(); err != nil {
		t.Fatal(err)
	}
	c.restartNodeAgent(src)
	t.Log("the drained node's agent SIGKILLed and restarted during the drain")

	out, err := drain.wait()
	t.Logf("node drain:\n%s", out)
	if err != nil || !strings.Contains(out, `node "`+src.Name+`" drained`) {
		t.Fatalf("node drain: %v", err)
	}
	max, samples := sampler.finish()
	t.Logf("evacuation migrations leaving %s at once: at most %d over %d samples", src.Name, max, samples)
	if max > 1 {
		t.Errorf("%d migrations left %s at once; the limit is 1", max, src.Name)
	}
	if samples == 0 || max == 0 {
		t.Errorf("the sampler saw no migration (%d samples)", samples)
	}

	// The LiveMigrate guests moved, same instance, counter unbroken.
	for _, name := range live {
		v := c.vmi(name)
		to := c.nodeNamed(v.GetStatus().GetNodeName())
		if v.GetMetadata().GetUid() != uids[name] || to == src || v.GetStatus().GetPhase() != apiv1.PhaseRunning {
			t.Fatalf("%s: uid %s on %s (%s), want uid %s running elsewhere than %s", name, v.GetMetadata().GetUid(),
				v.GetStatus().GetNodeName(), v.GetStatus().GetPhase(), uids[name], src.Name)
		}
		if v.GetStatus().GetEvacuationNodeName() != "" {
			t.Errorf("%s kept its evacuation mark", name)
		}
		testutil.EventuallyNoError(t, stateTimeout, name+" on "+to.Name+" only", func() error { return c.runsOnlyOn(name, to) })
		last := maxTick(legs[name])
		follow(name, to).waitMarker(testguest.MarkerTick+" n="+strconv.Itoa(last+5), stateTimeout)
		if gaps := tickGaps(legs[name]); len(gaps) > 0 {
			t.Errorf("%s: the counter skipped %v; console segments:\n%s", name, gaps, segmentEnds(legs[name]))
		}
		t.Logf("%s: migrated to %s, counter contiguous up to %d", name, to.Name, maxTick(legs[name]))
	}
	// The paused guest started again elsewhere, as a new instance.
	testutil.Eventually(t, bootTimeout, "paused running again elsewhere", func() bool {
		v := c.vmi("paused")
		return v.GetMetadata().GetUid() != uids["paused"] && v.GetStatus().GetPhase() == apiv1.PhaseRunning
	})
	pausedNode := c.nodeNamed(c.vmi("paused").GetStatus().GetNodeName())
	if pausedNode == src {
		t.Fatal("paused restarted on the drained node")
	}
	testutil.EventuallyNoError(t, stateTimeout, "paused on "+pausedNode.Name+" only", func() error { return c.runsOnlyOn("paused", pausedNode) })
	// The None guest is stopped and stays so.
	if v := c.vmi("none"); v != nil && !apiv1.IsFinal(v.GetStatus().GetPhase()) {
		t.Fatalf("none: %v, want stopped", v.GetStatus())
	}
	for _, n := range c.nodes {
		if st, err := n.DomainState(c.ctx, c.domain("none")); err == nil && strings.HasPrefix(st, "running") {
			t.Fatalf("none runs on %s", n.Name)
		}
	}
	c.wantEmpty(src.Name)

	// A LiveMigrate guest that may only run on src holds a drain up.
	c.node("uncordon", src)
	pinned := c.guestVM("pinned", src, "")
	pinned.Spec.Template.Spec.EvictionStrategy = apiv1.EvictionStrategyLiveMigrate
	c.create(pinned)
	c.waitRunning("pinned")
	out, err = c.startDrain(src.Name, 30*time.Second).wait()
	t.Logf("node drain --timeout 30s:\n%s", out)
	if err == nil || !strings.Contains(out, "not drained after 30s") || !strings.Contains(out, c.ns+"/pinned (LiveMigrate, ") {
		t.Fatalf("drain with a pinned LiveMigrate guest: %v", err)
	}
	c.node("uncordon", src)
	testutil.Eventually(t, stateTimeout, "the drain canceled", func() bool {
		n, err := c.api.Nodes.Get(c.ctx, &apiv1.GetNodeRequest{Name: src.Name})
		return err == nil && !n.GetSpec().GetUnschedulable() && n.GetStatus().GetEvacuation() == nil &&
			c.vmi("pinned").GetStatus().GetEvacuationNodeName() == "" && len(c.activeEvacuations(src.Name)) == 0
	})
	if v := c.vmi("pinned"); v.GetStatus().GetPhase() != apiv1.PhaseRunning || v.GetStatus().GetNodeName() != src.Name {
		t.Fatalf("pinned after the cancel: %v", v.GetStatus())
	}
	// Scheduling restored: a new guest pinned to src starts there.
	c.create(c.guestVM("after", src, ""))
	if got := c.waitRunning("after").GetStatus().GetNodeName(); got != src.Name {
		t.Fatalf("after uncordon a guest pinned to %s runs on %s", src.Name, got)
	}
}

// efiImage puts the test guest's EFI-bootable disk on every node as an
// image served from loopback (the servers need loopbackImageSource), and
// returns its name.
func (c *mnCluster) efiImage() string {
	c.t.Helper()
	guestDir, err := testguest.Dir()
	if err != nil {
		c.t.Fatal(err)
	}
	disk, err := os.ReadFile(filepath.Join(guestDir, testguest.DiskFile))
	if err != nil {
		c.t.Fatalf("%v (make guest builds it)", err)
	}
	srv := newImageServer(c.t, map[string][]byte{"/disk.qcow2": disk})
	name := "efi-" + c.ns + ".qcow2"
	if _, err := c.api.Images.Create(c.ctx, &apiv1.CreateImageRequest{Image: &apiv1.Image{
		Metadata: &apiv1.ObjectMeta{Name: name},
		Spec:     &apiv1.ImageSpec{Url: srv.URL + "/disk.qcow2", Sha256: sum(disk), Nodes: "all"},
	}}); err != nil {
		c.t.Fatal(err)
	}
	testutil.Eventually(c.t, stateTimeout, "the EFI image on every node", func() bool {
		img, err := c.api.Images.Get(c.ctx, &apiv1.GetImageRequest{Name: name})
		ready := 0
		for _, e := range img.GetStatus().GetNodes() {
			if e.GetPhase() == "Ready" {
				ready++
			}
		}
		return err == nil && ready == len(c.nodes)
	})
	return name
}

// node runs "node VERB n" through the CLI.
func (c *mnCluster) node(verb string, n *mnNode) {
	c.t.Helper()
	out, err := exec.CommandContext(c.ctx, env.agent, "--endpoint", "unix://"+c.Servers[0].Socket, "node", verb, n.Name).CombinedOutput()
	if err != nil {
		c.t.Fatalf("node %s %s: %v\n%s", verb, n.Name, err, out)
	}
}

// evacuations lists the evacuation migrations from node (none while the
// server is away).
func (c *mnCluster) evacuations(node string) []*apiv1.VirtualMachineInstanceMigration {
	migs, err := c.api.Migrations.List(c.ctx, &apiv1.ListMigrationsRequest{Options: &apiv1.ListOptions{
		Namespace: c.ns, LabelSelector: apiv1.LabelEvacuationNode + "=" + node}})
	if err != nil {
		return nil
	}
	return migs.GetItems()
}

// activeEvacuations are the evacuation migrations from node that have
// not ended.
func (c *mnCluster) activeEvacuations(node string) []*apiv1.VirtualMachineInstanceMigration {
	var out []*apiv1.VirtualMachineInstanceMigration
	for _, m := range c.evacuations(node) {
		if !apiv1.IsMigrationFinal(m.GetStatus().GetPhase()) {
			out = append(out, m)
		}
	}
	return out
}

// wantEmpty checks that the node holds no instance that has not ended
// and that its drain record says so.
func (c *mnCluster) wantEmpty(node string) {
	c.t.Helper()
	vmis, err := c.api.VMIs.List(c.ctx, &apiv1.ListVirtualMachineInstancesRequest{Options: &apiv1.ListOptions{Namespace: c.ns}})
	if err != nil {
		c.t.Fatal(err)
	}
	for _, v := range vmis.GetItems() {
		if v.GetStatus().GetNodeName() == node && !apiv1.IsFinal(v.GetStatus().GetPhase()) {
			c.t.Errorf("%s still on %s (%s)", v.GetMetadata().GetName(), node, v.GetStatus().GetPhase())
		}
	}
	n, err := c.api.Nodes.Get(c.ctx, &apiv1.GetNodeRequest{Name: node})
	if err != nil || !n.GetStatus().GetEvacuation().GetDrained() {
		c.t.Errorf("node %s: evacuation %v, %v; want drained", node, n.GetStatus().GetEvacuation(), err)
	}
}

// runningDrain is a "node drain" CLI run.
type runningDrain struct {
	done chan struct{}
	out  []byte
	err  error
}

func (c *mnCluster) startDrain(node string, timeout time.Duration) *runningDrain {
	d := &runningDrain{done: make(chan struct{})}
	cmd := exec.CommandContext(c.ctx, env.agent, "--endpoint", "unix://"+c.Servers[0].Socket, "--namespace", c.ns,
		"node", "drain", node, "--timeout", timeout.String())
	go func() {
		defer close(d.done)
		d.out, d.err = cmd.CombinedOutput()
	}()
	return d
}

func (d *runningDrain) wait() (string, error) {
	<-d.done
	return string(d.out), d.err
}

// outboundSampler counts, every 100 ms, the evacuation migrations leaving
// a node that are past Pending and not ended.
type outboundSampler struct {
	stop    context.CancelFunc
	done    chan struct{}
	mu      sync.Mutex
	max     int
	samples int
}

func (c *mnCluster) sampleOutbound(node string) *outboundSampler {
	ctx, cancel := context.WithCancel(c.ctx)
	s := &outboundSampler{stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			migs, err := c.api.Migrations.List(ctx, &apiv1.ListMigrationsRequest{Options: &apiv1.ListOptions{
				Namespace: c.ns, LabelSelector: apiv1.LabelEvacuationNode + "=" + node}})
			if err == nil {
				n := 0
				for _, m := range migs.GetItems() {
					if p := m.GetStatus().GetPhase(); p != "" && p != apiv1.MigrationPending && !apiv1.IsMigrationFinal(p) {
						n++
					}
				}
				s.mu.Lock()
				s.samples++
				s.max = max(s.max, n)
				s.mu.Unlock()
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	c.t.Cleanup(s.halt)
	return s
}

func (s *outboundSampler) halt() { s.stop(); <-s.done }

func (s *outboundSampler) finish() (maxSeen, samples int) {
	s.halt()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.max, s.samples
}
