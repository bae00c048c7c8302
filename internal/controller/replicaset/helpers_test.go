package replicaset

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller/controllertest"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
	"github.com/virtplane/terraform-provider-virtplane/internal/store/memstore"
)

var t0 = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

const rsKey = "default/web"

type fixture struct {
	c    *Controller
	db   *memstore.DB
	rss  controllertest.Cache[*apiv1.VirtualMachineInstanceReplicaSet]
	vmis controllertest.Cache[*apiv1.VirtualMachineInstance]
	now  time.Time
}

// newFixture seeds the store and the caches with rs and vmis (either may
// be nil or empty), as synced informers would show them.
func newFixture(t testing.TB, opts Options, rs *apiv1.VirtualMachineInstanceReplicaSet, vmis ...*apiv1.VirtualMachineInstance) *fixture {
	t.Helper()
	f := &fixture{now: t0}
	opts.Clock = func() time.Time { return f.now }
	f.db = memstore.NewDB(opts.Clock)
	f.rss = controllertest.NewCache(f.db, store.ReplicaSets)
	f.vmis = controllertest.NewCache(f.db, store.VirtualMachineInstances)
	f.c = New(opts, f.rss.Informer, f.vmis.Informer, f.rss.Store, f.vmis.Store, controllertest.Discard())
	t.Cleanup(f.c.queue.ShutDown)
	if rs != nil {
		f.rss.Store.Seed(rs)
	}
	f.vmis.Store.Seed(vmis...)
	f.sync(t)
	f.resetWrites()
	return f
}

// sync makes the caches show the store, as the informers would; the
// controller's handlers see the changes.
func (f *fixture) sync(t testing.TB) {
	t.Helper()
	f.rss.Sync(t)
	f.vmis.Sync(t)
}

func (f *fixture) resetWrites() {
	f.rss.Store.ResetWrites()
	f.vmis.Store.ResetWrites()
}

func (f *fixture) reconcile(t testing.TB) controller.Result {
	t.Helper()
	res, err := f.c.Reconcile(context.Background(), rsKey)
	if err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	return res
}

// converge syncs and reconciles until a pass writes nothing, and fails
// t if that takes more than max passes.
func (f *fixture) converge(t testing.TB, max int) {
	t.Helper()
	for range max {
		f.sync(t)
		f.resetWrites()
		f.reconcile(t)
		if len(f.rss.Store.Writes())+len(f.vmis.Store.Writes()) == 0 {
			return
		}
	}
	t.Fatalf("not converged after %d passes", max)
}

func (f *fixture) rs(t testing.TB) *apiv1.VirtualMachineInstanceReplicaSet {
	t.Helper()
	return f.rss.Get(t, "default", "web")
}

// instances is every stored instance, sorted by name.
func (f *fixture) instances(t testing.TB) []*apiv1.VirtualMachineInstance {
	t.Helper()
	out, _, err := f.vmis.Store.List(context.Background(), store.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// ops summarises the instance writes made so far: "create", "delete
// <name>", "update <name>".
func (f *fixture) ops() []string {
	var out []string
	for _, w := range f.vmis.Store.Writes() {
		if w.Op == "create" {
			out = append(out, "create")
			continue
		}
		out = append(out, w.Op+" "+w.Object.GetMetadata().GetName())
	}
	return out
}

func count(ops []string, op string) int {
	n := 0
	for _, o := range ops {
		if o == op {
			n++
		}
	}
	return n
}

func newRS(replicas int32) *apiv1.VirtualMachineInstanceReplicaSet {
	return &apiv1.VirtualMachineInstanceReplicaSet{
		Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: "web", Uid: "rs-uid", Generation: 2,
			Finalizers: []string{apiv1.FinalizerReplicaSet}},
		Spec: &apiv1.VirtualMachineInstanceReplicaSetSpec{
			Replicas: &replicas,
			Selector: &apiv1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: &apiv1.VirtualMachineInstanceTemplateSpec{
				Metadata: &apiv1.ObjectMeta{
					Labels:      map[string]string{"app": "web", "tier": "front"},
					Annotations: map[string]string{"team": "blue"},
				},
				Spec: &apiv1.VirtualMachineInstanceSpec{Domain: &apiv1.DomainSpec{Memory: &apiv1.Memory{Guest: "128Mi"}}},
			},
		},
	}
}

// vmi is an instance of the replica set, Running and Ready on node-1,
// created at t0 plus age minutes; mods change it.
func vmi(name string, age int, mods ...func(*apiv1.VirtualMachineInstance)) *apiv1.VirtualMachineInstance {
	v := &apiv1.VirtualMachineInstance{
		Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: name, Uid: name + "-uid",
			Labels:            map[string]string{"app": "web", "tier": "front"},
			CreationTimestamp: timestamppb.New(t0.Add(time.Duration(age) * time.Minute)),
			OwnerReferences:   []*apiv1.OwnerReference{{Kind: apiv1.KindReplicaSet, Name: "web", Uid: "rs-uid", Controller: true}},
		},
		Spec: &apiv1.VirtualMachineInstanceSpec{},
		Status: &apiv1.VirtualMachineInstanceStatus{Phase: apiv1.PhaseRunning, NodeName: "node-1",
			Conditions: []*apiv1.Condition{{Type: apiv1.ConditionReady, Status: apiv1.ConditionTrue}}},
	}
	for _, m := range mods {
		m(v)
	}
	return v
}

func phase(p string) func(*apiv1.VirtualMachineInstance) {
	return func(v *apiv1.VirtualMachineInstance) {
		v.Status.Phase = p
		switch p {
		case apiv1.PhasePending, apiv1.PhaseScheduling:
			v.Status.NodeName = ""
			v.Status.Conditions = nil
		case apiv1.PhaseScheduled, apiv1.PhaseSucceeded, apiv1.PhaseFailed:
			v.Status.Conditions = nil
		}
	}
}

func unready(v *apiv1.VirtualMachineInstance) {
	v.Status.Conditions = []*apiv1.Condition{{Type: apiv1.ConditionReady, Status: apiv1.ConditionFalse}}
}

func orphan(v *apiv1.VirtualMachineInstance) { v.Metadata.OwnerReferences = nil }

func labels(kv ...string) func(*apiv1.VirtualMachineInstance) {
	return func(v *apiv1.VirtualMachineInstance) {
		v.Metadata.Labels = map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			v.Metadata.Labels[kv[i]] = kv[i+1]
		}
	}
}

func ownedBy(kind, name, uid string) func(*apiv1.VirtualMachineInstance) {
	return func(v *apiv1.VirtualMachineInstance) {
		v.Metadata.OwnerReferences = []*apiv1.OwnerReference{{Kind: kind, Name: name, Uid: uid, Controller: true}}
	}
}

func condition(rs *apiv1.VirtualMachineInstanceReplicaSet, t string) *apiv1.Condition {
	return apiv1.FindCondition(rs.GetStatus().GetConditions(), t)
}

// The stores the leader hands New (store.Store, fenced or not) fit.
var (
	_ ReplicaSetStore = store.Store[*apiv1.VirtualMachineInstanceReplicaSet](nil)
	_ InstanceStore   = store.Store[*apiv1.VirtualMachineInstance](nil)
)
