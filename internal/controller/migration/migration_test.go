package migration

import (
	"context"
	"fmt"
	"slices"
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

// placer answers with a fixed node, or none with why.
type placer struct {
	node, why string
	calls     int
}

func (p *placer) PlaceMigrationTarget(*apiv1.VirtualMachineInstance, map[string]string) (string, string) {
	p.calls++
	return p.node, p.why
}

type fixture struct {
	t      *testing.T
	now    time.Time
	migs   controllertest.Cache[*apiv1.VirtualMachineInstanceMigration]
	vmis   controllertest.Cache[*apiv1.VirtualMachineInstance]
	nodes  controllertest.Cache[*apiv1.Node]
	placer *placer
	c      *Controller
}

// readyNode is a Ready node a, b or c, registered with the migration
// address 10.0.0.1, .2 or .3.
func readyNode(name string) *apiv1.Node {
	return &apiv1.Node{
		Metadata: &apiv1.ObjectMeta{Name: name, Uid: "uid-" + name},
		Status: &apiv1.NodeStatus{Conditions: []*apiv1.Condition{{Type: apiv1.ConditionReady, Status: apiv1.ConditionTrue}},
			MigrationAddress: fmt.Sprintf("10.0.0.%d", name[0]-'a'+1)},
	}
}

func runningVMI(name, node string) *apiv1.VirtualMachineInstance {
	return &apiv1.VirtualMachineInstance{
		Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: name, Uid: "uid-" + name,
			Labels: map[string]string{apiv1.LabelNodeName: node}},
		Spec: &apiv1.VirtualMachineInstanceSpec{
			Domain:  &apiv1.DomainSpec{Memory: &apiv1.Memory{Guest: "128Mi"}},
			Volumes: []*apiv1.Volume{{Name: "root", Image: &apiv1.ImageVolume{Name: "disk.qcow2"}}},
		},
		Status: &apiv1.VirtualMachineInstanceStatus{Phase: apiv1.PhaseRunning, NodeName: node, DomainUuid: "dom-" + name},
	}
}

func newMigration(name, vmi string, created time.Time) *apiv1.VirtualMachineInstanceMigration {
	return &apiv1.VirtualMachineInstanceMigration{
		Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: name, Uid: "uid-" + name,
			CreationTimestamp: timestamppb.New(created), Finalizers: []string{apiv1.FinalizerMigration},
			Labels: map[string]string{apiv1.LabelMigrationVMIName: vmi}},
		Spec: &apiv1.VirtualMachineInstanceMigrationSpec{VmiName: vmi},
	}
}

func newFixture(t *testing.T, opts Options, vmis []*apiv1.VirtualMachineInstance, migs ...*apiv1.VirtualMachineInstanceMigration) *fixture {
	t.Helper()
	f := &fixture{t: t, now: t0, placer: &placer{node: "b"}}
	clock := func() time.Time { return f.now }
	db := memstore.NewDB(clock)
	f.migs = controllertest.NewCache(db, store.Migrations, migs...)
	f.vmis = controllertest.NewCache(db, store.VirtualMachineInstances, vmis...)
	f.nodes = controllertest.NewCache(db, store.Nodes, readyNode("a"), readyNode("b"), readyNode("c"))
	opts.Clock = clock
	f.c = New(opts, f.migs.Informer, f.vmis.Informer, f.nodes.Informer, f.placer, f.migs.Store, f.vmis.Store, controllertest.Discard())
	f.sync()
	return f
}

func (f *fixture) sync() {
	f.migs.Sync(f.t)
	f.vmis.Sync(f.t)
	f.nodes.Sync(f.t)
}

// step reconciles the migration once and syncs the caches.
func (f *fixture) step(name string) time.Duration {
	f.t.Helper()
	res, err := f.c.Reconcile(context.Background(), "default/"+name)
	if err != nil {
		f.t.Fatalf("reconcile %s: %v", name, err)
	}
	f.sync()
	return res.RequeueAfter
}

func (f *fixture) mig(name string) *apiv1.VirtualMachineInstanceMigration {
	f.t.Helper()
	return f.migs.Get(f.t, "default", name)
}

func (f *fixture) vmi(name string) *apiv1.VirtualMachineInstance {
	f.t.Helper()
	return f.vmis.Get(f.t, "default", name)
}

func (f *fixture) wantPhase(name, phase string) *apiv1.VirtualMachineInstanceMigration {
	f.t.Helper()
	m := f.mig(name)
	if got := m.GetStatus().GetPhase(); got != phase {
		f.t.Fatalf("migration %s is %q (%s: %s), want %s", name, got, m.GetStatus().GetReason(), m.GetStatus().GetMessage(), phase)
	}
	return m
}

// toPreparing drives a fresh migration to the handoff.
func (f *fixture) toPreparing(name string) {
	f.t.Helper()
	for _, phase := range []string{apiv1.MigrationPending, apiv1.MigrationScheduling, apiv1.MigrationScheduled, apiv1.MigrationPreparingTarget} {
		f.step(name)
		f.wantPhase(name, phase)
	}
}

// report changes the instance's migration state as a node agent would.
func (f *fixture) report(vmi string, fn func(*apiv1.VirtualMachineInstance)) {
	f.vmis.Update(f.t, "default", vmi, fn)
	f.sync()
}

func TestMigrationSucceeds(t *testing.T) {
	f := newFixture(t, Options{BandwidthMiBPerSecond: 64}, []*apiv1.VirtualMachineInstance{runningVMI("vm1", "a")},
		newMigration("m1", "vm1", t0))
	f.toPreparing("m1")

	v := f.vmi("vm1")
	st := v.GetStatus().GetMigrationState()
	if st.GetMigrationUid() != "uid-m1" || st.GetSourceNode() != "a" || st.GetTargetNode() != "b" ||
		st.GetMethod() != apiv1.MigrationMethodBlock || st.GetConfiguration().GetBandwidthMibPerSecond() != 64 ||
		st.GetConfiguration().GetCompletionTimeoutPerGibSeconds() != 150 {
		t.Fatalf("handoff state = %v", st)
	}
	if v.GetMetadata().GetLabels()[apiv1.LabelMigrationTargetNode] != "b" {
		t.Fatalf("instance labels = %v, want the target node label", v.GetMetadata().GetLabels())
	}
	if m := f.mig("m1"); m.GetStatus().GetTargetNode() != "b" || m.GetStatus().GetVmiUid() != "uid-vm1" {
		t.Fatalf("migration status = %v", m.GetStatus())
	}

	// Ready needs both the timestamp and the XML.
	f.report("vm1", func(v *apiv1.VirtualMachineInstance) {
		v.Status.MigrationState.TargetReadyTimestamp = timestamppb.New(f.now)
	})
	f.step("m1")
	f.wantPhase("m1", apiv1.MigrationPreparingTarget)
	f.report("vm1", func(v *apiv1.VirtualMachineInstance) { v.Status.MigrationState.TargetDomainXml = "<domain/>" })
	f.step("m1")
	f.wantPhase("m1", apiv1.MigrationTargetReady)

	f.report("vm1", func(v *apiv1.VirtualMachineInstance) { v.Status.MigrationState.StartTimestamp = timestamppb.New(f.now) })
	f.step("m1")
	m := f.wantPhase("m1", apiv1.MigrationRunning)
	if m.GetStatus().GetMigrationState().GetTargetDomainXml() != "" {
		t.Fatal("the migration mirrors the domain XML")
	}

	// The source flips the node with completed in one write.
	f.report("vm1", func(v *apiv1.VirtualMachineInstance) {
		v.Status.MigrationState.Completed = true
		v.Status.MigrationState.EndTimestamp = timestamppb.New(f.now)
		v.Status.NodeName = "b"
	})
	f.step("m1")
	m = f.wantPhase("m1", apiv1.MigrationSucceeded)
	if !m.GetStatus().GetMigrationState().GetCompleted() {
		t.Fatalf("final state not recorded: %v", m.GetStatus())
	}
	f.step("m1") // settles the instance, releases the finalizer
	if fin := f.mig("m1").GetMetadata().GetFinalizers(); len(fin) != 0 {
		t.Fatalf("finalizers after the end = %v", fin)
	}
	v = f.vmi("vm1")
	if l := v.GetMetadata().GetLabels(); l[apiv1.LabelNodeName] != "b" || l[apiv1.LabelMigrationTargetNode] != "" {
		t.Fatalf("instance labels after the move = %v; want the node label on b and no target label", l)
	}
	if v.GetStatus().GetMigrationState().GetTargetDomainXml() != "" {
		t.Fatal("the domain XML stays on the instance after the migration")
	}
}

func TestAdmission(t *testing.T) {
	paused := runningVMI("paused", "a")
	paused.Status.Conditions = []*apiv1.Condition{apiv1.LiveMigratable(&apiv1.VirtualMachineInstanceSpec{Paused: true})}
	pending := runningVMI("pending", "")
	pending.Status.Phase = apiv1.PhasePending
	busy := runningVMI("busy", "a")
	busy.Status.MigrationState = &apiv1.MigrationState{MigrationUid: "someone-else"}
	f := newFixture(t, Options{}, []*apiv1.VirtualMachineInstance{paused, pending, busy, runningVMI("twice", "a")},
		newMigration("m-paused", "paused", t0), newMigration("m-pending", "pending", t0),
		newMigration("m-busy", "busy", t0), newMigration("m-missing", "nope", t0),
		newMigration("m-first", "twice", t0), newMigration("m-second", "twice", t0.Add(time.Second)))
	for name, want := range map[string]string{
		"m-paused":  "PausedNotLiveMigratable",
		"m-pending": "is Pending, not Running",
		"m-busy":    "still migrating",
		"m-missing": "does not exist",
	} {
		f.step(name)
		if m := f.wantPhase(name, apiv1.MigrationFailed); !strings.Contains(m.GetStatus().GetMessage(), want) {
			t.Errorf("%s failed with %q, want it to say %q", name, m.GetStatus().GetMessage(), want)
		}
	}
	// One per instance: the older one wins even if the newer is looked at first.
	f.step("m-second")
	if m := f.wantPhase("m-second", apiv1.MigrationFailed); !strings.Contains(m.GetStatus().GetMessage(), "m-first is already in progress") {
		t.Errorf("second migration: %q", m.GetStatus().GetMessage())
	}
	f.step("m-first")
	f.wantPhase("m-first", apiv1.MigrationPending)
}

func TestLimits(t *testing.T) {
	vmis := []*apiv1.VirtualMachineInstance{runningVMI("a1", "a"), runningVMI("a2", "a"), runningVMI("c1", "c"), runningVMI("c2", "c")}
	var migs []*apiv1.VirtualMachineInstanceMigration
	for i, v := range vmis {
		migs = append(migs, newMigration("m-"+v.Metadata.Name, v.Metadata.Name, t0.Add(time.Duration(i)*time.Second)))
	}
	f := newFixture(t, Options{ParallelMigrationsPerCluster: 2, ParallelOutboundMigrationsPerNode: 1}, vmis, migs...)
	for _, m := range migs {
		f.step(m.Metadata.Name) // → Pending
	}
	// Admitting without the cache seeing the first admission yet: the
	// promoted one still counts.
	for _, name := range []string{"m-a1", "m-a2"} {
		if _, err := f.c.Reconcile(context.Background(), "default/"+name); err != nil {
			t.Fatal(err)
		}
	}
	f.sync()
	f.wantPhase("m-a1", apiv1.MigrationScheduling)
	if m := f.wantPhase("m-a2", apiv1.MigrationPending); !strings.Contains(m.GetStatus().GetMessage(), "leaving node a (at most 1") {
		t.Fatalf("per-node wait: %q", m.GetStatus().GetMessage())
	}
	f.step("m-c1")
	f.wantPhase("m-c1", apiv1.MigrationScheduling)
	if after := f.step("m-c2"); after == 0 {
		t.Fatal("a waiting migration is not retried")
	}
	if m := f.wantPhase("m-c2", apiv1.MigrationPending); !strings.Contains(m.GetStatus().GetMessage(), "2 migrations are running in the cluster") {
		t.Fatalf("cluster wait: %q", m.GetStatus().GetMessage())
	}
	// One ends: the next on that node goes.
	f.migs.Update(t, "default", "m-c1", func(m *apiv1.VirtualMachineInstanceMigration) { m.Status.SetPhase(apiv1.MigrationFailed, f.now) })
	f.sync()
	f.step("m-c2")
	f.wantPhase("m-c2", apiv1.MigrationScheduling)
}

// TestLimitsCountHandoffBeforeItsPhase: a server wrote the handoff to
// the instance and died before writing the migration's phase; the nodes
// migrated the instance meanwhile. The next leader still counts that
// migration as leaving the source until it ends.
func TestLimitsCountHandoffBeforeItsPhase(t *testing.T) {
	vmis := []*apiv1.VirtualMachineInstance{runningVMI("a1", "a"), runningVMI("a2", "a")}
	first, second := newMigration("m-a1", "a1", t0), newMigration("m-a2", "a2", t0.Add(time.Second))
	f := newFixture(t, Options{ParallelOutboundMigrationsPerNode: 1}, vmis, first, second)
	for _, phase := range []string{apiv1.MigrationPending, apiv1.MigrationScheduling, apiv1.MigrationScheduled} {
		f.step("m-a1")
		f.wantPhase("m-a1", phase)
	}
	f.step("m-a2")
	f.wantPhase("m-a2", apiv1.MigrationPending)
	// The dead server's last write: the instance's migration state; then
	// the nodes move it to b.
	f.report("a1", func(v *apiv1.VirtualMachineInstance) {
		v.Status.MigrationState = &apiv1.MigrationState{MigrationUid: "uid-m-a1", SourceNode: "a", TargetNode: "b", Completed: true}
		v.Status.NodeName = "b"
	})
	f.step("m-a2")
	if m := f.wantPhase("m-a2", apiv1.MigrationPending); !strings.Contains(m.GetStatus().GetMessage(), "leaving node a (at most 1") {
		t.Fatalf("second migration admitted while the first one still leaves a: %q", m.GetStatus().GetMessage())
	}
}

func TestUnschedulable(t *testing.T) {
	f := newFixture(t, Options{}, []*apiv1.VirtualMachineInstance{runningVMI("vm1", "a")}, newMigration("m1", "vm1", t0))
	f.placer.node, f.placer.why = "", "0/3 nodes are available: 1 is the source, 2 Insufficient memory"
	f.step("m1")
	f.step("m1")
	if after := f.step("m1"); after == 0 {
		t.Fatal("an unschedulable migration is not retried")
	}
	m := f.wantPhase("m1", apiv1.MigrationScheduling)
	if m.GetStatus().GetReason() != ReasonUnschedulable || !strings.Contains(m.GetStatus().GetMessage(), "Insufficient memory") {
		t.Fatalf("status = %v", m.GetStatus())
	}
	f.now = f.now.Add(5 * time.Minute)
	f.step("m1")
	f.wantPhase("m1", apiv1.MigrationFailed)
	if st := f.vmi("vm1").GetStatus().GetMigrationState(); st != nil {
		t.Fatalf("a migration that never got a target touched the instance: %v", st)
	}
}

func TestTargetFailures(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cause func(f *fixture)
		want  string
	}{
		{"timeout", func(f *fixture) { f.now = f.now.Add(15 * time.Minute) }, "not ready within 15m0s"},
		{"node down", func(f *fixture) {
			f.nodes.Update(f.t, "", "b", func(n *apiv1.Node) {
				n.Status.Conditions = []*apiv1.Condition{{Type: apiv1.ConditionReady, Status: apiv1.ConditionFalse}}
			})
			f.sync()
		}, "target node b is down"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, Options{}, []*apiv1.VirtualMachineInstance{runningVMI("vm1", "a")}, newMigration("m1", "vm1", t0))
			f.toPreparing("m1")
			if after := f.step("m1"); after == 0 {
				t.Fatal("a preparing migration is not looked at again for its timeout")
			}
			tc.cause(f)
			f.step("m1")
			m := f.wantPhase("m1", apiv1.MigrationFailed)
			st := f.vmi("vm1").GetStatus().GetMigrationState()
			if !st.GetFailed() || !st.GetCompleted() || !strings.Contains(st.GetFailureReason(), tc.want) ||
				!strings.Contains(m.GetStatus().GetMessage(), tc.want) {
				t.Fatalf("instance state %v, migration %v; want failed with %q", st, m.GetStatus(), tc.want)
			}
			f.step("m1")
			if l := f.vmi("vm1").GetMetadata().GetLabels(); l[apiv1.LabelNodeName] != "a" || l[apiv1.LabelMigrationTargetNode] != "" {
				t.Fatalf("labels after a failed migration = %v; want the node label on a, no target label", l)
			}
		})
	}
}

func TestCancel(t *testing.T) {
	f := newFixture(t, Options{}, []*apiv1.VirtualMachineInstance{runningVMI("early", "a"), runningVMI("late", "a")},
		newMigration("m-early", "early", t0), newMigration("m-late", "late", t0))
	ctx := context.Background()
	f.step("m-early")
	if _, _, err := f.migs.Store.Delete(ctx, "default", "m-early", store.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.sync()
	f.step("m-early")
	m := f.wantPhase("m-early", apiv1.MigrationFailed)
	if m.GetStatus().GetReason() != ReasonCanceled || !apiv1.IsConditionTrue(m.GetStatus().GetConditions(), apiv1.ConditionMigrationAbortRequested) {
		t.Fatalf("canceled before the handoff: %v", m.GetStatus())
	}
	f.step("m-early") // the finalizer goes, and with it the object
	if _, err := f.migs.Store.Get(ctx, "default", "m-early"); err == nil {
		t.Fatal("a canceled migration stays after its finalizer went")
	}

	// After the handoff, deleting asks the source to abort and waits.
	f.toPreparing("m-late")
	f.report("late", func(v *apiv1.VirtualMachineInstance) { v.Status.MigrationState.StartTimestamp = timestamppb.New(f.now) })
	if _, _, err := f.migs.Store.Delete(ctx, "default", "m-late", store.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.sync()
	f.step("m-late")
	if !f.vmi("late").GetStatus().GetMigrationState().GetAbortRequested() {
		t.Fatal("no abort requested on the instance")
	}
	f.wantPhase("m-late", apiv1.MigrationPreparingTarget)
	f.report("late", func(v *apiv1.VirtualMachineInstance) {
		st := v.Status.MigrationState
		st.Completed, st.Failed, st.AbortStatus, st.FailureReason = true, true, apiv1.MigrationAbortSucceeded, "Live migration has been aborted"
	})
	f.step("m-late")
	if m := f.wantPhase("m-late", apiv1.MigrationFailed); m.GetStatus().GetMigrationState().GetAbortStatus() != apiv1.MigrationAbortSucceeded {
		t.Fatalf("aborted migration status = %v", m.GetStatus())
	}
}

func TestInstanceGoneOrReplaced(t *testing.T) {
	f := newFixture(t, Options{}, []*apiv1.VirtualMachineInstance{runningVMI("vm1", "a")}, newMigration("m1", "vm1", t0))
	f.step("m1")
	f.vmis.Update(t, "default", "vm1", func(v *apiv1.VirtualMachineInstance) { v.Metadata.Uid = "a-new-one" })
	f.sync()
	f.step("m1")
	if m := f.wantPhase("m1", apiv1.MigrationFailed); m.GetStatus().GetReason() != ReasonVMIReplaced {
		t.Fatalf("status = %v", m.GetStatus())
	}
}

func TestKeepsNewestFinalized(t *testing.T) {
	var migs []*apiv1.VirtualMachineInstanceMigration
	for i := range 7 {
		m := newMigration(fmt.Sprintf("m%d", i), "vm1", t0.Add(time.Duration(i)*time.Minute))
		m.Metadata.Finalizers = nil
		m.Status = &apiv1.VirtualMachineInstanceMigrationStatus{Phase: apiv1.MigrationSucceeded}
		migs = append(migs, m)
	}
	f := newFixture(t, Options{}, []*apiv1.VirtualMachineInstance{runningVMI("vm1", "a")}, migs...)
	f.step("m6")
	left, _, err := f.migs.Store.List(context.Background(), store.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range left {
		names = append(names, m.Metadata.Name)
	}
	if got := strings.Join(names, ","); got != "m2,m3,m4,m5,m6" {
		t.Fatalf("kept %s, want the newest five", got)
	}
}

// A reconcile right after the handoff, before the instance cache shows
// it, must not read the missing state as lost.
func TestStaleCacheAfterHandoff(t *testing.T) {
	f := newFixture(t, Options{}, []*apiv1.VirtualMachineInstance{runningVMI("vm1", "a")}, newMigration("m1", "vm1", t0))
	for range 3 {
		f.step("m1") // Pending, Scheduling, Scheduled
	}
	ctx := context.Background()
	if _, err := f.c.Reconcile(ctx, "default/m1"); err != nil { // handoff
		t.Fatal(err)
	}
	f.migs.Sync(t) // the migration's cache catches up, the instance's not
	if _, err := f.c.Reconcile(ctx, "default/m1"); err != nil {
		t.Fatal(err)
	}
	f.sync()
	f.wantPhase("m1", apiv1.MigrationPreparingTarget)
}

// An instance whose VM a snapshot or restore holds does not migrate
// until it is let go: the snapshot's overlay and copy are the source
// node's.
func TestWaitsWhileTheVMIsLocked(t *testing.T) {
	owned := runningVMI("vm1", "a")
	owned.Metadata.OwnerReferences = []*apiv1.OwnerReference{{Kind: apiv1.KindVirtualMachine, Name: "vm1", Uid: "uid-vm", Controller: true}}
	bare := runningVMI("vm2", "a") // no VM: nothing to hold it
	lock := `snapshot "s1"`
	var asked []string
	opts := Options{LockedBy: func(ns, name string) string {
		asked = append(asked, ns+"/"+name)
		return lock
	}}
	f := newFixture(t, opts, []*apiv1.VirtualMachineInstance{owned, bare}, newMigration("m1", "vm1", t0), newMigration("m2", "vm2", t0))
	f.step("m1")
	f.wantPhase("m1", apiv1.MigrationPending)
	if after := f.step("m1"); after != retryPending {
		t.Errorf("requeue after %v, want %v", after, retryPending)
	}
	if m := f.wantPhase("m1", apiv1.MigrationPending); m.GetStatus().GetMessage() != `snapshot "s1" holds the VM` {
		t.Fatalf("message %q", m.GetStatus().GetMessage())
	}
	f.step("m2")
	f.step("m2")
	f.wantPhase("m2", apiv1.MigrationScheduling)
	if !slices.Equal(slices.Compact(asked), []string{"default/vm1"}) {
		t.Errorf("asked for the lock of %v, want only default/vm1", asked)
	}
	lock = ""
	f.step("m1")
	f.wantPhase("m1", apiv1.MigrationScheduling)
}
