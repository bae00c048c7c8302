package replicaset

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

func TestAdoptsMatchingOrphan(t *testing.T) {
	f := newFixture(t, Options{}, newRS(2), vmi("web-stray", 0, orphan))
	f.reconcile(t)
	if got := f.ops(); fmt.Sprint(got) != "[update web-stray create]" {
		t.Fatalf("writes %v, want the orphan adopted and one instance created", got)
	}
	v := f.vmis.Get(t, "default", "web-stray")
	if !controlledBy(v, f.rs(t)) || v.Metadata.OwnerReferences[0].Name != "web" {
		t.Fatalf("orphan's owner references %v, want the replica set as controller", v.Metadata.OwnerReferences)
	}
}

func TestDoesNotAdoptForAReplacedReplicaSet(t *testing.T) {
	f := newFixture(t, Options{}, newRS(1), vmi("web-stray", 0, orphan))
	// The store holds another replica set of that name than the cache.
	f.rss.Update(t, "default", "web", func(rs *apiv1.VirtualMachineInstanceReplicaSet) { rs.Metadata.Uid = "other-uid" })
	if _, err := f.c.Reconcile(context.Background(), rsKey); err == nil || !strings.Contains(err.Error(), "replaced") {
		t.Fatalf("reconcile: %v, want an error: the replica set was replaced", err)
	}
	if ops := f.ops(); len(ops) != 0 {
		t.Fatalf("wrote %v, want nothing adopted or created", ops)
	}
}

func TestLeavesFinishedOrphan(t *testing.T) {
	f := newFixture(t, Options{}, newRS(1), vmi("web-old", 0, orphan, phase(apiv1.PhaseSucceeded)))
	f.reconcile(t)
	if got := f.ops(); fmt.Sprint(got) != "[create]" {
		t.Fatalf("writes %v, want one create and the finished orphan left alone", got)
	}
}

func TestReleasesRelabelledInstance(t *testing.T) {
	f := newFixture(t, Options{}, newRS(1), vmi("web-a", 0, labels("app", "debug")))
	f.reconcile(t)
	if got := f.ops(); fmt.Sprint(got) != "[update web-a create]" {
		t.Fatalf("writes %v, want web-a released and a replacement created", got)
	}
	if refs := f.vmis.Get(t, "default", "web-a").Metadata.OwnerReferences; len(refs) != 0 {
		t.Fatalf("released instance keeps owner references %v", refs)
	}
}

func TestIgnoresInstancesOfOthers(t *testing.T) {
	f := newFixture(t, Options{}, newRS(1),
		vmi("web-vm", 0, ownedBy(apiv1.KindVirtualMachine, "web-vm", "vm-uid")),
		vmi("web-x", 0, ownedBy(apiv1.KindReplicaSet, "web2", "rs2-uid")),
		vmi("other-ns", 0, orphan, func(v *apiv1.VirtualMachineInstance) { v.Metadata.Namespace = "prod" }),
	)
	f.reconcile(t)
	if got := f.ops(); fmt.Sprint(got) != "[create]" {
		t.Fatalf("writes %v, want only a create: the others' instances are not ours", got)
	}
}

func TestAddsFinalizerBeforeCreating(t *testing.T) {
	rs := newRS(2)
	rs.Metadata.Finalizers = nil
	f := newFixture(t, Options{}, rs)
	f.reconcile(t)
	ws := f.rss.Store.Writes()
	if len(ws) == 0 || !slices.Contains(ws[0].Object.GetMetadata().GetFinalizers(), apiv1.FinalizerReplicaSet) {
		t.Fatalf("first replica set write %v, want the finalizer", ws)
	}
	if n := len(f.instances(t)); n != 2 {
		t.Fatalf("%d instances, want 2 in the same pass once the finalizer is stored", n)
	}
	if !slices.Contains(f.rs(t).Metadata.Finalizers, apiv1.FinalizerReplicaSet) {
		t.Fatal("the status write lost the finalizer")
	}
}

func TestDeletionCascadesThenDropsFinalizer(t *testing.T) {
	f := newFixture(t, Options{}, newRS(3))
	f.reconcile(t) // three creates the cache has not shown yet
	f.rss.Sync(t)
	if _, _, err := f.rss.Store.Delete(context.Background(), "default", "web", store.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.vmis.Store.Seed(vmi("web-vm", 0, ownedBy(apiv1.KindVirtualMachine, "web-vm", "vm-uid")))
	f.rss.Sync(t)
	f.resetWrites()
	f.reconcile(t)
	if got := f.rs(t); !slices.Contains(got.Metadata.Finalizers, apiv1.FinalizerReplicaSet) {
		t.Fatal("finalizer dropped while our creates were unseen: they would outlive the replica set")
	}
	f.vmis.Sync(t)
	f.resetWrites()
	f.reconcile(t)
	if got := f.ops(); count(got, "delete web-vm") != 0 || len(got) != 3 || !strings.HasPrefix(got[0], "delete web-") {
		t.Fatalf("writes %v, want the three instances deleted, the VM's left", got)
	}
	f.sync(t)
	f.resetWrites()
	f.reconcile(t)
	if _, err := f.rss.Store.Get(context.Background(), "default", "web"); err == nil {
		t.Fatal("replica set still stored once its instances are gone")
	}
	if got := names(f.instances(t)); got != "web-vm" {
		t.Fatalf("instances left %s, want web-vm", got)
	}
	f.sync(t)
	f.reconcile(t) // gone: nothing to do, no error
}

func TestCollectsInstancesOfAGoneReplicaSet(t *testing.T) {
	f := newFixture(t, Options{}, newRS(1), vmi("web-a", 0),
		vmi("web-old", 0, ownedBy(apiv1.KindReplicaSet, "web", "earlier-uid")))
	f.reconcile(t)
	if got := f.ops(); count(got, "delete web-old") != 1 || count(got, "delete web-a") != 0 {
		t.Fatalf("writes %v, want the earlier replica set's instance deleted, ours kept", got)
	}

	// With no replica set at all, its instances go, but only once the
	// store confirms it is gone.
	f = newFixture(t, Options{}, nil, vmi("web-a", 0))
	f.rss.Store.Seed(newRS(1)) // the cache has not shown it yet
	f.reconcile(t)
	if ops := f.ops(); len(ops) != 0 {
		t.Fatalf("wrote %v while the replica set exists", ops)
	}
	if _, _, err := f.rss.Store.Delete(context.Background(), "default", "web", store.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.rss.Update(t, "default", "web", func(rs *apiv1.VirtualMachineInstanceReplicaSet) { rs.Metadata.Finalizers = nil })
	f.reconcile(t)
	if got := f.ops(); fmt.Sprint(got) != "[delete web-a]" {
		t.Fatalf("writes %v, want web-a deleted", got)
	}
}

// A deletion by someone else does not stand in for one of ours.
func TestForeignDeletionDoesNotSatisfyExpectations(t *testing.T) {
	f := newFixture(t, Options{}, newRS(2), vmi("web-a", 0), vmi("web-b", 1), vmi("web-c", 2))
	f.reconcile(t)
	if got := f.ops(); fmt.Sprint(got) != "[delete web-c]" {
		t.Fatalf("writes %v, want the newest deleted", got)
	}
	f.rss.Sync(t)
	// Someone deletes web-a; the cache shows that before our delete.
	f.vmis.Informer.Fill(f.vmis.Get(t, "default", "web-b"), vmi("web-c", 2))
	if _, dels := f.c.exp.Pending(rsKey); dels != 1 {
		t.Fatalf("%d deletions pending, want ours still", dels)
	}
	f.vmis.Sync(t)
	if f.c.exp.Satisfied(rsKey) != true {
		t.Fatal("expectations unsatisfied once the cache shows our deletion")
	}
}

func TestInstanceEventsEnqueueReplicaSets(t *testing.T) {
	rs2 := newRS(1)
	rs2.Metadata.Name, rs2.Metadata.Uid = "web2", "rs2-uid"
	rs2.Spec.Selector.MatchLabels = map[string]string{"tier": "front"}
	other := newRS(1)
	other.Metadata.Name, other.Metadata.Uid = "db", "db-uid"
	other.Spec.Selector.MatchLabels = map[string]string{"app": "db"}
	f := newFixture(t, Options{}, newRS(1))
	f.rss.Store.Seed(rs2, other)
	f.rss.Sync(t)
	drain(f.c)

	f.vmis.Store.Seed(vmi("stray", 0, orphan), vmi("mine", 0), vmi("vms", 0, ownedBy(apiv1.KindVirtualMachine, "vm", "vm-uid")))
	f.vmis.Sync(t)
	if got := drain(f.c); fmt.Sprint(got) != "[default/web default/web2]" {
		t.Fatalf("queued %v, want the owner and every replica set selecting the orphan", got)
	}
	f.vmis.Update(t, "default", "mine", func(v *apiv1.VirtualMachineInstance) { v.Metadata.OwnerReferences = nil })
	f.vmis.Sync(t)
	if got := drain(f.c); fmt.Sprint(got) != "[default/web default/web2]" {
		t.Fatalf("queued %v after a release, want the old owner and the selecting replica sets", got)
	}
}

// drain empties the controller's queue and returns its keys, sorted.
func drain(c *Controller) []string {
	var keys []string
	for c.queue.Len() > 0 {
		k, _ := c.queue.Get()
		c.queue.Done(k)
		c.queue.Forget(k)
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
