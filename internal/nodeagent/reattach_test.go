package nodeagent

import (
	"testing"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/fake"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/state"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

func withPhaseRunning() vmiOption {
	return func(v *apiv1.VirtualMachineInstance) { v.Status.Phase = apiv1.PhaseRunning }
}

// Stopping the agent detaches from launchers; a new agent on the same
// database reattaches and never launches, and the guest is not restarted.
// Nothing here needs time to pass: on the fake clock no liveness ping
// runs, so none can find a healthy launcher slow.
func TestRestartReattachesAndNeverLaunches(t *testing.T) {
	h := newHarness(t)
	_, stop := h.runAgent(h.onFakeClock)
	h.createVMI("r")
	h.waitPhase("r", apiv1.PhaseRunning)
	stop()
	if h.fake.Count("Stop") != 0 || h.fake.Count("Detach") != 1 {
		t.Fatalf("agent stop: %d Stop, %d Detach calls; want 0 and 1", h.fake.Count("Stop"), h.fake.Count("Detach"))
	}
	if h.fake.AliveLaunchers(domainOf("r")) != 1 {
		t.Fatal("launcher did not survive the agent")
	}

	_, stop = h.runAgent(h.onFakeClock)
	testutil.Eventually(t, waitTimeout, "the new agent adopts", func() bool { return h.fake.Count("Sync") >= 2 && h.fake.Count("Reattach") >= 1 })
	if n := h.fake.Count("Launch"); n != 1 {
		t.Errorf("%d launches; a reattached launcher must be reused", n)
	}
	h.wantGuestUntouched("r")
	stop()
}

// A launcher that dies while the agent runs is replaced at once by one
// that adopts the running domain: its ended event stream says so. On the
// fake clock, which the test never steps, no liveness ping or resync
// could have found it instead.
func TestDeadLauncherIsReplacedAndAdoptsDomain(t *testing.T) {
	h := newHarness(t)
	_, _ = h.runAgent(h.onFakeClock)
	h.createVMI("d")
	h.waitPhase("d", apiv1.PhaseRunning)
	oldPid := h.record("d").Handle.Pid
	pings := h.fake.Count("Ping")

	h.fake.CrashLaunchers(domainOf("d"))
	testutil.Eventually(t, waitTimeout, "a new launcher adopts the domain", func() bool {
		r := h.record("d")
		return h.fake.AliveLaunchers(domainOf("d")) == 1 && r != nil && r.Handle.Pid != oldPid && h.fake.Count("Sync") >= 2
	})
	if n := h.fake.Count("Ping"); n != pings {
		t.Errorf("%d pings: the replacement was not the event stream's doing", n-pings)
	}
	h.wantGuestUntouched("d")
}

// A launcher that hangs keeps its stream open; the ping finds it once
// one ping timeout passed on the agent's clock without an answer (never
// before), and it is stopped before a new one takes over.
func TestHungLauncherIsReplaced(t *testing.T) {
	h := newHarness(t)
	const interval, timeout = time.Second, time.Hour
	_, _ = h.runAgent(h.onFakeClock, func(o *Options) {
		o.Timing.LivenessInterval, o.Timing.PingTimeout = interval, timeout
		o.Timing.ResyncPeriod = 24 * time.Hour // no other pass calls the hung launcher
	})
	h.createVMI("hung")
	h.waitPhase("hung", apiv1.PhaseRunning)
	h.fake.HangLaunchers(domainOf("hung"))
	pings := h.fake.Count("Ping")
	// The clock is stepped an interval at a time until a tick pings the
	// hung launcher: far less than the ping timeout in all.
	h.stepUntil(interval, "a ping to the hung launcher", func() bool { return h.fake.Count("Ping") > pings })
	if n := h.fake.Count("Launch"); n != 1 {
		t.Fatalf("the launcher was replaced while its ping could still answer (%d launches)", n)
	}
	h.clock.Step(timeout)
	testutil.Eventually(t, waitTimeout, "a new launcher adopts the domain", func() bool {
		return h.fake.Count("Launch") == 2 && h.fake.AliveLaunchers(domainOf("hung")) == 1 && h.fake.Count("Sync") >= 2
	})
	if h.fake.Count("Stop") != 1 {
		t.Errorf("the hung launcher was not stopped (%d Stop calls)", h.fake.Count("Stop"))
	}
	if d, _ := h.fake.Domain(domainOf("hung")); d.Starts != 1 {
		t.Errorf("guest restarted: %+v", d)
	}
}

// The launcher died while the agent was down: the restarted agent
// launches a new one, whose Sync adopts the running guest.
func TestRestartWithDeadLauncherAdopts(t *testing.T) {
	h := newHarness(t)
	_, stop := h.runAgent()
	h.createVMI("x")
	h.waitPhase("x", apiv1.PhaseRunning)
	stop()
	h.fake.CrashLaunchers(domainOf("x"))

	_, _ = h.runAgent()
	testutil.Eventually(t, waitTimeout, "a new launcher adopts the domain", func() bool {
		return h.fake.Count("Launch") == 2 && h.fake.AliveLaunchers(domainOf("x")) == 1 && h.fake.Count("Sync") >= 2
	})
	h.wantGuestUntouched("x")
}

// The launcher hung while the agent was down: it cannot be reattached,
// but it still holds the domain lock, so the restarted agent kills it by
// its handle before it launches the replacement, which adopts the guest.
func TestRestartWithHungLauncherKillsItFirst(t *testing.T) {
	h := newHarness(t)
	_, stop := h.runAgent()
	h.createVMI("hung2")
	h.waitPhase("hung2", apiv1.PhaseRunning)
	oldPid := h.record("hung2").Handle.Pid
	stop()
	h.fake.HangLaunchers(domainOf("hung2"))

	start := time.Now()
	_, _ = h.runAgent()
	testutil.Eventually(t, waitTimeout, "a new launcher adopts the domain", func() bool {
		r := h.record("hung2")
		return r != nil && r.Handle.Pid != oldPid && h.fake.AliveLaunchers(domainOf("hung2")) == 1 && h.fake.Count("Sync") >= 2
	})
	t.Logf("replaced in %v", time.Since(start).Round(time.Millisecond))
	kill, launch := -1, -1
	for i, c := range h.fake.Calls() {
		switch {
		case c.Op == "KillLauncher" && c.Pid == oldPid && kill < 0:
			kill = i
		case c.Op == "Launch" && i > kill && kill >= 0 && launch < 0:
			launch = i
		}
	}
	if kill < 0 || launch < 0 {
		t.Fatalf("the hung launcher was not killed before the new launch: %+v", h.fake.Calls())
	}
	h.wantGuestUntouched("hung2")
}

// Domains of this node that belong to nothing are removed; a domain of a
// VMI placed here whose record was lost is adopted, not removed; domains
// of other node agents sharing the libvirtd are left alone.
func TestOrphanDomainsCleanedUp(t *testing.T) {
	h := newHarness(t)
	h.fake.AddDomain(fake.Domain{Name: "default_ghost", VMIUID: "uid-of-a-long-gone-vmi", VMIKey: "default/ghost", Node: testNode})
	h.fake.AddDomain(fake.Domain{Name: "default_neighbour", VMIUID: "uid-n", VMIKey: "default/neighbour", Node: "node2", State: fake.StateRunning})
	h.fake.AddDomain(fake.Domain{Name: "default_nodeless", VMIUID: "uid-x", VMIKey: "default/nodeless", State: fake.StateRunning})
	lost := h.createVMI("lost", withPhaseRunning())
	h.fake.AddDomain(fake.Domain{Name: domainOf("lost"), VMIUID: lost.Metadata.Uid, VMIKey: "default/lost"})

	_, _ = h.runAgent()
	testutil.Eventually(t, waitTimeout, "orphan removed", func() bool { _, ok := h.fake.Domain("default_ghost"); return !ok })
	if n := h.fake.AliveLaunchers("default_ghost"); n != 0 {
		t.Errorf("%d launchers left for the orphan", n)
	}
	for _, name := range []string{"default_neighbour", "default_nodeless"} {
		if d, ok := h.fake.Domain(name); !ok || d.State != fake.StateRunning {
			t.Errorf("domain %s of another agent touched: %+v (exists %v)", name, d, ok)
		}
	}
	testutil.Eventually(t, waitTimeout, "lost VMI adopted", func() bool { r := h.record("lost"); return r != nil && r.HasLauncher() && h.fake.Count("Sync") >= 1 })
	if d, ok := h.fake.Domain(domainOf("lost")); !ok || d.State != fake.StateRunning || d.Starts != 0 {
		t.Errorf("adopted domain %+v (ok %v): must keep running, not restart", d, ok)
	}
}

// An agent that starts after its last lease ended destroys its
// RestartElsewhere domains before registering; Wait domains live on.
func TestFailSafeRestartFencesRestartElsewhere(t *testing.T) {
	h := newHarness(t)
	re := h.createVMI("re", withPolicy(apiv1.NodeFailurePolicyRestartElsewhere), withPhaseRunning())
	w := h.createVMI("w", withPhaseRunning())
	for _, v := range []*apiv1.VirtualMachineInstance{re, w} {
		name := v.Metadata.Name
		policy := v.Metadata.Annotations[apiv1.AnnotationNodeFailurePolicy]
		if policy == "" {
			policy = apiv1.NodeFailurePolicyWait
		}
		h.fake.AddDomain(fake.Domain{Name: domainOf(name), VMIUID: v.Metadata.Uid, VMIKey: apiv1.Ref("default", name), Starts: 1})
		if err := h.db.PutVMI(&state.VMI{UID: v.Metadata.Uid, Namespace: "default", Name: name, DomainName: domainOf(name),
			Handle:             launcher.Handle{Version: 1, DomainName: domainOf(name), Addr: "/gone", Pid: 99999},
			GracePeriodSeconds: 30, NodeFailurePolicy: policy, Dir: t.TempDir()}); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.db.PutNode(&state.Node{LeaseExpiry: time.Now().Add(-time.Minute)}); err != nil {
		t.Fatal(err)
	}

	_, _ = h.runAgent()
	testutil.Eventually(t, waitTimeout, "registered", func() bool { return h.tl.index("register") >= 0 })
	kill, reg := h.tl.index("launcher:Kill"), h.tl.index("register")
	if kill < 0 || kill > reg {
		t.Fatalf("RestartElsewhere domain not destroyed before registering: %v", h.tl.events())
	}
	v := h.waitPhase("re", apiv1.PhaseFailed)
	if v.Status.Reason != ReasonDestroyed {
		t.Errorf("reason %s", v.Status.Reason)
	}
	if d, ok := h.fake.Domain(domainOf("w")); !ok || d.State != fake.StateRunning || d.Starts != 1 {
		t.Errorf("Wait domain touched: %+v", d)
	}
	if p := h.phase("w"); p != apiv1.PhaseRunning {
		t.Errorf("Wait VMI phase %s", p)
	}
}
