package evacuation

import (
	"context"
	"maps"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller/controllertest"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
	"github.com/virtplane/terraform-provider-virtplane/internal/store/memstore"
)

var t0 = time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)

func node(name string, drain bool) *apiv1.Node {
	return &apiv1.Node{
		Metadata: &apiv1.ObjectMeta{Name: name, Uid: "uid-" + name},
		Spec:     &apiv1.NodeSpec{Unschedulable: drain, Drain: drain},
		Status:   &apiv1.NodeStatus{},
	}
}

// running is a Running instance on nodeName with an eviction strategy;
// migratable false gives it LiveMigratable=False.
func running(name, nodeName, strategy string, migratable bool) *apiv1.VirtualMachineInstance {
	cond := &apiv1.Condition{Type: apiv1.ConditionLiveMigratable, Status: apiv1.ConditionTrue}
	if !migratable {
		cond = &apiv1.Condition{Type: apiv1.ConditionLiveMigratable, Status: apiv1.ConditionFalse,
			Reason: apiv1.ReasonPausedNotLiveMigratable, Message: "the instance is paused; unpause it to migrate"}
	}
	return &apiv1.VirtualMachineInstance{
		Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: name, Uid: "vmi-uid-" + name,
			Finalizers: []string{apiv1.FinalizerVMController}},
		Spec:   &apiv1.VirtualMachineInstanceSpec{EvictionStrategy: strategy},
		Status: &apiv1.VirtualMachineInstanceStatus{Phase: apiv1.PhaseRunning, NodeName: nodeName, Conditions: []*apiv1.Condition{cond}},
	}
}

type fixture struct {
	t     *testing.T
	now   time.Time
	nodes controllertest.Cache[*apiv1.Node]
	vmis  controllertest.Cache[*apiv1.VirtualMachineInstance]
	migs  controllertest.Cache[*apiv1.VirtualMachineInstanceMigration]
	c     *Controller
}

func newFixture(t *testing.T, nodes []*apiv1.Node, vmis ...*apiv1.VirtualMachineInstance) *fixture {
	t.Helper()
	f := &fixture{t: t, now: t0}
	clock := func() time.Time { return f.now }
	db := memstore.NewDB(clock)
	f.nodes = controllertest.NewCache(db, store.Nodes, nodes...)
	f.vmis = controllertest.NewCache(db, store.VirtualMachineInstances, vmis...)
	f.migs = controllertest.NewCache(db, store.Migrations)
	f.c = New(Options{DefaultEvictionStrategy: apiv1.EvictionStrategyLiveMigrateIfPossible, Clock: clock},
		f.nodes.Informer, f.vmis.Informer, f.migs.Informer, f.nodes.Store, f.vmis.Store, f.migs.Store, controllertest.Discard())
	f.sync()
	return f
}

func (f *fixture) sync() {
	f.t.Helper()
	f.nodes.Sync(f.t)
	f.vmis.Sync(f.t)
	f.migs.Sync(f.t)
}

// reconcile runs one pass for node after syncing the caches.
func (f *fixture) reconcile(name string) time.Duration {
	f.t.Helper()
	f.sync()
	res, err := f.c.Reconcile(context.Background(), name)
	if err != nil {
		f.t.Fatalf("reconcile %s: %v", name, err)
	}
	return res.RequeueAfter
}

func (f *fixture) vmi(name string) *apiv1.VirtualMachineInstance {
	f.t.Helper()
	return f.vmis.Get(f.t, "default", name)
}

// migrationsOf lists the stored migrations of an instance.
func (f *fixture) migrationsOf(vmi string) []*apiv1.VirtualMachineInstanceMigration {
	f.t.Helper()
	all, _, err := f.migs.Store.List(context.Background(), store.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	var out []*apiv1.VirtualMachineInstanceMigration
	for _, m := range all {
		if m.GetSpec().GetVmiName() == vmi {
			out = append(out, m)
		}
	}
	return out
}

// remaining is the node's recorded evacuees, by name.
func (f *fixture) remaining(nodeName string) map[string]*apiv1.Evacuee {
	f.t.Helper()
	out := map[string]*apiv1.Evacuee{}
	for _, e := range f.nodes.Get(f.t, "", nodeName).GetStatus().GetEvacuation().GetRemaining() {
		out[e.GetName()] = e
	}
	return out
}

// A drain treats each instance by its strategy: migrate, shut down,
// leave to an outside actor, or hold the drain up.
func TestDrainActsPerStrategy(t *testing.T) {
	f := newFixture(t, []*apiv1.Node{node("n1", true), node("n2", false)},
		running("live", "n1", apiv1.EvictionStrategyLiveMigrate, true),
		running("blocked", "n1", apiv1.EvictionStrategyLiveMigrate, false),
		running("maybe", "n1", apiv1.EvictionStrategyLiveMigrateIfPossible, false),
		running("none", "n1", apiv1.EvictionStrategyNone, true),
		running("ext", "n1", apiv1.EvictionStrategyExternal, true),
		running("default", "n1", "", true), // cluster default: LiveMigrateIfPossible, migratable
		running("elsewhere", "n2", apiv1.EvictionStrategyNone, true),
	)
	f.reconcile("n1")

	for _, name := range []string{"live", "default"} {
		migs := f.migrationsOf(name)
		if len(migs) != 1 || migs[0].GetMetadata().GetLabels()[apiv1.LabelEvacuationNode] != "n1" ||
			migs[0].GetMetadata().GetLabels()[apiv1.LabelMigrationVMIName] != name {
			t.Fatalf("%s: migrations %v, want one evacuation migration from n1", name, migs)
		}
		if got := f.vmi(name).GetStatus().GetEvacuationNodeName(); got != "n1" {
			t.Errorf("%s: evacuation_node_name %q, want n1", name, got)
		}
	}
	for _, name := range []string{"maybe", "none"} {
		v := f.vmi(name)
		if v.GetMetadata().GetDeletionTimestamp() == nil || v.GetMetadata().GetAnnotations()[apiv1.AnnotationEvicted] != "n1" {
			t.Errorf("%s: not shut down as evicted: %v", name, v.GetMetadata())
		}
		if len(f.migrationsOf(name)) != 0 {
			t.Errorf("%s: got a migration", name)
		}
	}
	if v := f.vmi("blocked"); v.GetStatus().GetEvacuationNodeName() != "" || v.GetMetadata().GetDeletionTimestamp() != nil || len(f.migrationsOf("blocked")) != 0 {
		t.Errorf("blocked: touched: %v", v)
	}
	if v := f.vmi("ext"); v.GetStatus().GetEvacuationNodeName() != "n1" || len(f.migrationsOf("ext")) != 0 {
		t.Errorf("ext: want marked and not migrated: %v", v.GetStatus())
	}
	if v := f.vmi("elsewhere"); v.GetMetadata().GetDeletionTimestamp() != nil {
		t.Error("an instance on another node was shut down")
	}

	f.reconcile("n1") // sees its own writes
	rem := f.remaining("n1")
	want := map[string]string{"live": StateWaiting, "default": StateWaiting, "maybe": StateStopping,
		"none": StateStopping, "blocked": StateBlocked, "ext": StateExternal}
	if len(rem) != len(want) {
		t.Fatalf("remaining %v, want %v", rem, want)
	}
	for name, state := range want {
		if rem[name].GetState() != state {
			t.Errorf("%s: state %q (%s), want %q", name, rem[name].GetState(), rem[name].GetMessage(), state)
		}
	}
	if msg := rem["blocked"].GetMessage(); !strings.Contains(msg, "not live-migratable") || !strings.Contains(msg, "paused") {
		t.Errorf("blocked message %q does not say why", msg)
	}
	if rem["default"].GetEvictionStrategy() != apiv1.EvictionStrategyLiveMigrateIfPossible {
		t.Errorf("default: strategy %q, want the cluster's", rem["default"].GetEvictionStrategy())
	}
	if f.nodes.Get(t, "", "n1").GetStatus().GetEvacuation().GetDrained() {
		t.Error("drained with instances left")
	}
	// No second migration for an instance that has one.
	if n := len(f.migrationsOf("live")); n != 1 {
		t.Errorf("live has %d migrations after a second pass", n)
	}
}

// A node is drained once what had to leave has: migrated instances lose
// their mark, ended ones count as gone.
func TestDrainEnds(t *testing.T) {
	f := newFixture(t, []*apiv1.Node{node("n1", true), node("n2", false)},
		running("live", "n1", apiv1.EvictionStrategyLiveMigrate, true))
	f.reconcile("n1")
	m := f.migrationsOf("live")[0]
	f.migs.Update(t, "default", m.GetMetadata().GetName(), func(m *apiv1.VirtualMachineInstanceMigration) {
		m.Status.SetPhase(apiv1.MigrationSucceeded, f.now)
	})
	f.vmis.Update(t, "default", "live", func(v *apiv1.VirtualMachineInstance) { v.Status.NodeName = "n2" })
	f.reconcile("n1")
	if got := f.vmi("live").GetStatus().GetEvacuationNodeName(); got != "" {
		t.Errorf("mark kept after the instance left: %q", got)
	}
	ev := f.nodes.Get(t, "", "n1").GetStatus().GetEvacuation()
	if !ev.GetDrained() || len(ev.GetRemaining()) != 0 {
		t.Errorf("evacuation %v, want drained", ev)
	}
}

// A failed evacuation migration is retried after a doubling delay.
func TestDrainRetriesFailedMigrationWithBackoff(t *testing.T) {
	f := newFixture(t, []*apiv1.Node{node("n1", true)}, running("live", "n1", apiv1.EvictionStrategyLiveMigrate, true))
	fail := func() {
		t.Helper()
		var m *apiv1.VirtualMachineInstanceMigration
		for _, o := range f.migrationsOf("live") {
			if !apiv1.IsMigrationFinal(o.GetStatus().GetPhase()) {
				m = o
			}
		}
		f.migs.Update(t, "default", m.GetMetadata().GetName(), func(m *apiv1.VirtualMachineInstanceMigration) {
			m.Status.VmiUid = "vmi-uid-live"
			m.Status.Reason, m.Status.Message = "MigrationFailed", "the target went away"
			m.Status.SetPhase(apiv1.MigrationFailed, f.now)
		})
	}
	f.reconcile("n1")
	fail()
	if after := f.reconcile("n1"); after != 20*time.Second {
		t.Errorf("requeue after %v, want 20s", after)
	}
	if n := len(f.migrationsOf("live")); n != 1 {
		t.Fatalf("%d migrations within the delay, want 1", n)
	}
	f.reconcile("n1")
	if e := f.remaining("n1")["live"]; e.GetState() != StateWaiting || !strings.Contains(e.GetMessage(), "the target went away") {
		t.Errorf("evacuee %v, want Waiting with the failure", e)
	}
	f.now = f.now.Add(20 * time.Second)
	f.reconcile("n1")
	if n := len(f.migrationsOf("live")); n != 2 {
		t.Fatalf("%d migrations after the delay, want 2", n)
	}
	f.now = f.now.Add(time.Second)
	fail()
	if after := f.reconcile("n1"); after != 40*time.Second {
		t.Errorf("second delay %v, want 40s", after)
	}
}

// Uncordoning a draining node cancels: marks go, unfinished evacuation
// migrations are deleted, the record is dropped; instances stay.
func TestUncordonCancelsDrain(t *testing.T) {
	f := newFixture(t, []*apiv1.Node{node("n1", true)},
		running("live", "n1", apiv1.EvictionStrategyLiveMigrate, true),
		running("ext", "n1", apiv1.EvictionStrategyExternal, true))
	f.reconcile("n1")
	f.reconcile("n1")
	if f.nodes.Get(t, "", "n1").GetStatus().GetEvacuation() == nil {
		t.Fatal("no drain record")
	}
	f.nodes.Update(t, "", "n1", func(n *apiv1.Node) { n.Spec.Unschedulable, n.Spec.Drain = false, false })
	f.reconcile("n1")
	for _, name := range []string{"live", "ext"} {
		if got := f.vmi(name).GetStatus().GetEvacuationNodeName(); got != "" {
			t.Errorf("%s: mark %q kept", name, got)
		}
	}
	if migs := f.migrationsOf("live"); len(migs) != 1 || migs[0].GetMetadata().GetDeletionTimestamp() == nil {
		t.Errorf("evacuation migration not canceled: %v", migs)
	}
	if ev := f.nodes.Get(t, "", "n1").GetStatus().GetEvacuation(); ev != nil {
		t.Errorf("record kept: %v", ev)
	}
}

// An instance marked by an Evict call migrates off a node that is not
// draining; nothing else there is touched and the node gets no record.
func TestEvictMarkMigratesWithoutDrain(t *testing.T) {
	marked := running("marked", "n1", apiv1.EvictionStrategyLiveMigrate, true)
	marked.Status.EvacuationNodeName = "n1"
	f := newFixture(t, []*apiv1.Node{node("n1", false)}, marked,
		running("other", "n1", apiv1.EvictionStrategyNone, true))
	f.reconcile("n1")
	if n := len(f.migrationsOf("marked")); n != 1 {
		t.Errorf("marked: %d migrations, want 1", n)
	}
	if v := f.vmi("other"); v.GetMetadata().GetDeletionTimestamp() != nil || len(f.migrationsOf("other")) != 0 {
		t.Error("an unmarked instance on a node that does not drain was touched")
	}
	if ev := f.nodes.Get(t, "", "n1").GetStatus().GetEvacuation(); ev != nil {
		t.Errorf("record on a node that does not drain: %v", ev)
	}
}

// An empty draining node is drained at once; an instance still starting
// there waits to run before it migrates.
func TestDrainEmptyAndStarting(t *testing.T) {
	starting := running("starting", "n2", apiv1.EvictionStrategyLiveMigrate, true)
	starting.Status.Phase = apiv1.PhaseScheduled
	starting.Status.PhaseTransitionTimestamps = []*apiv1.PhaseTransitionTimestamp{{Phase: apiv1.PhaseScheduled, Time: timestamppb.New(t0)}}
	f := newFixture(t, []*apiv1.Node{node("n1", true), node("n2", true)}, starting)
	f.reconcile("n1")
	if !f.nodes.Get(t, "", "n1").GetStatus().GetEvacuation().GetDrained() {
		t.Error("empty node not drained")
	}
	f.reconcile("n2")
	if e := f.remaining("n2")["starting"]; e.GetState() != StateWaiting || len(f.migrationsOf("starting")) != 0 {
		t.Errorf("starting instance: %v, %d migrations; want Waiting and none", e, len(f.migrationsOf("starting")))
	}
}

// Instance events bring back the node a drain is on (or being called off)
// and the node an instance is marked to leave, never the others: status
// writes are frequent.
func TestInstanceEventsEnqueueOnlyNodesWithWork(t *testing.T) {
	canceled := node("n3", false)
	canceled.Status.Evacuation = &apiv1.NodeEvacuation{}
	f := newFixture(t, []*apiv1.Node{node("n1", true), node("n2", false), canceled})
	for f.c.queue.Len() > 0 { // the nodes' own add events
		k, _ := f.c.queue.Get()
		f.c.queue.Done(k)
		f.c.queue.Forget(k)
	}
	marked := running("marked", "n2", "", true)
	marked.Status.EvacuationNodeName = "n4"
	for _, v := range []*apiv1.VirtualMachineInstance{running("a", "n1", "", true), running("b", "n2", "", true), running("c", "n3", "", true), marked} {
		f.c.enqueueNodesOf(v)
	}
	got := map[string]bool{}
	for f.c.queue.Len() > 0 {
		k, _ := f.c.queue.Get()
		got[k] = true
		f.c.queue.Done(k)
	}
	if want := map[string]bool{"n1": true, "n3": true, "n4": true}; !maps.Equal(got, want) {
		t.Errorf("enqueued %v, want %v", got, want)
	}
}
