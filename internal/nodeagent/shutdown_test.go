package nodeagent

import (
	"testing"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/fake"
)

// A guest that ignores ACPI gets it again every 5 s and is killed when
// the grace period ends; killed with a grace period, the VMI fails.
func TestGracefulShutdownResendsACPIAndKillsAtGraceExpiry(t *testing.T) {
	h, a := newStarted(t, "s", withGrace(30))
	h.fake.SetPowerOffAfterACPI(domainOf("s"), 0) // ignores ACPI
	h.deleteVMI("s")

	var waits []time.Duration
	for elapsed := time.Duration(0); elapsed < 30*time.Second; {
		wait := h.reconcile(a, "s")
		if wait <= 0 || wait > DefaultACPIInterval {
			t.Fatalf("at %v: requeue after %v, want (0, 5s]", elapsed, wait)
		}
		if h.fake.Count("Kill") != 0 {
			t.Fatalf("killed at %v, before the grace period ended", elapsed)
		}
		waits = append(waits, wait)
		h.clock.Step(wait)
		elapsed += wait
	}
	d, _ := h.fake.Domain(domainOf("s"))
	if d.ACPIPresses != 6 {
		t.Errorf("ACPI sent %d times in 30 s, want 6 (every 5 s): waits %v", d.ACPIPresses, waits)
	}
	h.reconcile(a, "s") // grace over: kill
	if d, _ := h.fake.Domain(domainOf("s")); d.State != fake.StateShutoff || d.Reason != "Destroyed" {
		t.Fatalf("domain %+v, want destroyed", d)
	}
	h.reconcile(a, "s") // off: record the end, delete
	h.wantPhase("s", apiv1.PhaseFailed, ReasonDestroyed)
	h.wantNoDomain("s")
	if h.record("s") != nil {
		t.Error("record kept")
	}
	if h.fake.AliveLaunchers(domainOf("s")) != 0 {
		t.Error("launcher not stopped")
	}
}

// A guest that obeys ACPI ends Succeeded.
func TestGracefulShutdownSucceeds(t *testing.T) {
	h, a := newStarted(t, "ok")
	h.fake.SetPowerOffAfterACPI(domainOf("ok"), 2) // misses the first press, as a booting guest may
	h.deleteVMI("ok")
	h.clock.Step(h.reconcile(a, "ok"))
	h.clock.Step(h.reconcile(a, "ok"))
	h.reconcile(a, "ok")
	h.wantPhase("ok", apiv1.PhaseSucceeded, ReasonGuestShutdown)
	if h.fake.Count("Kill") != 0 {
		t.Error("a guest that shut down was killed")
	}
}

// Grace 0 kills at once, and that is a success (KubeVirt: Destroyed
// without ACPI grace → Succeeded).
func TestZeroGraceKillsAtOnce(t *testing.T) {
	h, a := newStarted(t, "z")
	// A force stop shortens the grace period before deleting.
	h.updateVMI("z", func(v *apiv1.VirtualMachineInstance) { g := int64(0); v.Spec.TerminationGracePeriodSeconds = &g })
	h.deleteVMI("z")
	h.reconcile(a, "z")
	if h.fake.Count("Shutdown") != 0 || h.fake.Count("Kill") != 1 {
		t.Fatalf("shutdowns %d kills %d, want 0 and 1", h.fake.Count("Shutdown"), h.fake.Count("Kill"))
	}
	h.reconcile(a, "z")
	if v := h.getVMI("z"); v.Status.Phase != apiv1.PhaseSucceeded {
		t.Fatalf("phase %s/%s, want Succeeded", v.Status.Phase, v.Status.Reason)
	}
}

// A force stop during a graceful one cuts the grace period short.
func TestShortenedGraceKills(t *testing.T) {
	h, a := newStarted(t, "sh", withGrace(120))
	h.deleteIgnoringACPI(a, "sh")
	h.clock.Step(10 * time.Second)
	h.updateVMI("sh", func(v *apiv1.VirtualMachineInstance) { g := int64(5); v.Spec.TerminationGracePeriodSeconds = &g })
	h.reconcile(a, "sh")
	if h.fake.Count("Kill") != 1 {
		t.Fatal("shortened grace period did not kill")
	}
}

// The grace period outlives the VMI object: it comes from the record.
func TestShutdownOfVanishedVMIUsesRecordedGrace(t *testing.T) {
	h, a := newStarted(t, "v", withoutFinalizer(), withGrace(20))
	h.deleteIgnoringACPI(a, "v") // no finalizer: gone at once
	h.clock.Step(19 * time.Second)
	h.reconcile(a, "v")
	if h.fake.Count("Kill") != 0 {
		t.Fatal("killed before the recorded grace period")
	}
	h.clock.Step(time.Second)
	h.reconcile(a, "v")
	if h.fake.Count("Kill") != 1 {
		t.Fatal("not killed at the recorded grace period")
	}
	h.reconcile(a, "v")
	if _, ok := h.fake.Domain(domainOf("v")); ok || h.record("v") != nil {
		t.Fatal("not cleaned up")
	}
}

// The grace period keeps running across an agent restart.
func TestShutdownGraceSurvivesAgentRestart(t *testing.T) {
	h, a := newStarted(t, "rs", withGrace(30))
	h.deleteIgnoringACPI(a, "rs")
	h.clock.Step(25 * time.Second)

	b := h.directAgent() // same database, new agent
	if err := b.restore(h.ctx); err != nil {
		t.Fatal(err)
	}
	h.reconcile(b, "rs")
	if h.fake.Count("Kill") != 0 {
		t.Fatal("killed early")
	}
	h.clock.Step(5 * time.Second)
	h.reconcile(b, "rs")
	if h.fake.Count("Kill") != 1 {
		t.Fatal("the restarted agent restarted the grace period")
	}
}
