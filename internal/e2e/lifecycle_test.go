package e2e

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent"
	"github.com/virtplane/terraform-provider-virtplane/internal/procfs"
	"github.com/virtplane/terraform-provider-virtplane/internal/testguest"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// TestCreateRunStop: a VM created through the API runs and its guest
// boots; the stop verb shuts it down by ACPI, which the guest obeys. The
// instance ends Succeeded, and the domain, the launcher and the VMI's
// files are gone; the VM shows Stopped.
func TestCreateRunStop(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	start := time.Now()
	c.create(c.guestVM("web", apiv1.RunStrategyAlways, testguest.Cmdline(testguest.Hostname("vp-e2e-web"))))
	vmi := c.waitRunning("web", "")
	uid := vmi.GetMetadata().GetUid()
	con := c.console(uid)
	booted := testguest.Fields(con.waitMarker(testguest.MarkerBooted, bootTimeout))
	t.Logf("Running and booted in %s (guest uptime %s s)", time.Since(start).Round(time.Millisecond), booted["uptime"])
	if booted["hostname"] != "vp-e2e-web" {
		t.Errorf("guest hostname %q", booted["hostname"])
	}
	if !slices.ContainsFunc(vmi.GetStatus().GetConditions(), func(c *apiv1.Condition) bool {
		return c.GetType() == apiv1.ConditionSoftwareEmulation && c.GetStatus() == apiv1.ConditionTrue
	}) {
		t.Errorf("no SoftwareEmulation condition on a TCG guest: %v", vmi.GetStatus().GetConditions())
	}
	dom := c.domain("web")
	if st, err := virsh("domstate", dom); err != nil || strings.TrimSpace(st) != "running" {
		t.Fatalf("domstate %q, %v", st, err)
	}
	launchers := launcherPids(dom)
	if len(launchers) != 1 {
		t.Fatalf("launchers of %s: %v, want one", dom, launchers)
	}

	stop := time.Now()
	if _, err := c.api.VMs.Stop(c.ctx, &apiv1.StopVirtualMachineRequest{Key: c.key("web")}); err != nil {
		t.Fatal(err)
	}
	off := testguest.Fields(con.waitMarker(testguest.MarkerPoweroff, stateTimeout))
	if off["reason"] != "acpi" {
		t.Errorf("guest powered off for %q, want acpi", off["reason"])
	}
	final := c.waitFinal(uid, stateTimeout)
	if p := final.GetStatus().GetPhase(); p != apiv1.PhaseSucceeded {
		t.Errorf("VMI ended %s (%s: %s), want Succeeded", p, final.GetStatus().GetReason(), final.GetStatus().GetMessage())
	}
	c.waitPrintable("web", apiv1.PrintableStopped, stateTimeout)
	testutil.Eventually(c.t, stateTimeout, "the domain undefined", func() bool { return !domainDefined(t, dom) })
	testutil.Eventually(c.t, stateTimeout, "the launcher gone", func() bool { return len(launcherPids(dom)) == 0 })
	testutil.Eventually(c.t, stateTimeout, "the VMI's files removed", func() bool {
		_, err := os.Stat(c.vmiDir(uid))
		return os.IsNotExist(err)
	})
	if v := c.vmi("web"); v != nil {
		t.Errorf("VMI still there: %v", v.GetStatus())
	}
	t.Logf("stopped in %s; VMI phases %v; VM statuses %v", time.Since(stop).Round(time.Millisecond),
		c.rec.phases(uid), c.rec.statuses("web"))
}

// TestQEMUKilledRestartsAlways: SIGKILL of QEMU fails the instance; the
// Always VM gets a new one, whose guest boots again.
func TestQEMUKilledRestartsAlways(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.create(c.guestVM("db", apiv1.RunStrategyAlways, testguest.Cmdline()))
	first := c.waitRunning("db", "")
	uid := first.GetMetadata().GetUid()
	c.console(uid).waitMarker(testguest.MarkerBooted, bootTimeout)
	dom := c.domain("db")
	qemu := procfs.QEMUPid(dom)
	if qemu == 0 {
		t.Fatalf("no QEMU pid for %s", dom)
	}

	killed := time.Now()
	if err := syscall.Kill(qemu, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	failed := c.waitFinal(uid, stateTimeout)
	t.Logf("VMI %s after %s: %s (%s: %s)", uid, time.Since(killed).Round(time.Millisecond),
		failed.GetStatus().GetPhase(), failed.GetStatus().GetReason(), failed.GetStatus().GetMessage())
	if p := failed.GetStatus().GetPhase(); p != apiv1.PhaseFailed {
		t.Errorf("VMI of a killed QEMU ended %s, want Failed", p)
	}

	second := c.waitRunning("db", uid)
	if second.GetMetadata().GetUid() == uid {
		t.Fatal("no new instance")
	}
	c.console(second.GetMetadata().GetUid()).waitMarker(testguest.MarkerBooted, bootTimeout)
	if q := procfs.QEMUPid(dom); q == 0 || q == qemu {
		t.Errorf("QEMU pid %d after restart (was %d)", q, qemu)
	}
	t.Logf("new instance booted %s after the kill; VM statuses %v", time.Since(killed).Round(time.Millisecond), c.rec.statuses("db"))
}

// TestLibvirtErrorFailsVMI: a missing kernel is libvirt's error to
// report; the VMI carries its message in a condition and fails promptly,
// and the VM goes into CrashLoopBackOff.
func TestLibvirtErrorFailsVMI(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	vm := c.guestVM("broken", apiv1.RunStrategyAlways, testguest.Cmdline())
	// By absolute path: placement checks only relative names against the
	// node's image list (a missing one leaves the VMI unschedulable), so
	// this one reaches libvirt.
	vm.Spec.Template.Spec.Domain.Firmware.KernelBoot.Kernel = env.imageDir + "/no-such-vmlinuz"
	start := time.Now()
	c.create(vm)
	var uid string
	testutil.Eventually(c.t, stateTimeout, "an instance", func() bool {
		v := c.vmi("broken")
		uid = v.GetMetadata().GetUid()
		return uid != ""
	})
	v := c.waitFinal(uid, 30*time.Second)
	took := time.Since(start)
	st := v.GetStatus()
	t.Logf("VMI failed %s after the VM was created: %s: %s", took.Round(time.Millisecond), st.GetReason(), st.GetMessage())
	if st.GetPhase() != apiv1.PhaseFailed || st.GetReason() != nodeagent.ReasonSyncFailed {
		t.Errorf("VMI %s/%s, want Failed/%s", st.GetPhase(), st.GetReason(), nodeagent.ReasonSyncFailed)
	}
	missing := env.imageDir + "/no-such-vmlinuz"
	cond := apiv1.FindCondition(st.GetConditions(), apiv1.ConditionSynchronized)
	if cond.GetStatus() != apiv1.ConditionFalse || !strings.Contains(cond.GetMessage(), missing) {
		t.Errorf("Synchronized condition %v: want False with libvirt's message naming %s", cond, missing)
	}
	if !strings.Contains(st.GetMessage(), missing) {
		t.Errorf("VMI message %q does not carry libvirt's error", st.GetMessage())
	}
	c.waitPrintable("broken", apiv1.PrintableCrashLoopBackOff, stateTimeout)
	testutil.Eventually(c.t, stateTimeout, "the never-started domain removed", func() bool { return !domainDefined(t, c.domain("broken")) })
	t.Logf("VM statuses %v", c.rec.statuses("broken"))
}

// TestOnceGuestEnds: a Once VM whose guest powers itself off ends
// Succeeded and is not restarted; one whose guest kernel panics ends
// Failed, and is not restarted either.
func TestOnceGuestEnds(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	cases := []struct {
		name, cmdline, phase, reason, marker string
	}{
		{"poweroff", testguest.Cmdline(testguest.PoweroffAfter(time.Second)), apiv1.PhaseSucceeded, nodeagent.ReasonGuestShutdown, testguest.MarkerPoweroff},
		{"crash", testguest.Cmdline(testguest.Crash(time.Second)), apiv1.PhaseFailed, nodeagent.ReasonGuestCrashed, testguest.MarkerCrash},
	}
	// Both boot at once; the checks follow in order.
	for _, tc := range cases {
		c.create(c.guestVM(tc.name, apiv1.RunStrategyOnce, tc.cmdline))
	}
	uids := map[string]string{}
	for _, tc := range cases {
		testutil.Eventually(c.t, stateTimeout, tc.name+" instance", func() bool {
			uids[tc.name] = c.vmi(tc.name).GetMetadata().GetUid()
			return uids[tc.name] != ""
		})
	}
	for _, tc := range cases {
		uid := uids[tc.name]
		con := c.console(uid)
		con.waitMarker(testguest.MarkerBooted, bootTimeout)
		con.waitMarker(tc.marker, stateTimeout)
		v := c.waitFinal(uid, stateTimeout)
		st := v.GetStatus()
		if st.GetPhase() != tc.phase || st.GetReason() != tc.reason {
			t.Errorf("%s: VMI ended %s/%s (%s), want %s/%s", tc.name, st.GetPhase(), st.GetReason(), st.GetMessage(), tc.phase, tc.reason)
		}
		if !slices.Contains(c.rec.phases(uid), apiv1.PhaseRunning) {
			t.Errorf("%s: VMI was never Running: %v", tc.name, c.rec.phases(uid))
		}
		c.waitPrintable(tc.name, apiv1.PrintableStopped, stateTimeout)
	}
	// Not restarted: no other instance appears, and no domain runs.
	testutil.ConsistentlyNoError(t, 5*time.Second, "no instance or QEMU coming back", func() error {
		for _, tc := range cases {
			if v := c.vmi(tc.name); v != nil && !apiv1.IsFinal(v.GetStatus().GetPhase()) {
				return fmt.Errorf("%s: restarted as %s (%s)", tc.name, v.GetMetadata().GetUid(), v.GetStatus().GetPhase())
			}
			if q := procfs.QEMUPid(c.domain(tc.name)); q != 0 {
				return fmt.Errorf("%s: QEMU %d runs again", tc.name, q)
			}
		}
		return nil
	})
	for _, tc := range cases {
		if got := c.vm(tc.name).GetStatus().GetPrintableStatus(); got != apiv1.PrintableStopped {
			t.Errorf("%s: VM %s, want Stopped", tc.name, got)
		}
		// QEMU holds a panicked guest paused until libvirt applies
		// on_crash; that is no user-visible pause.
		if seen := c.rec.statuses(tc.name); slices.Contains(seen, apiv1.PrintablePaused) {
			t.Errorf("%s: VM showed Paused: %v", tc.name, seen)
		}
		t.Logf("%s: VM statuses %v", tc.name, c.rec.statuses(tc.name))
	}
}
