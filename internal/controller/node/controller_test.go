package node

import (
	"slices"
	"strings"
	"testing"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

func TestNotReadyAfterLeaseOnOwnClock(t *testing.T) {
	// The stored heartbeat comes from the API server's clock. However
	// wrong that is, the node is declared NotReady one lease after this
	// controller saw the value change, never earlier.
	for _, tc := range []struct {
		name string
		skew time.Duration
	}{
		{"clocks agree", 0},
		{"API clock two hours behind", -2 * time.Hour},
		{"API clock a day ahead", 24 * time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, []*apiv1.Node{readyNode("host-1", t0.Add(tc.skew))}, nil)
			if after := f.at(0, "host-1"); after != lease {
				t.Fatalf("first sight: requeue after %v, want %v", after, lease)
			}
			if after := f.at(lease-time.Second, "host-1"); after != time.Second {
				t.Fatalf("before expiry: requeue after %v", after)
			}
			if w := f.nodes.Store.Writes(); len(w) != 0 {
				t.Fatalf("node written before its lease expired on the controller's clock: %v", w[0].Object.Status)
			}
			f.at(lease, "host-1")
			n := f.node("host-1")
			ready := apiv1.FindCondition(n.Status.Conditions, apiv1.ConditionReady)
			if ready.GetStatus() != apiv1.ConditionFalse || ready.GetReason() != ReasonNodeUnresponsive || n.Status.Schedulable {
				t.Fatalf("after lease: ready %v schedulable %v", ready, n.Status.Schedulable)
			}
			if !ready.LastTransitionTime.AsTime().Equal(t0.Add(lease)) {
				t.Fatalf("transition time %v", ready.LastTransitionTime.AsTime())
			}
			// Written once.
			f.syncCaches()
			f.at(lease+5*time.Second, "host-1")
			f.at(time.Hour, "host-1")
			if w := f.nodes.Store.Writes(); len(w) != 1 {
				t.Fatalf("%d node writes, want 1", len(w))
			}
		})
	}
}

func TestWaitVMIsUntouchedForHours(t *testing.T) {
	stale := vm("stale-owner", apiv1.NodeFailurePolicyRestartElsewhere)
	stale.Metadata.Uid = "a-newer-vm" // same name, not the VMI's owner
	f := newFixture(t,
		[]*apiv1.Node{readyNode("host-1", t0)},
		[]*apiv1.VirtualMachine{vm("wait", apiv1.NodeFailurePolicyWait), vm("unset", ""), stale},
		instance("wait", "host-1", apiv1.PhaseRunning),
		instance("unset", "host-1", apiv1.PhaseRunning),
		instance("orphan", "host-1", apiv1.PhaseRunning), // no VM at all
		instance("stale-owner", "host-1", apiv1.PhaseScheduled),
	)
	for _, d := range []time.Duration{0, lease, lease + margin, time.Hour, 5 * time.Hour, 72 * time.Hour} {
		if after := f.at(d, "host-1"); d >= lease && after != 0 {
			t.Fatalf("+%v: requeue after %v with nothing to do", d, after)
		}
		f.syncCaches()
	}
	if w := f.vmis.Store.Writes(); len(w) != 0 {
		t.Fatalf("Wait VMIs written: %s %v", w[0].Key, w[0].Object.Status)
	}
	if n := f.node("host-1"); apiv1.FindCondition(n.Status.Conditions, apiv1.ConditionReady).GetStatus() != apiv1.ConditionFalse {
		t.Fatal("node not marked NotReady")
	}
}

func TestRestartElsewhereFailedExactlyAfterLeaseAndMargin(t *testing.T) {
	re := apiv1.NodeFailurePolicyRestartElsewhere
	f := newFixture(t,
		[]*apiv1.Node{readyNode("host-1", t0), readyNode("host-2", t0)},
		[]*apiv1.VirtualMachine{vm("running", re), vm("scheduled", re), vm("pending", re), vm("done", re), vm("wait", "Wait"), vm("elsewhere", re)},
		instance("running", "host-1", apiv1.PhaseRunning),
		instance("scheduled", "host-1", apiv1.PhaseScheduled),
		instance("pending", "host-1", apiv1.PhasePending),
		instance("done", "host-1", apiv1.PhaseSucceeded),
		instance("wait", "host-1", apiv1.PhaseRunning),
		instance("elsewhere", "host-2", apiv1.PhaseRunning),
	)
	if after := f.at(0, "host-1"); after != lease {
		t.Fatalf("first sight: %v", after)
	}
	if after := f.at(lease, "host-1"); after != margin {
		t.Fatalf("at lease expiry: requeue after %v, want the margin %v", after, margin)
	}
	f.syncCaches()
	if after := f.at(lease+margin-time.Second, "host-1"); after != time.Second {
		t.Fatalf("a second before the deadline: requeue after %v", after)
	}
	if got := f.failed(); len(got) != 0 {
		t.Fatalf("failed before Lease+FenceMargin: %v", got)
	}
	if after := f.at(lease+margin, "host-1"); after != 0 {
		t.Fatalf("at the deadline: requeue after %v", after)
	}
	want := []string{"default/pending", "default/running", "default/scheduled"}
	if got := f.failed(); !slices.Equal(got, want) {
		t.Fatalf("failed %v, want %v", got, want)
	}
	if n := len(f.vmis.Store.Writes()); n != len(want) {
		t.Fatalf("%d VMI writes for %d VMIs", n, len(want))
	}
	for _, name := range []string{"running", "scheduled", "pending"} {
		st := f.vmi(name).Status
		if st.Phase != apiv1.PhaseFailed || st.Reason != ReasonNodeUnresponsive || !strings.Contains(st.Message, "RestartElsewhere") {
			t.Fatalf("%s: %v", name, st)
		}
		if ts := st.PhaseTransitionTimestamps; len(ts) != 1 || !ts[0].Time.AsTime().Equal(t0.Add(lease+margin)) {
			t.Fatalf("%s transitions: %v", name, ts)
		}
	}
	for name, phase := range map[string]string{"wait": apiv1.PhaseRunning, "done": apiv1.PhaseSucceeded, "elsewhere": apiv1.PhaseRunning} {
		if got := f.vmi(name).Status.Phase; got != phase {
			t.Fatalf("%s: phase %s, want %s", name, got, phase)
		}
	}
	// Done: later passes write nothing more, even from a stale cache.
	f.at(lease+margin+time.Second, "host-1")
	f.syncCaches()
	f.at(time.Hour, "host-1")
	if n := len(f.vmis.Store.Writes()); n != len(want) {
		t.Fatalf("%d VMI writes after more passes", n)
	}
}

func TestHeartbeatResumeStopsFailing(t *testing.T) {
	re := apiv1.NodeFailurePolicyRestartElsewhere
	f := newFixture(t, []*apiv1.Node{readyNode("host-1", t0)}, []*apiv1.VirtualMachine{vm("web", re)},
		instance("web", "host-1", apiv1.PhaseRunning))
	f.at(0, "host-1")
	f.at(lease+2*time.Second, "host-1") // NotReady
	f.syncCaches()
	// The agent gets through again at +45s: the API marks it Ready.
	f.now = t0.Add(45 * time.Second)
	f.heartbeat("host-1", f.now)
	f.syncCaches()
	if after := f.at(45*time.Second, "host-1"); after != lease {
		t.Fatalf("after resume: requeue after %v", after)
	}
	for _, d := range []time.Duration{lease + margin, 60 * time.Second, 45*time.Second + lease - time.Millisecond} {
		f.at(d, "host-1")
	}
	if got := f.failed(); len(got) != 0 {
		t.Fatalf("failed after the node came back: %v", got)
	}
	n := f.node("host-1")
	if apiv1.FindCondition(n.Status.Conditions, apiv1.ConditionReady).GetStatus() != apiv1.ConditionTrue || !n.Status.Schedulable {
		t.Fatalf("controller fought the heartbeat: %v", n.Status)
	}
	if w := f.nodes.Store.Writes(); len(w) != 2 { // our NotReady, the API's heartbeat
		t.Fatalf("%d node writes", len(w))
	}
}

func TestStaleCacheNeverFailsALiveNode(t *testing.T) {
	re := apiv1.NodeFailurePolicyRestartElsewhere
	t.Run("heartbeat in the store when marking NotReady", func(t *testing.T) {
		f := newFixture(t, []*apiv1.Node{readyNode("host-1", t0)}, []*apiv1.VirtualMachine{vm("web", re)},
			instance("web", "host-1", apiv1.PhaseRunning))
		f.at(0, "host-1")
		f.heartbeat("host-1", t0.Add(30*time.Second)) // the watch lost this one
		f.at(lease, "host-1")
		f.at(lease+margin, "host-1") // the stale cached node must not reset what the store showed
		f.at(lease+margin+20*time.Second, "host-1")
		if w := f.nodes.Store.Writes(); len(w) != 1 {
			t.Fatalf("controller wrote the node %d times", len(w)-1)
		}
		if got := f.failed(); len(got) != 0 {
			t.Fatalf("failed %v", got)
		}
	})
	t.Run("heartbeat in the store at the deadline", func(t *testing.T) {
		f := newFixture(t, []*apiv1.Node{readyNode("host-1", t0)}, []*apiv1.VirtualMachine{vm("web", re)},
			instance("web", "host-1", apiv1.PhaseRunning))
		f.at(0, "host-1")
		f.at(lease, "host-1") // NotReady
		f.syncCaches()
		f.heartbeat("host-1", t0.Add(lease+5*time.Second)) // the watch lost this one
		if after := f.at(lease+margin, "host-1"); after != lease {
			t.Fatalf("requeue after %v", after)
		}
		if got := f.failed(); len(got) != 0 {
			t.Fatalf("failed %v although the store shows a fresh heartbeat", got)
		}
	})
}

func TestNewLeaderWaitsAFullLeaseAndMargin(t *testing.T) {
	re := apiv1.NodeFailurePolicyRestartElsewhere
	// The old leader marked the node NotReady hours ago and died before
	// failing the VMI.
	down := readyNode("host-1", t0.Add(-3*time.Hour))
	down.Status.Schedulable = false
	down.Status.Conditions[0].Status = apiv1.ConditionFalse
	down.Status.Conditions[0].Reason = ReasonNodeUnresponsive
	f := newFixture(t, []*apiv1.Node{down}, []*apiv1.VirtualMachine{vm("web", re)}, instance("web", "host-1", apiv1.PhaseRunning))
	f.at(0, "host-1")
	f.at(lease, "host-1")
	if after := f.at(lease+margin-time.Second, "host-1"); after != time.Second {
		t.Fatalf("requeue after %v", after)
	}
	if got := f.failed(); len(got) != 0 {
		t.Fatalf("new leader failed %v before its own Lease+FenceMargin", got)
	}
	f.at(lease+margin, "host-1")
	if got := f.failed(); !slices.Equal(got, []string{"default/web"}) {
		t.Fatalf("failed %v", got)
	}
	if w := f.nodes.Store.Writes(); len(w) != 0 {
		t.Fatal("node already marked; rewritten")
	}
}

func TestEventsEnqueueTheNode(t *testing.T) {
	f := newFixture(t, []*apiv1.Node{readyNode("host-1", t0)}, []*apiv1.VirtualMachine{vm("web", "Wait")},
		instance("web", "host-1", apiv1.PhaseRunning))
	drain := func() []string {
		var keys []string
		for f.c.queue.Len() > 0 {
			k, _ := f.c.queue.Get()
			keys = append(keys, k)
			f.c.queue.Done(k)
			f.c.queue.Forget(k)
		}
		return keys
	}
	if keys := drain(); !slices.Equal(keys, []string{"host-1"}) {
		t.Fatalf("initial listing enqueued %v", keys)
	}
	// The VM switches to RestartElsewhere while its node is down.
	f.vms.Update(t, "default", "web", func(v *apiv1.VirtualMachine) {
		v.Spec.NodeFailurePolicy = apiv1.NodeFailurePolicyRestartElsewhere
	})
	f.syncCaches()
	if keys := drain(); !slices.Equal(keys, []string{"host-1"}) {
		t.Fatalf("policy change enqueued %v", keys)
	}
}

func TestDeletedNodeIsForgotten(t *testing.T) {
	f := newFixture(t, []*apiv1.Node{readyNode("host-1", t0)}, nil)
	f.at(0, "host-1")
	f.nodes.Informer.Fill()
	if after := f.at(time.Hour, "host-1"); after != 0 {
		t.Fatalf("requeue after %v", after)
	}
	if len(f.c.seen) != 0 {
		t.Fatalf("observations kept: %v", f.c.seen)
	}
}
