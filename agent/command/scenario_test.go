package command

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/virtplane/terraform-provider-virtplane/agent/server"
	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
	"github.com/virtplane/terraform-provider-virtplane/internal/fakenode"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// Timings shortened for tests; the order of events is what matters.
const (
	testLease     = 3 * time.Second
	testHeartbeat = time.Second
	testMargin    = time.Second
)

type scenario struct {
	t      *testing.T
	ctx    context.Context
	socket string
	c      *client.Client
	nodes  map[string]*fakenode.Node
}

func newScenario(t *testing.T, nodeNames ...string) *scenario {
	t.Helper()
	dir := testutil.ShortTempDir(t)
	socket := filepath.Join(dir, "agent.sock")
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	a, err := server.Start(context.Background(), server.Options{
		DataDir: filepath.Join(dir, "data"), Socket: socket, LeaderElect: true,
		NodeLease: testLease, HeartbeatInterval: testHeartbeat,
		ControllerOptions: server.ControllerOptions{FenceMargin: testMargin},
		Logger:            quiet,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	s := &scenario{t: t, ctx: ctx, socket: socket, nodes: map[string]*fakenode.Node{}}
	s.c, err = client.Dial(ctx, client.Config{Endpoint: "unix://" + socket})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodeNames {
		fn, err := fakenode.Start(ctx, s.c, fakenode.Options{Name: n, StartDelay: 200 * time.Millisecond,
			ShutdownDelay: 200 * time.Millisecond, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		s.nodes[n] = fn
	}
	t.Cleanup(func() {
		for _, n := range s.nodes {
			n.Stop()
		}
		s.c.Close()
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		a.Shutdown(sctx)
		scancel()
		cancel()
	})
	return s
}

func scenarioVM(name, strategy, script, policy string) *apiv1.VirtualMachine {
	return &apiv1.VirtualMachine{
		Metadata: &apiv1.ObjectMeta{Name: name},
		Spec: &apiv1.VirtualMachineSpec{
			RunStrategy: strategy, NodeFailurePolicy: policy,
			Template: &apiv1.VirtualMachineInstanceTemplateSpec{
				Metadata: &apiv1.ObjectMeta{Annotations: map[string]string{fakenode.AnnotationScript: script}},
				Spec: &apiv1.VirtualMachineInstanceSpec{
					Domain: &apiv1.DomainSpec{Memory: &apiv1.Memory{Guest: "256Mi"}},
				},
			},
		},
	}
}

func (s *scenario) create(vm *apiv1.VirtualMachine) *apiv1.VirtualMachine {
	s.t.Helper()
	out, err := s.c.VMs.Create(s.ctx, &apiv1.CreateVirtualMachineRequest{Vm: vm})
	if err != nil {
		s.t.Fatal(err)
	}
	return out
}

func (s *scenario) key(name string) *apiv1.ObjectKey {
	return &apiv1.ObjectKey{Namespace: "default", Name: name}
}

func (s *scenario) vm(name string) *apiv1.VirtualMachine {
	s.t.Helper()
	vm, err := s.c.VMs.Get(s.ctx, &apiv1.GetVirtualMachineRequest{Key: s.key(name)})
	if err != nil {
		s.t.Fatal(err)
	}
	return vm
}

// vmi returns the VM's instance, or nil.
func (s *scenario) vmi(name string) *apiv1.VirtualMachineInstance {
	vmi, err := s.c.VMIs.Get(s.ctx, &apiv1.GetVirtualMachineInstanceRequest{Key: s.key(name)})
	if err != nil {
		return nil
	}
	return vmi
}

func (s *scenario) waitRunning(name, notUID string) *apiv1.VirtualMachineInstance {
	s.t.Helper()
	var vmi *apiv1.VirtualMachineInstance
	testutil.Eventually(s.t, 20*time.Second, name+" running (new instance)", func() bool {
		vmi = s.vmi(name)
		vm := s.vm(name)
		return vmi != nil && vmi.Metadata.Uid != notUID && vmi.Status.GetPhase() == apiv1.PhaseRunning &&
			vm.Status.GetPrintableStatus() == apiv1.PrintableRunning && vm.Status.GetReady()
	})
	return vmi
}

// statusLog records every printable status of a VM in order, through
// `virtplane-agent get vm NAME -w`, as a user would watch it.
type statusLog struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	stop context.CancelFunc
	done chan struct{}
}

func (s *scenario) watchCLI(name string) *statusLog {
	ctx, cancel := context.WithCancel(s.ctx)
	l := &statusLog{stop: cancel, done: make(chan struct{})}
	cmd := NewRootCommand()
	cmd.SetArgs([]string{"--endpoint", "unix://" + s.socket, "get", "vm", name, "-w"})
	cmd.SetOut(lockedWriter{l})
	cmd.SetErr(io.Discard)
	go func() {
		defer close(l.done)
		_ = cmd.ExecuteContext(ctx)
	}()
	return l
}

type lockedWriter struct{ l *statusLog }

func (w lockedWriter) Write(p []byte) (int, error) {
	w.l.mu.Lock()
	defer w.l.mu.Unlock()
	return w.l.buf.Write(p)
}

// statuses returns the STATUS column of the watch output, with repeats
// folded.
func (l *statusLog) statuses() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for i, line := range strings.Split(strings.TrimSpace(l.buf.String()), "\n") {
		f := strings.Fields(line)
		if i == 0 || len(f) < 4 {
			continue // header
		}
		st := f[2]
		if len(out) == 0 || out[len(out)-1] != st {
			out = append(out, st)
		}
	}
	return out
}

func (l *statusLog) output() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *statusLog) close() { l.stop(); <-l.done }

// expectSequence waits until want appears in order within the statuses
// the watch printed (its events may trail the API reads that ended the
// scenario), then stops the watch.
func expectSequence(t *testing.T, l *statusLog, want ...string) {
	t.Helper()
	defer l.close()
	contains := func(got []string) bool {
		i := 0
		for _, g := range got {
			if i < len(want) && g == want[i] {
				i++
			}
		}
		return i == len(want)
	}
	testutil.EventuallyNoError(t, 10*time.Second, fmt.Sprintf("get vm -w to print %v", want), func() error {
		if got := l.statuses(); !contains(got) {
			return fmt.Errorf("status sequence %v does not contain %v in order; watch output:\n%s", got, want, l.output())
		}
		return nil
	})
	t.Logf("get vm -w: %v", l.statuses())
}

func TestScenarioAlwaysRestartsAfterFailureAndSuccess(t *testing.T) {
	s := newScenario(t, "node-a", "node-b")
	for _, script := range []string{"crash:1s", "exit:1s"} {
		name := "always-" + strings.Split(script, ":")[0]
		w := s.watchCLI(name)
		s.create(scenarioVM(name, "Always", script, ""))
		first := s.waitRunning(name, "")
		second := s.waitRunning(name, first.Metadata.Uid)
		if second.Metadata.Uid == first.Metadata.Uid {
			t.Fatal("no new instance")
		}
		expectSequence(t, w, "Starting", "Running", "Starting", "Running")
		if sf := s.vm(name).Status.StartFailure; sf != nil {
			t.Fatalf("%s: a guest that ran is not a start failure: %v", script, sf)
		}
	}
}

func TestScenarioAlwaysCrashLoopBackoff(t *testing.T) {
	s := newScenario(t, "node-a")
	w := s.watchCLI("flaky")
	s.create(scenarioVM("flaky", "Always", "fail-start", ""))
	var failedAt time.Time
	testutil.Eventually(s.t, 20*time.Second, "CrashLoopBackOff", func() bool {
		vm := s.vm("flaky")
		if vm.Status.GetPrintableStatus() == apiv1.PrintableCrashLoopBackOff {
			failedAt = time.Now()
			return true
		}
		return false
	})
	sf := s.vm("flaky").Status.StartFailure
	if sf.GetConsecutiveFailCount() != 1 {
		t.Fatalf("start failure %v", sf)
	}
	// Retry 10–15 s after the failure, not before.
	wait := time.Until(sf.RetryAfterTimestamp.AsTime())
	if wait > 15*time.Second || wait < 5*time.Second {
		t.Fatalf("retry in %v, want 10–15 s after the failure", wait)
	}
	// The failed instance may still be on its way out (its deletion
	// waits for the node); what the backoff forbids is a new one.
	testutil.Consistently(t, 2*time.Second, "no new instance during the backoff", func() bool {
		v := s.vmi("flaky")
		return v == nil || apiv1.IsFinal(v.GetStatus().GetPhase())
	})
	testutil.Eventually(s.t, 20*time.Second, "second failure", func() bool {
		return s.vm("flaky").Status.GetStartFailure().GetConsecutiveFailCount() == 2
	})
	if since := time.Since(failedAt); since < 8*time.Second {
		t.Fatalf("second attempt %v after the first failure", since)
	}
	sf = s.vm("flaky").Status.StartFailure
	if wait := time.Until(sf.RetryAfterTimestamp.AsTime()); wait < 35*time.Second {
		t.Fatalf("second backoff %v, want 40–60 s", wait)
	}
	expectSequence(t, w, "Starting", "CrashLoopBackOff", "Starting", "CrashLoopBackOff")
}

func TestScenarioRerunOnFailure(t *testing.T) {
	s := newScenario(t, "node-a")
	// Restarted after a crash...
	s.create(scenarioVM("crashes", "RerunOnFailure", "crash:1s", ""))
	first := s.waitRunning("crashes", "")
	s.waitRunning("crashes", first.Metadata.Uid)
	// ...but not after the guest powered off.
	w := s.watchCLI("exits")
	s.create(scenarioVM("exits", "RerunOnFailure", "exit:1s", ""))
	s.waitRunning("exits", "")
	testutil.Eventually(s.t, 20*time.Second, "Stopped", func() bool {
		return s.vm("exits").Status.GetPrintableStatus() == apiv1.PrintableStopped && s.vmi("exits") == nil
	})
	testutil.Consistently(t, 2*time.Second, "RerunOnFailure leaving a guest that powered off stopped", func() bool {
		return s.vmi("exits") == nil
	})
	expectSequence(t, w, "Starting", "Running", "Stopped")
}

func TestScenarioOnceNeverRestarts(t *testing.T) {
	s := newScenario(t, "node-a")
	w := s.watchCLI("once")
	s.create(scenarioVM("once", "Once", "exit:1s", ""))
	first := s.waitRunning("once", "")
	testutil.Eventually(s.t, 20*time.Second, "Succeeded", func() bool {
		vmi := s.vmi("once")
		return vmi != nil && vmi.Status.GetPhase() == apiv1.PhaseSucceeded && s.vm("once").Status.GetPrintableStatus() == apiv1.PrintableStopped
	})
	testutil.Consistently(t, 2*time.Second, "Once keeping its final instance and not restarting", func() bool {
		vmi := s.vmi("once")
		return vmi != nil && vmi.Metadata.Uid == first.Metadata.Uid && vmi.Status.Phase == apiv1.PhaseSucceeded
	})
	expectSequence(t, w, "Starting", "Running", "Stopped")
}

func TestScenarioManualActsOnlyOnRequests(t *testing.T) {
	s := newScenario(t, "node-a")
	w := s.watchCLI("manual")
	s.create(scenarioVM("manual", "Manual", "", ""))
	// The controller has seen the VM once it wrote a status.
	testutil.Eventually(t, 20*time.Second, "Manual VM reconciled", func() bool {
		return s.vm("manual").Status.GetPrintableStatus() == apiv1.PrintableStopped
	})
	testutil.Consistently(t, time.Second, "Manual not starting by itself", func() bool {
		return s.vmi("manual") == nil && s.vm("manual").Status.GetPrintableStatus() == apiv1.PrintableStopped
	})
	if _, err := s.c.VMs.Start(s.ctx, &apiv1.StartVirtualMachineRequest{Key: s.key("manual")}); err != nil {
		t.Fatal(err)
	}
	s.waitRunning("manual", "")
	if _, err := s.c.VMs.Stop(s.ctx, &apiv1.StopVirtualMachineRequest{Key: s.key("manual")}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(s.t, 20*time.Second, "stopped", func() bool {
		return s.vm("manual").Status.GetPrintableStatus() == apiv1.PrintableStopped
	})
	if rs := s.vm("manual").Spec.RunStrategy; rs != "Manual" {
		t.Fatalf("stop rewrote the strategy to %s", rs)
	}
	expectSequence(t, w, "Stopped", "Starting", "Running", "Stopping", "Stopped")
}

func TestScenarioHaltedRemovesInstanceAndRestartMakesNewOne(t *testing.T) {
	s := newScenario(t, "node-a")
	w := s.watchCLI("web")
	s.create(scenarioVM("web", "Always", "", ""))
	first := s.waitRunning("web", "")
	if _, err := s.c.VMs.Restart(s.ctx, &apiv1.RestartVirtualMachineRequest{Key: s.key("web")}); err != nil {
		t.Fatal(err)
	}
	second := s.waitRunning("web", first.Metadata.Uid)
	if second.Metadata.Uid == first.Metadata.Uid {
		t.Fatal("restart kept the instance")
	}
	vm := s.vm("web")
	if len(vm.Status.StateChangeRequests) != 0 {
		t.Fatalf("requests left after restart: %v", vm.Status.StateChangeRequests)
	}
	// Switching to Halted removes the instance.
	vm.Spec.RunStrategy = "Halted"
	if _, err := s.c.VMs.Update(s.ctx, &apiv1.UpdateVirtualMachineRequest{Vm: vm}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(s.t, 20*time.Second, "instance removed", func() bool {
		return s.vmi("web") == nil && s.vm("web").Status.GetPrintableStatus() == apiv1.PrintableStopped
	})
	// Deleting the VM deletes it for good.
	if _, err := s.c.VMs.Delete(s.ctx, &apiv1.DeleteVirtualMachineRequest{Key: s.key("web")}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(s.t, 20*time.Second, "VM gone", func() bool {
		_, err := s.c.VMs.Get(s.ctx, &apiv1.GetVirtualMachineRequest{Key: s.key("web")})
		return err != nil
	})
	expectSequence(t, w, "Starting", "Running", "Stopping", "Starting", "Running", "Stopping", "Stopped")
}

// placedOn waits for the VM's running instance and returns its node.
func (s *scenario) placedOn(name string) (string, *apiv1.VirtualMachineInstance) {
	vmi := s.waitRunning(name, "")
	return vmi.Status.NodeName, vmi
}

func other(n string) string {
	if n == "node-a" {
		return "node-b"
	}
	return "node-a"
}

func TestScenarioNodeLossRestartElsewhere(t *testing.T) {
	s := newScenario(t, "node-a", "node-b")
	s.create(scenarioVM("mover", "Always", "", apiv1.NodeFailurePolicyRestartElsewhere))
	node, first := s.placedOn("mover")
	killed := time.Now()
	s.nodes[node].Kill()
	second := s.waitRunning("mover", first.Metadata.Uid)
	if second.Status.NodeName != other(node) {
		t.Fatalf("moved to %s", second.Status.NodeName)
	}
	// Never before the lease plus the margin.
	if moved := time.Since(killed); moved < testLease {
		t.Fatalf("moved %v after the node died; the lease is %v", moved, testLease)
	}
	var spans []fakenode.Span
	for _, n := range s.nodes {
		spans = append(spans, n.Spans()...)
	}
	if err := fakenode.Overlap(spans); err != nil {
		t.Fatal(err)
	}
	if f := s.vm("mover"); f.Status.StartFailure != nil {
		t.Fatalf("node loss counted as a start failure: %v", f.Status.StartFailure)
	}
}

func TestScenarioNodeLossWaitUntilFence(t *testing.T) {
	s := newScenario(t, "node-a", "node-b")
	s.create(scenarioVM("stays", "Always", "", ""))
	node, first := s.placedOn("stays")
	s.nodes[node].Kill()
	// The node goes NotReady, but a Wait VM stays put however long.
	testutil.Eventually(s.t, 20*time.Second, "node NotReady", func() bool {
		n, err := s.c.Nodes.Get(s.ctx, &apiv1.GetNodeRequest{Name: node})
		return err == nil && apiv1.FindCondition(n.Status.Conditions, "Ready").GetStatus() == "False"
	})
	testutil.Consistently(t, testLease+2*testMargin, "a Wait VM staying on its lost node until fenced", func() bool {
		vmi := s.vmi("stays")
		return vmi != nil && vmi.Metadata.Uid == first.Metadata.Uid && vmi.Status.Phase == apiv1.PhaseRunning
	})
	// The operator confirms the node is down.
	cmd := NewRootCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--endpoint", "unix://" + s.socket, "node", "fence", node})
	if err := cmd.ExecuteContext(s.ctx); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "default/stays failed") {
		t.Fatalf("fence output: %s", out.String())
	}
	second := s.waitRunning("stays", first.Metadata.Uid)
	if second.Status.NodeName != other(node) {
		t.Fatalf("moved to %s", second.Status.NodeName)
	}
	// Fencing a live node is refused.
	cmd = NewRootCommand()
	cmd.SetOut(io.Discard)
	cmd.SetArgs([]string{"--endpoint", "unix://" + s.socket, "node", "fence", other(node)})
	if err := cmd.ExecuteContext(s.ctx); err == nil || !strings.Contains(err.Error(), "is Ready") {
		t.Fatalf("fencing a live node: %v", err)
	}
}

// Store writes for one VM start, from create to Running and Ready.
func TestScenarioWritesPerVMStart(t *testing.T) {
	s := newScenario(t, "node-a")
	// A VM created before the placement controller's cache shows the new
	// node Ready is first recorded Unschedulable: two or three writes that
	// belong to node registration, not to a VM start (seen once in CI under
	// load). A first VM that runs proves the node is placeable.
	s.create(scenarioVM("warm-up", "Always", "", ""))
	s.waitRunning("warm-up", "")
	list, err := s.c.VMs.List(s.ctx, &apiv1.ListVirtualMachinesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	opts := &apiv1.WatchOptions{Name: "counted", ResourceVersion: list.ResourceVersion}
	vmw, err := s.c.VMs.Watch(ctx, &apiv1.WatchVirtualMachinesRequest{Options: opts})
	if err != nil {
		t.Fatal(err)
	}
	vmiw, err := s.c.VMIs.Watch(ctx, &apiv1.WatchVirtualMachineInstancesRequest{Options: proto.Clone(opts).(*apiv1.WatchOptions)})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var writes []string
	count := func(kind string, recv func() (string, error)) {
		for {
			what, err := recv()
			if err != nil {
				return
			}
			mu.Lock()
			writes = append(writes, kind+" "+what)
			mu.Unlock()
		}
	}
	go count("vm", func() (string, error) {
		ev, err := vmw.Recv()
		return ev.GetType().String() + "(" + ev.GetObject().GetStatus().GetPrintableStatus() + ")", err
	})
	go count("vmi", func() (string, error) {
		ev, err := vmiw.Recv()
		return ev.GetType().String() + "(" + ev.GetObject().GetStatus().GetPhase() + ")", err
	})
	s.create(scenarioVM("counted", "Always", "", ""))
	s.waitRunning("counted", "")
	// A trailing write would come from a controller pass after Ready.
	testutil.ConsistentlyNoError(t, time.Second, "no more than 6 writes", func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(writes) > 6 {
			return fmt.Errorf("%d writes: %v", len(writes), writes)
		}
		return nil
	})
	mu.Lock()
	defer mu.Unlock()
	t.Logf("store writes for one VM start (create to Running and Ready): %d: %v", len(writes), writes)
	if len(writes) > 6 {
		t.Fatalf("%d store writes per VM start, target at most 6: %v", len(writes), writes)
	}
}

// runCLI runs the agent's CLI against the scenario's server.
func (s *scenario) runCLI(args ...string) (string, error) {
	cmd := NewRootCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(io.Discard)
	cmd.SetArgs(append([]string{"--endpoint", "unix://" + s.socket}, args...))
	err := cmd.ExecuteContext(s.ctx)
	return out.String(), err
}

// A cordoned node takes no new instance and says so in `get nodes`;
// after uncordon it takes them again. What runs there stays.
func TestScenarioCordonUncordon(t *testing.T) {
	s := newScenario(t, "node-a", "node-b")
	pinned := func(name string) *apiv1.VirtualMachine {
		vm := scenarioVM(name, "Always", "", "")
		vm.Spec.Template.Spec.NodeSelector = map[string]string{apiv1.LabelNodeName: "node-a"}
		return vm
	}
	s.create(pinned("before"))
	s.waitRunning("before", "")

	if out, err := s.runCLI("node", "cordon", "node-a"); err != nil || !strings.Contains(out, `node "node-a" cordoned`) {
		t.Fatalf("cordon: %q, %v", out, err)
	}
	out, err := s.runCLI("get", "nodes")
	if err != nil || !regexp.MustCompile(`(?m)^node-a\s+Ready,SchedulingDisabled\b`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^node-b\s+Ready\s`).MatchString(out) {
		t.Fatalf("get nodes after cordon:\n%s%v", out, err)
	}
	// Free placement avoids it; a VM that may only run there waits.
	s.create(scenarioVM("free", "Always", "", ""))
	if got := s.waitRunning("free", "").GetStatus().GetNodeName(); got != "node-b" {
		t.Fatalf("a new VM went to %s, a cordoned node", got)
	}
	s.create(pinned("waits"))
	testutil.Eventually(t, 30*time.Second, "the pinned VM to be unschedulable", func() bool {
		return s.vm("waits").GetStatus().GetPrintableStatus() == apiv1.PrintableErrorUnschedulable
	})
	if got := s.vmi("before"); got.GetStatus().GetPhase() != apiv1.PhaseRunning {
		t.Fatalf("the instance on the cordoned node: %v", got.GetStatus())
	}

	if out, err := s.runCLI("node", "uncordon", "node-a"); err != nil || !strings.Contains(out, `node "node-a" uncordoned`) {
		t.Fatalf("uncordon: %q, %v", out, err)
	}
	if got := s.waitRunning("waits", "").GetStatus().GetNodeName(); got != "node-a" {
		t.Fatalf("the pinned VM runs on %s", got)
	}
	if _, err := s.runCLI("node", "cordon", "nope"); err == nil || !strings.Contains(err.Error(), `node "nope" not found`) {
		t.Fatalf("cordon of an unknown node: %v", err)
	}
}

// Drain: an instance whose strategy lets it stop restarts on the other
// node; one that must migrate but may only run here holds the drain up
// until the timeout names it; uncordon cancels; with nothing left to move,
// a drain ends at once.
func TestScenarioDrain(t *testing.T) {
	s := newScenario(t, "node-a", "node-b")
	if _, err := s.runCLI("node", "cordon", "node-b"); err != nil {
		t.Fatal(err)
	}
	stops := scenarioVM("stops", "Always", "", "")
	stops.Spec.Template.Spec.EvictionStrategy = apiv1.EvictionStrategyNone
	s.create(stops)
	pinned := scenarioVM("pinned", "Always", "", "")
	pinned.Spec.Template.Spec.EvictionStrategy = apiv1.EvictionStrategyLiveMigrate
	pinned.Spec.Template.Spec.NodeSelector = map[string]string{apiv1.LabelNodeName: "node-a"}
	s.create(pinned)
	first := s.waitRunning("stops", "")
	s.waitRunning("pinned", "")
	if _, err := s.runCLI("node", "uncordon", "node-b"); err != nil {
		t.Fatal(err)
	}

	out, err := s.runCLI("node", "drain", "node-a", "--timeout", "15s")
	if err == nil || !strings.Contains(err.Error(), `node "node-a" not drained after 15s`) ||
		!strings.Contains(err.Error(), "default/pinned (LiveMigrate, ") || strings.Contains(err.Error(), "default/stops") {
		t.Fatalf("drain with a pinned LiveMigrate VM: %v\noutput:\n%s", err, out)
	}
	t.Logf("drain output:\n%s", out)
	if !strings.Contains(out, "default/stops: left the node") {
		t.Errorf("progress does not show the stopped VM leaving:\n%s", out)
	}
	if got := s.waitRunning("stops", first.GetMetadata().GetUid()).GetStatus().GetNodeName(); got != "node-b" {
		t.Fatalf("the None VM restarted on %s, want node-b", got)
	}
	if v := s.vmi("pinned"); v.GetStatus().GetNodeName() != "node-a" || v.GetStatus().GetEvacuationNodeName() != "node-a" {
		t.Fatalf("pinned: %v", v.GetStatus())
	}
	if out, err := s.runCLI("get", "nodes"); err != nil || !regexp.MustCompile(`(?m)^node-a\s+Ready,SchedulingDisabled,Draining\b`).MatchString(out) {
		t.Fatalf("get nodes while draining:\n%s%v", out, err)
	}

	if _, err := s.runCLI("node", "uncordon", "node-a"); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, "the uncordon to cancel the evacuation", func() bool {
		migs, err := s.c.Migrations.List(s.ctx, &apiv1.ListMigrationsRequest{Options: &apiv1.ListOptions{Namespace: "default"}})
		if err != nil {
			return false
		}
		for _, m := range migs.GetItems() {
			if !apiv1.IsMigrationFinal(m.GetStatus().GetPhase()) {
				return false
			}
		}
		return s.vmi("pinned").GetStatus().GetEvacuationNodeName() == ""
	})
	if v := s.vmi("pinned"); v.GetStatus().GetPhase() != apiv1.PhaseRunning || v.GetStatus().GetNodeName() != "node-a" {
		t.Fatalf("pinned after the cancel: %v", v.GetStatus())
	}

	// node-b holds only "stops", which may stop: it drains.
	out, err = s.runCLI("node", "drain", "node-b", "--timeout", "60s")
	if err != nil || !strings.Contains(out, `node "node-b" drained`) {
		t.Fatalf("drain of node-b: %v\n%s", err, out)
	}
}
