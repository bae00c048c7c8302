package vmi

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller/controllertest"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

func TestPlaceWritesOnceWithEverything(t *testing.T) {
	f := newFixture(t, Options{}, []*apiv1.Node{node("host-1", "4", "8Gi", nil)}, vmi("web", 2, "1Gi"))
	if after, err := f.reconcile("web"); err != nil || after != 0 {
		t.Fatalf("reconcile: %v %v", after, err)
	}
	w := f.vmis.Store.Writes()
	if len(w) != 1 || w[0].Op != "update" {
		t.Fatalf("want one update, got %d writes", len(w))
	}
	got := f.stored("web")
	st := got.Status
	if st.Phase != apiv1.PhaseScheduled || st.NodeName != "host-1" || got.Metadata.Labels[apiv1.LabelNodeName] != "host-1" {
		t.Fatalf("placement: phase %q node %q labels %v", st.Phase, st.NodeName, got.Metadata.Labels)
	}
	if c := apiv1.FindCondition(st.Conditions, apiv1.ConditionPodScheduled); c.GetStatus() != apiv1.ConditionTrue {
		t.Fatalf("PodScheduled: %v", c)
	}
	ts := st.PhaseTransitionTimestamps
	if len(ts) != 1 || ts[0].Phase != apiv1.PhaseScheduled || !ts[0].Time.AsTime().Equal(t0) {
		t.Fatalf("transitions: %v", ts)
	}

	// Until the cache shows it, a second look neither writes nor
	// re-decides.
	if _, err := f.reconcile("web"); err != nil || len(f.vmis.Store.Writes()) != 1 {
		t.Fatalf("second reconcile before cache update: %v, %d writes", err, len(f.vmis.Store.Writes()))
	}
	f.syncCaches()
	if _, err := f.reconcile("web"); err != nil || len(f.vmis.Store.Writes()) != 1 {
		t.Fatalf("reconcile after cache update: %v, %d writes", err, len(f.vmis.Store.Writes()))
	}
	if f.c.assumed.len() != 0 {
		t.Fatal("reservation kept after the cache showed the placement")
	}
}

func TestAssumedReservationsPreventOvercommit(t *testing.T) {
	// Each node holds one 2Gi VMI (2Gi+160Mi of 3Gi), not two.
	nodes := []*apiv1.Node{node("host-1", "4", "3Gi", nil), node("host-2", "4", "3Gi", nil)}
	f := newFixture(t, Options{}, nodes, vmi("a", 1, "2Gi"), vmi("b", 1, "2Gi"), vmi("c", 1, "2Gi"))
	// All three decided before the informer shows any placement.
	for _, name := range []string{"a", "b", "c"} {
		if _, err := f.reconcile(name); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	a, b, c := f.stored("a"), f.stored("b"), f.stored("c")
	if a.Status.NodeName == "" || b.Status.NodeName == "" || a.Status.NodeName == b.Status.NodeName {
		t.Fatalf("a on %q, b on %q: want one per node", a.Status.NodeName, b.Status.NodeName)
	}
	if c.Status.NodeName != "" || c.Status.Phase != apiv1.PhasePending {
		t.Fatalf("c overcommitted onto %q (phase %q)", c.Status.NodeName, c.Status.Phase)
	}
	want := "0/2 nodes are available: 2 Insufficient memory."
	if cond := apiv1.FindCondition(c.Status.Conditions, apiv1.ConditionPodScheduled); cond.GetMessage() != want {
		t.Fatalf("c condition: %v", cond)
	}
	// Once the cache shows the placements the verdict is the same,
	// counted from the cache instead of the reservations.
	f.syncCaches()
	if f.c.assumed.len() != 0 {
		t.Fatalf("%d reservations left", f.c.assumed.len())
	}
	before := len(f.vmis.Store.Writes())
	if _, err := f.reconcile("c"); err != nil || len(f.vmis.Store.Writes()) != before {
		t.Fatalf("c after cache update: %v, %d new writes", err, len(f.vmis.Store.Writes())-before)
	}
}

func TestConcurrentWorkersDoNotOvercommit(t *testing.T) {
	// 200 VMIs raced by 16 workers onto room for 50 (1Gi each with the
	// overhead).
	const total, room, workers = 200, 50, 16
	var vmis []*apiv1.VirtualMachineInstance
	for i := range total {
		vmis = append(vmis, vmi(fmt.Sprintf("v%03d", i), 1, "864Mi"))
	}
	f := newFixture(t, Options{}, []*apiv1.Node{node("host-1", "100", fmt.Sprintf("%dGi", room), nil)}, vmis...)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < total; i += workers {
				_, _ = f.c.Reconcile(context.Background(), "default/"+vmis[i].Metadata.Name)
			}
		})
	}
	wg.Wait()
	placed := 0
	for _, v := range vmis {
		if f.stored(v.Metadata.Name).Status.NodeName != "" {
			placed++
		}
	}
	if placed != room {
		t.Fatalf("placed %d VMIs on room for %d", placed, room)
	}
}

func TestUnschedulableConditionWrittenOnChangeOnly(t *testing.T) {
	nodes := []*apiv1.Node{node("host-1", "4", "1Gi", nil)}
	f := newFixture(t, Options{}, nodes, vmi("web", 1, "2Gi"))
	after, err := f.reconcile("web")
	if err != nil || after != 30*time.Second {
		t.Fatalf("reconcile: %v requeue %v", err, after)
	}
	got := f.stored("web")
	cond := apiv1.FindCondition(got.Status.Conditions, apiv1.ConditionPodScheduled)
	if got.Status.Phase != apiv1.PhasePending || got.Status.NodeName != "" ||
		cond.GetStatus() != apiv1.ConditionFalse || cond.GetReason() != ReasonUnschedulable ||
		cond.GetMessage() != "0/1 nodes are available: 1 Insufficient memory." {
		t.Fatalf("unschedulable status: %v", got.Status)
	}
	if ts := got.Status.PhaseTransitionTimestamps; len(ts) != 1 || ts[0].Phase != apiv1.PhasePending {
		t.Fatalf("transitions %v", ts)
	}
	// Retries with the same verdict write nothing.
	f.syncCaches()
	f.now = f.now.Add(30 * time.Second)
	if after, err := f.reconcile("web"); err != nil || after != 30*time.Second || len(f.vmis.Store.Writes()) != 1 {
		t.Fatalf("retry: %v %v, %d writes", after, err, len(f.vmis.Store.Writes()))
	}
	// A different verdict is recorded.
	if _, err := f.nodes.Store.Update(context.Background(), withNode(f.nodeInfGet("host-1"), func(n *apiv1.Node) {
		n.Spec.Unschedulable = true
	})); err != nil {
		t.Fatal(err)
	}
	f.syncCaches()
	if _, err := f.reconcile("web"); err != nil || len(f.vmis.Store.Writes()) != 2 {
		t.Fatalf("changed verdict: %v, %d writes", err, len(f.vmis.Store.Writes()))
	}
	cond = apiv1.FindCondition(f.stored("web").Status.Conditions, apiv1.ConditionPodScheduled)
	if cond.GetMessage() != "0/1 nodes are available: 1 node(s) were unschedulable." {
		t.Fatalf("message %q", cond.GetMessage())
	}
}

func (f *fixture) nodeInfGet(name string) *apiv1.Node {
	n, ok := f.nodes.Informer.Get("", name)
	if !ok {
		f.t.Fatalf("node %s not cached", name)
	}
	return n
}

func TestNodeEventsRetryUnplaced(t *testing.T) {
	placed := on(vmi("placed", 1, "1Gi"), "host-1", apiv1.PhaseRunning)
	f := newFixture(t, Options{}, []*apiv1.Node{node("host-1", "4", "8Gi", nil)},
		vmi("waiting", 1, "1Gi"), placed, on(vmi("done", 1, "1Gi"), "", apiv1.PhaseFailed))
	f.drain()

	// A heartbeat changes nothing placement looks at: no retries.
	hb := withNode(f.nodeInfGet("host-1"), func(n *apiv1.Node) {
		n.Status.Heartbeat = timestamppb.New(t0)
		n.Status.Conditions[0].LastProbeTime = timestamppb.New(t0)
	})
	if _, err := f.nodes.Store.Update(context.Background(), hb); err != nil {
		t.Fatal(err)
	}
	f.syncCaches()
	if keys := f.drain(); len(keys) != 0 {
		t.Fatalf("heartbeat enqueued %v", keys)
	}
	// New room: the unplaced VMI (only) is retried.
	grow := withNode(f.nodeInfGet("host-1"), func(n *apiv1.Node) { n.Status.Allocatable["memory"] = "16Gi" })
	if _, err := f.nodes.Store.Update(context.Background(), grow); err != nil {
		t.Fatal(err)
	}
	f.syncCaches()
	if keys := f.drain(); len(keys) != 1 || !keys["default/waiting"] {
		t.Fatalf("node update enqueued %v", keys)
	}
	// A new node too.
	f.nodes.Store.Seed(node("host-2", "4", "8Gi", nil))
	f.syncCaches()
	if keys := f.drain(); len(keys) != 1 || !keys["default/waiting"] {
		t.Fatalf("node add enqueued %v", keys)
	}
	// Capacity freed by a VMI ending, too.
	f.vmis.Update(t, "default", "placed", func(v *apiv1.VirtualMachineInstance) { v.Status.Phase = apiv1.PhaseSucceeded })
	f.syncCaches()
	if keys := f.drain(); !keys["default/waiting"] || keys["default/placed"] {
		t.Fatalf("VMI end enqueued %v", keys)
	}
}

func TestFinalVMIsDoNotHoldCapacity(t *testing.T) {
	f := newFixture(t, Options{}, []*apiv1.Node{node("host-1", "4", "2Gi", nil)},
		on(vmi("old", 1, "1Gi"), "host-1", apiv1.PhaseFailed),
		on(vmi("older", 1, "1Gi"), "host-1", apiv1.PhaseSucceeded),
		vmi("new", 1, "1Gi"))
	if _, err := f.reconcile("new"); err != nil || f.stored("new").Status.NodeName != "host-1" {
		t.Fatalf("not placed next to final VMIs: %v %v", err, f.stored("new").Status)
	}
	// A running one does.
	f = newFixture(t, Options{}, []*apiv1.Node{node("host-1", "4", "2Gi", nil)},
		on(vmi("running", 1, "1Gi"), "host-1", apiv1.PhaseRunning), vmi("new", 1, "1Gi"))
	if _, err := f.reconcile("new"); err != nil || f.stored("new").Status.NodeName != "" {
		t.Fatalf("placed onto a full node: %v %v", err, f.stored("new").Status)
	}
}

func TestFailures(t *testing.T) {
	deleting := vmi("deleting", 1, "1Gi")
	deleting.Metadata.DeletionTimestamp = timestamppb.New(t0)
	deleting.Metadata.Finalizers = []string{apiv1.FinalizerVMController}
	for _, tc := range []struct {
		name       string
		vmi        *apiv1.VirtualMachineInstance
		wantPhase  string
		wantReason string
		wantMsg    string
	}{
		{"node deleted under a running VMI", on(vmi("r", 1, "1Gi"), "gone", apiv1.PhaseRunning), apiv1.PhaseFailed, ReasonNodeDeleted, "node gone no longer exists"},
		{"node deleted under a scheduled VMI", on(vmi("s", 1, "1Gi"), "gone", apiv1.PhaseScheduled), apiv1.PhaseFailed, ReasonNodeDeleted, "node gone no longer exists"},
		{"node present", on(vmi("ok", 1, "1Gi"), "host-1", apiv1.PhaseRunning), apiv1.PhaseRunning, "", ""},
		{"deleted before placement", deleting, apiv1.PhaseFailed, "", "deleted before it was placed on a node"},
		{"final stays", on(vmi("f", 1, "1Gi"), "gone", apiv1.PhaseSucceeded), apiv1.PhaseSucceeded, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, Options{}, []*apiv1.Node{node("host-1", "4", "8Gi", nil)}, tc.vmi)
			if _, err := f.reconcile(tc.vmi.Metadata.Name); err != nil {
				t.Fatal(err)
			}
			got := f.stored(tc.vmi.Metadata.Name).Status
			if got.Phase != tc.wantPhase || got.Reason != tc.wantReason || got.Message != tc.wantMsg {
				t.Fatalf("status: phase %q reason %q message %q", got.Phase, got.Reason, got.Message)
			}
			wantWrites := 0
			if tc.wantPhase != tc.vmi.Status.Phase {
				wantWrites = 1
			}
			if n := len(f.vmis.Store.Writes()); n != wantWrites {
				t.Fatalf("%d writes, want %d", n, wantWrites)
			}
		})
	}
}

func TestNodeDeletionEnqueuesItsVMIs(t *testing.T) {
	f := newFixture(t, Options{}, []*apiv1.Node{node("host-1", "4", "8Gi", nil), node("host-2", "4", "8Gi", nil)},
		on(vmi("a", 1, "1Gi"), "host-1", apiv1.PhaseRunning), on(vmi("b", 1, "1Gi"), "host-2", apiv1.PhaseRunning))
	f.drain()
	f.nodes.Informer.Fill(f.nodeInfGet("host-2")) // host-1 deleted
	if keys := f.drain(); !keys["default/a"] || keys["default/b"] {
		t.Fatalf("enqueued %v", keys)
	}
	if _, err := f.reconcile("a"); err != nil || f.stored("a").Status.Reason != ReasonNodeDeleted {
		t.Fatalf("a: %v %v", err, f.stored("a").Status)
	}
}

func TestConflictRequeuesAndReleasesReservation(t *testing.T) {
	f := newFixture(t, Options{}, []*apiv1.Node{node("host-1", "4", "8Gi", nil)}, vmi("web", 1, "1Gi"))
	// Someone else wrote the VMI; the cache has not seen it.
	f.vmis.Update(t, "default", "web", func(v *apiv1.VirtualMachineInstance) { v.Metadata.Annotations = map[string]string{"x": "y"} })
	_, err := f.reconcile("web")
	if !errors.Is(err, store.ErrConflict) {
		t.Fatalf("want a conflict (the runner requeues it), got %v", err)
	}
	if f.c.assumed.len() != 0 {
		t.Fatal("failed placement kept its reservation")
	}
	f.syncCaches()
	if _, err := f.reconcile("web"); err != nil || f.stored("web").Status.NodeName != "host-1" {
		t.Fatalf("retry: %v", err)
	}
}

func TestNewRefusesRunningInformers(t *testing.T) {
	f := newFixture(t, Options{}, nil)
	defer func() {
		if recover() == nil {
			t.Fatal("New accepted informers that already hold objects")
		}
	}()
	New(Options{}, f.vmis.Informer, f.nodes.Informer, f.vmis.Store, controllertest.Discard())
}

// Placement reuses its node and candidate buffers between decisions: a
// node deleted since the last decision is not among the next one's.
func TestPlacementForgetsDeletedNodes(t *testing.T) {
	f := newFixture(t, Options{}, []*apiv1.Node{node("big", "4", "16Gi", nil), node("small", "4", "8Gi", nil)},
		vmi("a", 1, "1Gi"), vmi("b", 1, "1Gi"))
	if _, err := f.reconcile("a"); err != nil || f.stored("a").Status.NodeName != "big" {
		t.Fatalf("a: %v, placed on %q, want big (most free)", err, f.stored("a").Status.NodeName)
	}
	f.nodes.Informer.Fill(f.nodeInfGet("small")) // big deleted
	if _, err := f.reconcile("b"); err != nil || f.stored("b").Status.NodeName != "small" {
		t.Fatalf("b: %v, placed on %q, want small (the only node left)", err, f.stored("b").Status.NodeName)
	}
}
