package driver

import (
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc/codes"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/launcher/internal/domxml"
)

// The lease tests run in a synctest bubble: the watchdog's timers and the
// fence's retry delay use the bubble's fake clock, time.Sleep moves it to
// an exact instant, and synctest.Wait returns once the watchdog has done
// whatever that instant triggers. Nothing races a real timer.

func (h *harness) mustRenew(d time.Duration) {
	h.t.Helper()
	if err := h.renew(d); err != nil {
		h.t.Fatalf("RenewLease(%v): %v", d, err)
	}
}

// wantDomain fails the test unless the domain is in state now.
func (h *harness) wantDomain(state State, why string) {
	h.t.Helper()
	got := "absent"
	if s := h.conn.get(testDomain); s != nil {
		if s.state == state {
			return
		}
		got = s.state.String()
	}
	h.t.Fatalf("domain %s %s, want %s (calls %v)", got, why, state, h.conn.callLog())
}

func TestLeaseExpiryDestroysDomain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		if _, err := h.syncPolicy(vmi(apiv1.PhaseScheduled), apiv1.NodeFailurePolicyRestartElsewhere); err != nil {
			t.Fatal(err)
		}

		// Renewed before it runs out, then disarmed: the domain keeps
		// running.
		h.mustRenew(100 * time.Millisecond)
		for range 4 {
			time.Sleep(90 * time.Millisecond)
			h.mustRenew(100 * time.Millisecond)
		}
		h.mustRenew(0)
		time.Sleep(time.Minute)
		synctest.Wait()
		h.wantDomain(StateRunning, "with a renewed, then disarmed lease")
		if n := h.conn.callsMatching("Destroy"); n != 0 {
			t.Fatalf("%d Destroy calls with a renewed lease", n)
		}

		// Not renewed: fenced when the lease runs out, not before.
		h.mustRenew(50 * time.Millisecond)
		time.Sleep(49 * time.Millisecond)
		synctest.Wait()
		h.wantDomain(StateRunning, "1 ms before its lease ran out")
		time.Sleep(time.Millisecond)
		synctest.Wait()
		h.wantDomain(StateShutoff, "after the lease expired")
	})
}

func TestLeaseFenceRetriesUntilDestroyed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		if _, err := h.syncPolicy(vmi(apiv1.PhaseScheduled), apiv1.NodeFailurePolicyRestartElsewhere); err != nil {
			t.Fatal(err)
		}
		h.conn.setOffline(true)
		// Armed although the policy cannot be read: refusing a renewal
		// because libvirtd is briefly away would fence a healthy guest.
		h.mustRenew(10 * time.Millisecond)
		armed := h.conn.callsMatching("Lookup")

		// Expired while libvirt is away: the fence keeps trying, once per
		// fenceRetry.
		time.Sleep(10*time.Millisecond + 3*fenceRetry)
		synctest.Wait()
		if n := h.conn.callsMatching("Lookup") - armed; n < 4 {
			t.Fatalf("fence looked the domain up %d times in 3 retry periods, want 4 (calls %v)", n, h.conn.callLog())
		}
		h.wantDomain(StateRunning, "while libvirt was unreachable")

		h.conn.setOffline(false)
		time.Sleep(fenceRetry)
		synctest.Wait()
		h.wantDomain(StateShutoff, "one retry after libvirt came back")
	})
}

// Sync records the node failure policy in the domain, also when adopting
// a domain defined without it.
func TestSyncRecordsNodeFailurePolicy(t *testing.T) {
	h := newHarness(t)
	if _, err := h.syncPolicy(vmi(apiv1.PhaseScheduled), apiv1.NodeFailurePolicyWait); err != nil {
		t.Fatal(err)
	}
	if md := metadataOf(t, h.conn.get(testDomain)); md.NodeFailurePolicy != apiv1.NodeFailurePolicyWait {
		t.Fatalf("metadata after define = %+v", md)
	}

	// As an older launcher defined it: no policy in the metadata.
	old, _ := domxml.Metadata{UID: testUID, GracePeriodSeconds: 30}.MarshalElement()
	h.conn.mu.Lock()
	h.conn.doms[testDomain].metadata = old
	h.conn.mu.Unlock()
	if md := metadataOf(t, h.conn.get(testDomain)); md.NodeFailurePolicy != "" {
		t.Fatalf("test setup: metadata = %+v", md)
	}
	if _, err := h.syncPolicy(vmi(apiv1.PhaseRunning), apiv1.NodeFailurePolicyRestartElsewhere); err != nil {
		t.Fatal(err)
	}
	if md := metadataOf(t, h.conn.get(testDomain)); md.NodeFailurePolicy != apiv1.NodeFailurePolicyRestartElsewhere {
		t.Fatalf("metadata after adoption = %+v", md)
	}
	// An empty policy (an older agent) keeps what the domain records.
	h.mustSync(vmi(apiv1.PhaseRunning))
	if md := metadataOf(t, h.conn.get(testDomain)); md.NodeFailurePolicy != apiv1.NodeFailurePolicyRestartElsewhere {
		t.Fatalf("metadata after a sync without policy = %+v", md)
	}
}

// The launcher refuses to arm the watchdog of a Wait domain, including
// one with no recorded policy (Wait is the default).
func TestLeaseRefusedForWaitDomain(t *testing.T) {
	for _, policy := range []string{apiv1.NodeFailurePolicyWait, ""} {
		synctest.Test(t, func(t *testing.T) {
			h := newHarness(t)
			if _, err := h.syncPolicy(vmi(apiv1.PhaseScheduled), policy); err != nil {
				t.Fatal(err)
			}
			wantCode(t, h.renew(50*time.Millisecond), codes.FailedPrecondition, "node failure policy Wait")
			if err := h.renew(0); err != nil {
				t.Fatalf("disarming: %v", err)
			}
			time.Sleep(time.Minute)
			synctest.Wait()
			h.wantDomain(StateRunning, "policy "+policy+": a Wait domain after a refused lease")
			if n := h.conn.callsMatching("Destroy"); n != 0 {
				t.Fatalf("policy %q: %d Destroy calls on a Wait domain", policy, n)
			}
		})
	}
}

// A new launcher is renewed before its first Sync, when there is no
// domain to read the policy from. The watchdog is armed then, but neither
// Sync of a Wait VMI nor expiry may kill a Wait domain.
func TestWatchdogNeverKillsWaitDomain(t *testing.T) {
	t.Run("disarmed by Sync", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h := newHarness(t)
			h.mustRenew(80 * time.Millisecond)
			if _, err := h.syncPolicy(vmi(apiv1.PhaseScheduled), apiv1.NodeFailurePolicyWait); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Minute)
			synctest.Wait()
			h.wantDomain(StateRunning, "a Wait domain after the early lease expired")
			if n := h.conn.callsMatching("Destroy"); n != 0 {
				t.Fatalf("%d Destroy calls on a Wait domain", n)
			}
		})
	})
	t.Run("checked at expiry", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h := newHarness(t)
			h.mustRenew(50 * time.Millisecond)
			// Defined meanwhile by another launcher, as a Wait domain.
			md, _ := domxml.Metadata{UID: testUID, NodeFailurePolicy: apiv1.NodeFailurePolicyWait}.MarshalElement()
			h.conn.put(&fakeState{name: testDomain, uuid: "u-1", state: StateRunning, reason: 1, metadata: md})
			time.Sleep(50 * time.Millisecond)
			synctest.Wait()
			// The watchdog fired and read the domain's own policy.
			if n := h.conn.callsMatching("GetMetadata"); n == 0 {
				t.Fatalf("the expired watchdog never read the policy (calls %v)", h.conn.callLog())
			}
			h.wantDomain(StateRunning, "a Wait domain after lease expiry")
			if n := h.conn.callsMatching("Destroy"); n != 0 {
				t.Fatalf("%d Destroy calls on a Wait domain", n)
			}
		})
	})
}
