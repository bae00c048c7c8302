package replicaset

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller/controllertest"
	"github.com/virtplane/terraform-provider-virtplane/internal/informer"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

func TestScaleUpFromZero(t *testing.T) {
	f := newFixture(t, Options{}, newRS(5))
	f.reconcile(t)
	got := f.instances(t)
	if len(got) != 5 {
		t.Fatalf("%d instances, want 5", len(got))
	}
	names := map[string]bool{}
	for _, v := range got {
		m := v.Metadata
		suffix, ok := strings.CutPrefix(m.Name, "web-")
		if !ok || len(suffix) != apiv1.ReplicaSetSuffixLen || names[m.Name] {
			t.Errorf("name %q, want web-<%d random characters>, unique", m.Name, apiv1.ReplicaSetSuffixLen)
		}
		names[m.Name] = true
		if !controlledBy(v, f.rs(t)) || len(m.OwnerReferences) != 1 || m.OwnerReferences[0].Name != "web" {
			t.Errorf("%s: owner references %v, want the replica set as controller", m.Name, m.OwnerReferences)
		}
		if m.Labels["app"] != "web" || m.Labels["tier"] != "front" || m.Annotations["team"] != "blue" {
			t.Errorf("%s: labels %v annotations %v, want the template's", m.Name, m.Labels, m.Annotations)
		}
		if v.Spec.GetDomain().GetMemory().GetGuest() != "128Mi" || v.Status.GetPhase() != apiv1.PhasePending {
			t.Errorf("%s: spec %v phase %q, want the template's spec, Pending", m.Name, v.Spec, v.Status.GetPhase())
		}
	}
	// Once the cache shows them, nothing more is created, and the status
	// counts them.
	f.converge(t, 3)
	if n := len(f.instances(t)); n != 5 {
		t.Fatalf("%d instances after converging, want 5", n)
	}
	if st := f.rs(t).Status; st.GetReplicas() != 5 || st.GetLabelSelector() != "app=web" || st.GetObservedGeneration() != 2 {
		t.Fatalf("status %v, want 5 replicas, selector app=web, observed generation 2", st)
	}
}

func TestManyCreatesInParallel(t *testing.T) {
	f := newFixture(t, Options{Parallelism: 8}, newRS(200))
	f.reconcile(t)
	if n := len(f.instances(t)); n != 200 {
		t.Fatalf("%d instances, want 200", n)
	}
	f.converge(t, 3)
	if n := len(f.instances(t)); n != 200 {
		t.Fatalf("%d instances after converging, want 200", n)
	}
}

func TestBurstLimitTakesSeveralPasses(t *testing.T) {
	f := newFixture(t, Options{BurstReplicas: 3}, newRS(7))
	var made []int
	for range 5 {
		f.resetWrites()
		res := f.reconcile(t)
		n := count(f.ops(), "create")
		if n == 0 {
			break
		}
		made = append(made, n)
		if more := len(made) < 3; more != (res.RequeueAfter > 0) {
			t.Fatalf("pass %d: requeue after %v; want a requeue while more than a burst remains", len(made), res.RequeueAfter)
		}
		f.sync(t)
	}
	if fmt.Sprint(made) != "[3 3 1]" {
		t.Fatalf("creates per pass %v, want [3 3 1]", made)
	}
	if n := len(f.instances(t)); n != 7 {
		t.Fatalf("%d instances, want 7", n)
	}
}

func TestScaleDownOrder(t *testing.T) {
	f := newFixture(t, Options{}, newRS(2),
		vmi("web-old", 0),                                // running, ready, oldest: kept
		vmi("web-new", 9),                                // running, ready, newest: third
		vmi("web-sick", 1, unready),                      // running, not ready: second
		vmi("web-pend", 2, phase(apiv1.PhasePending)),    // not running
		vmi("web-sched", 3, phase(apiv1.PhaseScheduled)), // not running, newer: first
		vmi("web-mid", 5),                                // running, ready: kept
	)
	f.reconcile(t)
	want := []string{"delete web-sched", "delete web-pend", "delete web-sick", "delete web-new"}
	if got := f.ops(); !sameSet(got, want) {
		t.Fatalf("writes %v, want %v", got, want)
	}
	if got := deletionOrder(f.vmis.Informer.List()); names(got[:4]) != "web-sched web-pend web-sick web-new" {
		t.Fatalf("deletion order %s", names(got))
	}
	f.converge(t, 3)
	if got := names(f.instances(t)); got != "web-mid web-old" {
		t.Fatalf("left %s, want web-mid web-old", got)
	}
}

func TestExpectationsBlockUntilCacheShowsCreates(t *testing.T) {
	f := newFixture(t, Options{}, newRS(3))
	f.reconcile(t)
	if n := len(f.instances(t)); n != 3 {
		t.Fatalf("%d instances, want 3", n)
	}
	// The cache shows one of the three: the next pass must not act on it.
	f.rss.Sync(t)
	f.vmis.Informer.Fill(f.instances(t)[0])
	f.resetWrites()
	if res := f.reconcile(t); res.RequeueAfter != expectationRequeue {
		t.Fatalf("requeue after %v, want %v while creates are unseen", res.RequeueAfter, expectationRequeue)
	}
	if ops := f.ops(); len(ops) != 0 {
		t.Fatalf("a pass with unseen creates wrote %v", ops)
	}
	f.sync(t)
	f.converge(t, 3)
	if n := len(f.instances(t)); n != 3 {
		t.Fatalf("%d instances, want 3 (no double create)", n)
	}
}

// A new leader starts with a fresh listing and no expectations: what the
// last one created counts, and nothing is created twice.
func TestNewLeaderDoesNotOvershoot(t *testing.T) {
	f := newFixture(t, Options{BurstReplicas: 4}, newRS(6))
	f.reconcile(t) // killed now: its creates are stored, its cache never saw them
	if n := len(f.instances(t)); n != 4 {
		t.Fatalf("%d instances after the first burst, want 4", n)
	}
	rsInf := informer.New(f.rss.Store, store.ListOptions{}, controllertest.Discard())
	vmiInf := informer.New(f.vmis.Store, store.ListOptions{}, controllertest.Discard())
	next := New(Options{BurstReplicas: 4}, rsInf, vmiInf, f.rss.Store, f.vmis.Store, controllertest.Discard())
	t.Cleanup(next.queue.ShutDown)
	for range 4 {
		rsInf.Fill(list(t, f.rss.Store)...)
		vmiInf.Fill(list(t, f.vmis.Store)...)
		if _, err := next.Reconcile(context.Background(), rsKey); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(f.instances(t)); n != 6 {
		t.Fatalf("%d instances, want 6", n)
	}
}

func TestFailedInstanceReplacedThenDeleted(t *testing.T) {
	f := newFixture(t, Options{}, newRS(2), vmi("web-a", 0), vmi("web-dead", 1, phase(apiv1.PhaseFailed)))
	f.reconcile(t)
	if got := f.ops(); fmt.Sprint(got) != "[create delete web-dead]" {
		t.Fatalf("writes %v, want the replacement created, then the failed one deleted", got)
	}
	f.converge(t, 3)
	if n := len(f.instances(t)); n != 2 {
		t.Fatalf("%d instances, want 2", n)
	}
}

func TestPausedStandsStill(t *testing.T) {
	rs := newRS(3)
	rs.Spec.Paused = true
	f := newFixture(t, Options{}, rs, vmi("web-a", 0, phase(apiv1.PhaseFailed)))
	f.reconcile(t)
	if ops := f.ops(); len(ops) != 0 {
		t.Fatalf("paused replica set wrote instances: %v", ops)
	}
	c := condition(f.rs(t), apiv1.ConditionReplicaPaused)
	if c.GetStatus() != apiv1.ConditionTrue || c.GetReason() != "Paused" || c.GetMessage() != "Controller got paused" {
		t.Fatalf("ReplicaPaused %v, want True/Paused/Controller got paused", c)
	}
	f.rss.Update(t, "default", "web", func(rs *apiv1.VirtualMachineInstanceReplicaSet) { rs.Spec.Paused = false })
	f.sync(t)
	f.converge(t, 4)
	if c := condition(f.rs(t), apiv1.ConditionReplicaPaused); c != nil {
		t.Fatalf("ReplicaPaused %v after resuming, want none", c)
	}
	if n := len(f.instances(t)); n != 3 {
		t.Fatalf("%d instances after resuming, want 3", n)
	}
}

func TestFailedCreateCondition(t *testing.T) {
	f := newFixture(t, Options{}, newRS(3))
	f.vmis.Store.FailNext("create", errors.New("quota exceeded"))
	if _, err := f.c.Reconcile(context.Background(), rsKey); err == nil {
		t.Fatal("reconcile succeeded, want the create's error (requeue)")
	}
	if n := len(f.instances(t)); n != 0 {
		t.Fatalf("%d instances after a refused first create, want 0 (slow start stops)", n)
	}
	c := condition(f.rs(t), apiv1.ConditionReplicaFailure)
	if c.GetStatus() != apiv1.ConditionTrue || c.GetReason() != apiv1.ReasonFailedCreate || !strings.Contains(c.GetMessage(), "quota exceeded") {
		t.Fatalf("ReplicaFailure %v, want True/FailedCreate with the error", c)
	}
	// The failed create is no longer expected: the retry goes ahead
	// without waiting for the cache, and a clean pass clears the failure.
	f.sync(t)
	f.converge(t, 4)
	if n := len(f.instances(t)); n != 3 {
		t.Fatalf("%d instances, want 3", n)
	}
	if c := condition(f.rs(t), apiv1.ConditionReplicaFailure); c != nil {
		t.Fatalf("ReplicaFailure %v after a clean pass, want none", c)
	}
}

func TestFailedDeleteCondition(t *testing.T) {
	f := newFixture(t, Options{}, newRS(0), vmi("web-a", 0))
	f.vmis.Store.FailNext("delete", errors.New("etcd unavailable"))
	if _, err := f.c.Reconcile(context.Background(), rsKey); err == nil {
		t.Fatal("reconcile succeeded, want the delete's error")
	}
	if c := condition(f.rs(t), apiv1.ConditionReplicaFailure); c.GetReason() != apiv1.ReasonFailedDelete {
		t.Fatalf("ReplicaFailure %v, want FailedDelete", c)
	}
	if adds, dels := f.c.exp.Pending(rsKey); adds != 0 || dels != 0 {
		t.Fatalf("expectations %d/%d after a failed delete, want none", adds, dels)
	}
	f.sync(t)
	f.converge(t, 4)
	if n := len(f.instances(t)); n != 0 {
		t.Fatalf("%d instances, want 0", n)
	}
}

func TestNameCollisionRetries(t *testing.T) {
	f := newFixture(t, Options{}, newRS(2), vmi("web-aaaaa", 0))
	seq := []string{"web-aaaaa", "web-aaaaa", "web-bbbbb"}
	f.c.newName = func(string) string { n := seq[0]; seq = seq[1:]; return n }
	f.reconcile(t)
	if got := names(f.instances(t)); got != "web-aaaaa web-bbbbb" {
		t.Fatalf("instances %s, want web-aaaaa web-bbbbb", got)
	}
}

func TestStatusCountsReady(t *testing.T) {
	f := newFixture(t, Options{}, newRS(4),
		vmi("web-a", 0), vmi("web-b", 1), vmi("web-c", 2, unready), vmi("web-d", 3, phase(apiv1.PhaseScheduled)),
		vmi("web-e", 4, phase(apiv1.PhaseSucceeded)))
	f.reconcile(t)
	st := f.rs(t).Status
	if st.GetReplicas() != 4 || st.GetReadyReplicas() != 2 {
		t.Fatalf("status replicas %d ready %d, want 4 and 2", st.GetReplicas(), st.GetReadyReplicas())
	}
}

func TestStatusWrittenOnlyOnChange(t *testing.T) {
	f := newFixture(t, Options{}, newRS(2), vmi("web-a", 0), vmi("web-b", 1))
	f.converge(t, 4)
	if st := f.rs(t).Status; st.GetReadyReplicas() != 2 {
		t.Fatalf("ready %d, want 2", st.GetReadyReplicas())
	}
	for range 3 {
		f.resetWrites()
		f.reconcile(t)
		if w := f.rss.Store.Writes(); len(w) != 0 {
			t.Fatalf("an idle pass wrote the replica set %d times", len(w))
		}
	}
	f.vmis.Update(t, "default", "web-a", unready)
	f.sync(t)
	f.resetWrites()
	f.reconcile(t)
	if w := f.rss.Store.Writes(); len(w) != 1 || f.rs(t).Status.GetReadyReplicas() != 1 {
		t.Fatalf("%d replica set writes, ready %d; want one write of ready 1", len(w), f.rs(t).Status.GetReadyReplicas())
	}
}

func TestInvalidSpecIsNotRequeued(t *testing.T) {
	rs := newRS(2)
	rs.Spec.Template.Metadata.Labels = map[string]string{"app": "db"}
	f := newFixture(t, Options{}, rs)
	_, err := f.c.Reconcile(context.Background(), rsKey)
	if err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Fatalf("reconcile: %v, want a terminal error about the selector", err)
	}
	if ops := f.ops(); len(ops) != 0 {
		t.Fatalf("wrote %v for an invalid spec", ops)
	}
}

func list[T store.Object](t testing.TB, st interface {
	List(context.Context, store.ListOptions) ([]T, int64, error)
}) []T {
	t.Helper()
	out, _, err := st.List(context.Background(), store.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func names(vs []*apiv1.VirtualMachineInstance) string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.Metadata.Name
	}
	return strings.Join(out, " ")
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
