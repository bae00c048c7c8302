package nodeagent

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/fake"
)

// A kernel file that is not there: libvirt's message ends up on the VMI,
// which fails instead of hanging in Scheduled, and the domain is removed.
func TestMissingKernelFailsWithLibvirtMessage(t *testing.T) {
	h := newHarness(t)
	a := h.directAgent()
	h.createVMI("kb", withKernel("vmlinuz"))
	h.reconcile(a, "kb")

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
	if _, ok := h.fake.Domain(domainOf("kb")); ok {
		t.Error("domain of the failed VMI still defined")
	}
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
	h := newHarness(t)
	a := h.directAgent()
	h.createVMI("p")
	h.reconcile(a, "p")
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

// The guest powers off by itself: Succeeded, then the domain goes.
func TestGuestShutdownSucceeds(t *testing.T) {
	h := newHarness(t)
	a := h.directAgent()
	h.createVMI("g")
	h.reconcile(a, "g")
	h.fake.SetDomainState(domainOf("g"), fake.StateShutoff, "Shutdown")
	h.reconcile(a, "g")
	v := h.getVMI("g")
	if v.Status.Phase != apiv1.PhaseSucceeded || v.Status.Reason != ReasonGuestShutdown {
		t.Fatalf("phase %s reason %s", v.Status.Phase, v.Status.Reason)
	}
	if _, ok := h.fake.Domain(domainOf("g")); ok {
		t.Error("domain not deleted")
	}
	// The phase was written before the domain was deleted.
	if h.tl.index("status:Succeeded") > h.tl.index("launcher:Delete") {
		t.Errorf("domain deleted before the final phase was recorded: %v", h.tl.events())
	}
}

func TestGuestCrashFails(t *testing.T) {
	h := newHarness(t)
	a := h.directAgent()
	h.createVMI("c")
	h.reconcile(a, "c")
	h.fake.SetDomainState(domainOf("c"), fake.StateCrashed, "Panicked")
	h.reconcile(a, "c")
	if v := h.getVMI("c"); v.Status.Phase != apiv1.PhaseFailed || v.Status.Reason != ReasonGuestCrashed {
		t.Fatalf("phase %s reason %s", v.Status.Phase, v.Status.Reason)
	}
	if _, ok := h.fake.Domain(domainOf("c")); ok {
		t.Error("crashed domain not deleted")
	}
}

// A final phase written by someone else (the node controller, a fence) is
// never overwritten, and the domain is removed.
func TestFinalPhaseIsNeverOverwritten(t *testing.T) {
	h := newHarness(t)
	a := h.directAgent()
	h.createVMI("f")
	h.reconcile(a, "f")
	h.updateVMI("f", func(v *apiv1.VirtualMachineInstance) {
		v.Status.Phase, v.Status.Reason = apiv1.PhaseFailed, "NodeUnresponsive"
	})
	h.reconcile(a, "f")
	if v := h.getVMI("f"); v.Status.Phase != apiv1.PhaseFailed || v.Status.Reason != "NodeUnresponsive" {
		t.Fatalf("status rewritten: %s/%s", v.Status.Phase, v.Status.Reason)
	}
	if _, ok := h.fake.Domain(domainOf("f")); ok {
		t.Error("domain of a final VMI not deleted")
	}
	if h.fake.Count("Kill") != 1 {
		t.Errorf("running domain of a final VMI: %d kills", h.fake.Count("Kill"))
	}
}

// A VMI that reuses the name of one whose domain is still here waits for
// the old domain to go; the old one gets its own grace period.
func TestSameNameNewVMIReplacesOldDomain(t *testing.T) {
	h := newHarness(t)
	a := h.directAgent()
	old := h.createVMI("n", withoutFinalizer(), withGrace(0))
	h.reconcile(a, "n")
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
	if v := h.getVMI("d"); v.Status.Phase != apiv1.PhaseFailed || v.Status.Reason != ReasonDeletedBeforeStart {
		t.Fatalf("phase %s/%s", v.Status.Phase, v.Status.Reason)
	}
	if h.fake.Count("Launch") != 0 {
		t.Error("launched a launcher for a deleted VMI")
	}
}

// A launcher that cannot be reached does not fail its VMI before the
// launcher grace (KubeVirt pain point #9); after it, it does.
func TestUnresponsiveLauncherNotFailedBeforeGrace(t *testing.T) {
	h := newHarness(t)
	a := h.directAgent()
	h.createVMI("u")
	h.reconcile(a, "u")
	h.fake.CrashLaunchers(domainOf("u"))
	h.fake.SetLaunchError(errLauncherUnavailable)

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
	v := h.getVMI("u")
	if v.Status.Phase != apiv1.PhaseFailed || v.Status.Reason != ReasonLauncherUnresponsive {
		t.Fatalf("after the grace: %s/%s", v.Status.Phase, v.Status.Reason)
	}

	// Once a launcher can be started again, the domain is cleaned up.
	h.fake.SetLaunchError(nil)
	h.reconcile(a, "u")
	if _, ok := h.fake.Domain(domainOf("u")); ok {
		t.Error("domain of the failed VMI kept")
	}
}

// A reachable launcher again resets the grace.
func TestLauncherGraceResetsWhenReachable(t *testing.T) {
	h := newHarness(t)
	a := h.directAgent()
	h.createVMI("r")
	h.reconcile(a, "r")
	h.fake.CrashLaunchers(domainOf("r"))
	h.fake.SetLaunchError(errLauncherUnavailable)
	h.reconcile(a, "r")
	h.clock.Step(2 * time.Minute)
	h.fake.SetLaunchError(nil)
	h.reconcile(a, "r") // a new launcher adopts the domain
	h.fake.CrashLaunchers(domainOf("r"))
	h.fake.SetLaunchError(errLauncherUnavailable)
	h.reconcile(a, "r")
	h.clock.Step(2 * time.Minute)
	h.reconcile(a, "r")
	if p := h.phase("r"); p != apiv1.PhaseRunning {
		t.Fatalf("grace not reset by a reachable launcher: %s", p)
	}
}

// start --paused: the guest boots paused, and the VMI shows it.
func TestStartPaused(t *testing.T) {
	h := newHarness(t)
	a := h.directAgent()
	h.createVMI("sp", func(v *apiv1.VirtualMachineInstance) { v.Spec.Paused = true })
	h.reconcile(a, "sp")
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
