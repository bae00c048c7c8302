package nodeagent

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/fake"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/launchers"
)

// A kernel file that is not there: libvirt's message ends up on the VMI,
// which fails instead of hanging in Scheduled, and the domain is removed.
func TestMissingKernelFailsWithLibvirtMessage(t *testing.T) {
	h, a := newStarted(t, "kb", withKernel("vmlinuz"))

	v := h.getVMI("kb")
	want := "Cannot access storage file '" + filepath.Join(h.imageDir, "vmlinuz") + "': No such file or directory"
	if v.Status.Phase != apiv1.PhaseFailed {
		t.Fatalf("phase %s, want Failed", v.Status.Phase)
	}
	c := apiv1.FindCondition(v.Status.Conditions, apiv1.ConditionSynchronized)
	if c.GetStatus() != apiv1.ConditionFalse || c.GetReason() != ReasonSyncFailed || c.GetMessage() != want {
		t.Fatalf("Synchronized condition %v, want False/%s/%q", c, ReasonSyncFailed, want)
	}
	if v.Status.Message != want {
		t.Errorf("status message %q", v.Status.Message)
	}

	// Final now: the next pass removes the defined domain and the files.
	rec := h.record("kb")
	h.reconcile(a, "kb")
	h.wantNoDomain("kb")
	if h.record("kb") != nil {
		t.Error("state record kept")
	}
	if _, err := os.Stat(rec.Dir); !os.IsNotExist(err) {
		t.Errorf("VMI directory kept: %v", err)
	}
	if h.fake.AliveLaunchers(domainOf("kb")) != 0 {
		t.Error("launcher still running")
	}
}

func TestPauseAndUnpause(t *testing.T) {
	h, a := newStarted(t, "p")
	h.updateVMI("p", func(v *apiv1.VirtualMachineInstance) { v.Spec.Paused = true })
	h.reconcile(a, "p")
	if d, _ := h.fake.Domain(domainOf("p")); d.State != fake.StatePaused || !d.PausedByUser {
		t.Fatalf("domain %+v, want paused by user", d)
	}
	c := apiv1.FindCondition(h.getVMI("p").Status.Conditions, apiv1.ConditionPaused)
	if c.GetStatus() != apiv1.ConditionTrue || c.GetReason() != ReasonPausedByUser {
		t.Fatalf("Paused condition %v", c)
	}
	h.updateVMI("p", func(v *apiv1.VirtualMachineInstance) { v.Spec.Paused = false })
	h.reconcile(a, "p")
	if d, _ := h.fake.Domain(domainOf("p")); d.State != fake.StateRunning {
		t.Fatalf("domain %+v, want running", d)
	}
	if c := apiv1.FindCondition(h.getVMI("p").Status.Conditions, apiv1.ConditionPaused); c != nil {
		t.Fatalf("Paused condition left: %v", c)
	}
}

// The guest ends by itself: powered off it Succeeded, crashed it Failed;
// the final phase is recorded, then the domain goes.
func TestGuestEnds(t *testing.T) {
	for _, tc := range []struct {
		name, state, libvirtReason string
		phase, reason              string
	}{
		{"shutdown", fake.StateShutoff, "Shutdown", apiv1.PhaseSucceeded, ReasonGuestShutdown},
		{"crash", fake.StateCrashed, "Panicked", apiv1.PhaseFailed, ReasonGuestCrashed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, a := newStarted(t, "g")
			h.fake.SetDomainState(domainOf("g"), tc.state, tc.libvirtReason)
			h.reconcile(a, "g")
			h.wantPhase("g", tc.phase, tc.reason)
			h.wantNoDomain("g")
			if h.tl.index("status:"+tc.phase) > h.tl.index("launcher:Delete") {
				t.Errorf("domain deleted before the final phase was recorded: %v", h.tl.events())
			}
		})
	}
}

// A final phase written by someone else (the node controller, a fence) is
// never overwritten, and the domain is removed.
func TestFinalPhaseIsNeverOverwritten(t *testing.T) {
	h, a := newStarted(t, "f")
	h.updateVMI("f", func(v *apiv1.VirtualMachineInstance) {
		v.Status.Phase, v.Status.Reason = apiv1.PhaseFailed, "NodeUnresponsive"
	})
	h.reconcile(a, "f")
	h.wantPhase("f", apiv1.PhaseFailed, "NodeUnresponsive") // not rewritten
	h.wantNoDomain("f")
	if h.fake.Count("Kill") != 1 {
		t.Errorf("running domain of a final VMI: %d kills", h.fake.Count("Kill"))
	}
}

// A VMI that reuses the name of one whose domain is still here waits for
// the old domain to go; the old one gets its own grace period.
func TestSameNameNewVMIReplacesOldDomain(t *testing.T) {
	h := newHarness(t)
	a := h.directAgent()
	old := h.startVMI(a, "n", withoutFinalizer(), withGrace(0))
	h.deleteVMI("n") // gone at once: no finalizer
	newer := h.createVMI("n")
	h.synced(a, "n")
	for range 5 {
		if _, err := a.Reconcile(h.ctx, "default/n"); err != nil {
			t.Fatal(err)
		}
	}
	d, ok := h.fake.Domain(domainOf("n"))
	if !ok || d.VMIUID != newer.Metadata.Uid || d.VMIUID == old.Metadata.Uid {
		t.Fatalf("domain %+v, want the new VMI's", d)
	}
	if h.phase("n") != apiv1.PhaseRunning {
		t.Fatalf("new VMI phase %s", h.phase("n"))
	}
	if r := h.record("n"); r.UID != newer.Metadata.Uid {
		t.Fatalf("record of uid %s", r.UID)
	}
}

func TestDeletedBeforeStartFails(t *testing.T) {
	h := newHarness(t)
	a := h.directAgent()
	h.createVMI("d")
	h.deleteVMI("d")
	h.reconcile(a, "d")
	h.wantPhase("d", apiv1.PhaseFailed, ReasonDeletedBeforeStart)
	if h.fake.Count("Launch") != 0 {
		t.Error("launched a launcher for a deleted VMI")
	}
}

// A launcher that cannot be reached does not fail its VMI before the
// launcher grace (KubeVirt pain point #9); after it, it does.
func TestUnresponsiveLauncherNotFailedBeforeGrace(t *testing.T) {
	h, a := newStarted(t, "u")
	h.fake.CrashLaunchers(domainOf("u"))
	h.fake.SetLaunchError(launchers.ErrUnavailable)

	if wait := h.reconcile(a, "u"); wait <= 0 {
		t.Fatalf("no retry scheduled (%v)", wait)
	}
	h.clock.Step(DefaultLauncherGrace - time.Second)
	h.reconcile(a, "u")
	if p := h.phase("u"); p != apiv1.PhaseRunning {
		t.Fatalf("failed before the launcher grace: %s", p)
	}
	if d, _ := h.fake.Domain(domainOf("u")); d.State != fake.StateRunning {
		t.Fatalf("guest touched: %+v", d)
	}
	h.clock.Step(2 * time.Second)
	h.reconcile(a, "u")
	h.wantPhase("u", apiv1.PhaseFailed, ReasonLauncherUnresponsive) // after the grace

	// Once a launcher can be started again, the domain is cleaned up.
	h.fake.SetLaunchError(nil)
	h.reconcile(a, "u")
	h.wantNoDomain("u")
}

// A reachable launcher again resets the grace.
func TestLauncherGraceResetsWhenReachable(t *testing.T) {
	h, a := newStarted(t, "r")
	h.fake.CrashLaunchers(domainOf("r"))
	h.fake.SetLaunchError(launchers.ErrUnavailable)
	h.reconcile(a, "r")
	h.clock.Step(2 * time.Minute)
	h.fake.SetLaunchError(nil)
	h.reconcile(a, "r") // a new launcher adopts the domain
	h.fake.CrashLaunchers(domainOf("r"))
	h.fake.SetLaunchError(launchers.ErrUnavailable)
	h.reconcile(a, "r")
	h.clock.Step(2 * time.Minute)
	h.reconcile(a, "r")
	if p := h.phase("r"); p != apiv1.PhaseRunning {
		t.Fatalf("grace not reset by a reachable launcher: %s", p)
	}
}

// start --paused: the guest boots paused, and the VMI shows it.
func TestStartPaused(t *testing.T) {
	h, _ := newStarted(t, "sp", func(v *apiv1.VirtualMachineInstance) { v.Spec.Paused = true })
	v := h.getVMI("sp")
	if v.Status.Phase != apiv1.PhaseRunning {
		t.Fatalf("phase %s", v.Status.Phase)
	}
	if c := apiv1.FindCondition(v.Status.Conditions, apiv1.ConditionPaused); c.GetReason() != ReasonPausedByUser {
		t.Fatalf("Paused condition %v", c)
	}
	if d, _ := h.fake.Domain(domainOf("sp")); d.State != fake.StatePaused || d.Starts != 1 {
		t.Fatalf("domain %+v", d)
	}
}
