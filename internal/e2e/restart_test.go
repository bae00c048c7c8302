package e2e

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/procfs"
	"github.com/virtplane/terraform-provider-virtplane/internal/testguest"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// adoptionDeadline is how soon a new launcher must have adopted the
// running domain of one that died.
const adoptionDeadline = 5 * time.Second

// running is what a test records about a running VM.
type running struct {
	uid      string
	domain   string
	qemu     int
	launcher int
	// seen is how many printable statuses the recorder had for the VM
	// when the record was taken: what comes after is what the test
	// provoked.
	seen int
}

// bootAll creates Always VMs named names at once, waits until every guest
// has booted, and records their processes. policies gives some of them a
// node failure policy.
func bootAll(c *cluster, policies map[string]string, names ...string) map[string]*running {
	c.t.Helper()
	start := time.Now()
	for _, n := range names {
		vm := c.guestVM(n, apiv1.RunStrategyAlways, testguest.Cmdline(testguest.Hostname("vp-"+n)))
		vm.Spec.NodeFailurePolicy = policies[n]
		c.create(vm)
	}
	out := map[string]*running{}
	for _, n := range names {
		vmi := c.waitRunning(n, "")
		c.console(vmi.GetMetadata().GetUid()).waitMarker(testguest.MarkerBooted, bootTimeout)
		r := &running{uid: vmi.GetMetadata().GetUid(), domain: c.domain(n), seen: len(c.rec.statuses(n))}
		r.qemu = procfs.QEMUPid(r.domain)
		ls := launcherPids(r.domain)
		if r.qemu == 0 || len(ls) != 1 {
			c.t.Fatalf("%s: QEMU pid %d, launchers %v; want one of each", n, r.qemu, ls)
		}
		r.launcher = ls[0]
		out[n] = r
	}
	c.t.Logf("%d guests booted in %s", len(names), time.Since(start).Round(time.Millisecond))
	return out
}

// checkUntouched asserts that the VM's guest and launcher are the ones
// recorded, its instance the same and Running, and that it showed no
// printable status but Running since the record.
func (c *cluster) checkUntouched(name string, r *running) {
	c.t.Helper()
	if q := procfs.QEMUPid(r.domain); q != r.qemu {
		c.t.Errorf("%s: QEMU pid %d, was %d: the guest was restarted or stopped", name, q, r.qemu)
	}
	if ls := launcherPids(r.domain); !slices.Equal(ls, []int{r.launcher}) {
		c.t.Errorf("%s: launchers %v, want the same one (%d)", name, ls, r.launcher)
	}
	vmi := c.vmi(name)
	if vmi.GetMetadata().GetUid() != r.uid || vmi.GetStatus().GetPhase() != apiv1.PhaseRunning {
		c.t.Errorf("%s: instance %s %s, want %s Running", name, vmi.GetMetadata().GetUid(), vmi.GetStatus().GetPhase(), r.uid)
	}
	if phases := c.rec.phases(r.uid); len(phases) == 0 || phases[len(phases)-1] != apiv1.PhaseRunning {
		c.t.Errorf("%s: VMI phases %v", name, phases)
	}
	seen := c.rec.statuses(name)
	for _, s := range seen[max(r.seen-1, 0):] {
		if s != apiv1.PrintableRunning {
			c.t.Errorf("%s: VM showed %q meanwhile (statuses %v, the last %d before the test acted)", name, s, seen, r.seen)
			break
		}
	}
}

// TestNodeAgentKilledKeepsGuests: SIGKILL of the node agent while three
// VMs run, then a restart. The guests keep running (same QEMU), the new
// agent reattaches to the launchers instead of starting any, and the VMs
// show Running throughout. One VM is RestartElsewhere, whose launcher's
// lease watchdog must be renewed by the new agent in time: the test waits
// past the lease. Also measures the per-VM memory.
func TestNodeAgentKilledKeepsGuests(t *testing.T) {
	t.Parallel()
	const lease = 12 * time.Second
	c := newCluster(t, clusterOptions{nodeLease: lease, heartbeat: 2 * time.Second})
	names := []string{"alpha", "beta", "gamma"}
	vms := bootAll(c, map[string]string{"beta": apiv1.NodeFailurePolicyRestartElsewhere}, names...)
	measureMemory(t, vms)
	for _, n := range names {
		vms[n].seen = len(c.rec.statuses(n))
	}

	c.killAgent()
	killed := time.Now()
	// The agent is gone; its launchers and guests are not.
	testutil.Consistently(t, 2*time.Second, "every launcher and QEMU alive without the agent", func() bool {
		for _, r := range vms {
			if !procfs.Alive(r.launcher) || !procfs.Alive(r.qemu) {
				return false
			}
		}
		return true
	})

	c.startAgent()
	reattached := regexp.MustCompile(`msg="reattached to launcher" .*vmi=` + c.ns + `/`)
	synced := regexp.MustCompile(`msg="domain synced" `)
	// Each check scans the agent's whole log: every 200 ms.
	testutil.Every(200*time.Millisecond).Eventually(c.t, stateTimeout, "the restarted agent reattached and synced every VMI", func() bool {
		return len(c.agentLogMatches(2, reattached)) >= len(names) && len(c.agentLogMatches(2, synced)) >= len(names)
	})
	t.Logf("restarted agent reattached to %d launchers %s after the kill", len(names), time.Since(killed).Round(time.Millisecond))
	// Through heartbeats, status writes and liveness rounds, and past the
	// lease the RestartElsewhere launcher held when the agent died (its
	// watchdog would fence the guest had the new agent not renewed it),
	// every guest keeps its QEMU and no launcher is started.
	launched := regexp.MustCompile(`msg="launched launcher"`)
	testutil.Every(200*time.Millisecond).ConsistentlyNoError(t, time.Until(killed.Add(lease+3*time.Second)), "the guests untouched past the lease", func() error {
		for n, r := range vms {
			if q := procfs.QEMUPid(r.domain); q != r.qemu {
				return fmt.Errorf("%s: QEMU pid %d, was %d", n, q, r.qemu)
			}
		}
		if l := c.agentLogMatches(2, launched); len(l) > 0 {
			return fmt.Errorf("the restarted agent started launchers:\n%v", l)
		}
		return nil
	})
	for _, line := range c.agentLogMatches(2, synced) {
		ok := false
		for _, r := range vms {
			ok = ok || regexp.MustCompile(` launcher_pid=`+strconv.Itoa(r.launcher)+`( |$)`).MatchString(line)
		}
		if !ok {
			t.Errorf("synced through a launcher that is not one of the old ones: %s", line)
		}
	}
	for _, n := range names {
		c.checkUntouched(n, vms[n])
		t.Logf("%s: VM statuses %v", n, c.rec.statuses(n))
	}
}

// TestLauncherKilledIsReplaced: SIGKILL of a launcher leaves its guest
// running, and a new launcher adopts the domain within adoptionDeadline;
// the instance stays Running.
func TestLauncherKilledIsReplaced(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	r := bootAll(c, nil, "solo")["solo"]

	if err := syscall.Kill(r.launcher, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	var newPid int
	testutil.Eventually(c.t, 30*time.Second, "a new launcher adopting the domain", func() bool {
		ls := launcherPids(r.domain)
		if len(ls) != 1 || ls[0] == r.launcher {
			return false
		}
		adopted := regexp.MustCompile(`msg="domain synced" .*vmi=` + c.ns + `/solo launcher_pid=` + strconv.Itoa(ls[0]) + ` state=Running .*qemu_pid=` + strconv.Itoa(r.qemu) + `( |$)`)
		if len(c.agentLogMatches(1, adopted)) == 0 {
			return false
		}
		newPid = ls[0]
		return true
	})
	took := time.Since(killed)
	report(t, "launcher SIGKILLed: new launcher (pid %d, was %d) adopted the running domain (QEMU pid %d unchanged) in %s",
		newPid, r.launcher, r.qemu, took.Round(time.Millisecond))
	if took > adoptionDeadline {
		t.Errorf("adoption took %s, more than %s", took, adoptionDeadline)
	}
	if !procfs.Alive(r.qemu) {
		t.Fatal("QEMU died with its launcher")
	}
	// A little later, still the same guest, instance and one launcher.
	r.launcher = newPid
	testutil.Consistently(t, 3*time.Second, "the same QEMU and the one new launcher", func() bool {
		return procfs.QEMUPid(r.domain) == r.qemu && slices.Equal(launcherPids(r.domain), []int{newPid})
	})
	c.checkUntouched("solo", r)
	t.Logf("VM statuses %v", c.rec.statuses("solo"))
}

// TestLeaseExpiryFencesOnlyRestartElsewhere: the node agent dies and
// stays down past its lease. The launcher of the RestartElsewhere VM
// destroys its domain on its own (the agent is gone), the Wait VM's guest
// keeps running (docs/failover.md, points 1 and 3). The restarted agent
// ends the fenced instance, whose VM starts a new one, and carries on with
// the Wait VM as if nothing happened.
func TestLeaseExpiryFencesOnlyRestartElsewhere(t *testing.T) {
	t.Parallel()
	const lease = 8 * time.Second
	c := newCluster(t, clusterOptions{nodeLease: lease, heartbeat: 2 * time.Second})
	vms := bootAll(c, map[string]string{"moving": apiv1.NodeFailurePolicyRestartElsewhere, "staying": apiv1.NodeFailurePolicyWait},
		"moving", "staying")
	moving, staying := vms["moving"], vms["staying"]

	c.killAgent()
	killed := time.Now()
	waitGone(t, moving.qemu, lease+15*time.Second)
	t.Logf("RestartElsewhere guest fenced by its launcher %s after the agent died (lease %s)", time.Since(killed).Round(time.Millisecond), lease)
	if !procfs.Alive(staying.qemu) {
		t.Fatal("the Wait guest was killed at lease expiry")
	}
	for n, r := range vms {
		if !procfs.Alive(r.launcher) {
			t.Errorf("%s: launcher died", n)
		}
	}
	// Past the lease by a margin, the Wait guest still runs.
	testutil.Consistently(t, time.Until(killed.Add(lease+4*time.Second)), "the Wait guest running past the lease", func() bool {
		return procfs.Alive(staying.qemu)
	})

	c.startAgent()
	ended := c.waitFinal(moving.uid, stateTimeout)
	t.Logf("fenced instance ended %s (%s: %s)", ended.GetStatus().GetPhase(), ended.GetStatus().GetReason(), ended.GetStatus().GetMessage())
	if ended.GetStatus().GetPhase() != apiv1.PhaseFailed {
		t.Errorf("fenced instance ended %s, want Failed", ended.GetStatus().GetPhase())
	}
	next := c.waitRunning("moving", moving.uid)
	c.console(next.GetMetadata().GetUid()).waitMarker(testguest.MarkerBooted, bootTimeout)
	c.checkUntouched("staying", staying)
	t.Logf("moving: VM statuses %v; staying: %v", c.rec.statuses("moving"), c.rec.statuses("staying"))
}
