package vmi

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller/controllertest"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
	"github.com/virtplane/terraform-provider-virtplane/internal/store/memstore"
)

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

// node builds a Ready, schedulable node with the given allocatable figures.
func node(name, cpu, mem string, labels map[string]string) *apiv1.Node {
	return &apiv1.Node{
		Metadata: &apiv1.ObjectMeta{Name: name, Labels: labels, Uid: "uid-" + name},
		Spec:     &apiv1.NodeSpec{},
		Status: &apiv1.NodeStatus{
			Allocatable: map[string]string{"cpu": cpu, "memory": mem},
			Capacity:    map[string]string{"cpu": cpu, "memory": mem},
			Schedulable: true,
			Conditions:  []*apiv1.Condition{{Type: apiv1.ConditionReady, Status: apiv1.ConditionTrue}},
		},
	}
}

func withNode(n *apiv1.Node, mut func(*apiv1.Node)) *apiv1.Node {
	n = proto.Clone(n).(*apiv1.Node)
	mut(n)
	return n
}

// vmi builds an unplaced VMI with vcpus cores and guest memory mem.
func vmi(name string, vcpus int32, mem string) *apiv1.VirtualMachineInstance {
	return &apiv1.VirtualMachineInstance{
		Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: name, Uid: "uid-" + name},
		Spec: &apiv1.VirtualMachineInstanceSpec{Domain: &apiv1.DomainSpec{
			Cpu:    &apiv1.CPU{Cores: vcpus, Sockets: 1, Threads: 1},
			Memory: &apiv1.Memory{Guest: mem},
		}},
		Status: &apiv1.VirtualMachineInstanceStatus{},
	}
}

// on places v on node in phase.
func on(v *apiv1.VirtualMachineInstance, node, phase string) *apiv1.VirtualMachineInstance {
	v.Status.NodeName = node
	v.Status.Phase = phase
	return v
}

type fixture struct {
	t     testing.TB
	now   time.Time
	vmis  controllertest.Cache[*apiv1.VirtualMachineInstance]
	nodes controllertest.Cache[*apiv1.Node]
	c     *Controller
}

func newFixture(t testing.TB, opts Options, nodes []*apiv1.Node, vmis ...*apiv1.VirtualMachineInstance) *fixture {
	t.Helper()
	f := &fixture{t: t, now: t0}
	clock := func() time.Time { return f.now }
	db := memstore.NewDB(clock)
	f.vmis = controllertest.NewCache(db, store.VirtualMachineInstances, vmis...)
	f.nodes = controllertest.NewCache(db, store.Nodes, nodes...)
	opts.Clock = clock
	f.c = New(opts, f.vmis.Informer, f.nodes.Informer, f.vmis.Store, controllertest.Discard())
	f.syncCaches()
	return f
}

// syncCaches makes the informers show what the stores hold, as the watch
// would.
func (f *fixture) syncCaches() {
	f.t.Helper()
	f.vmis.Sync(f.t)
	f.nodes.Sync(f.t)
}

func (f *fixture) reconcile(name string) (time.Duration, error) {
	f.t.Helper()
	res, err := f.c.Reconcile(context.Background(), "default/"+name)
	return res.RequeueAfter, err
}

func (f *fixture) stored(name string) *apiv1.VirtualMachineInstance {
	f.t.Helper()
	return f.vmis.Get(f.t, "default", name)
}

// drain empties the work queue and returns the keys it held.
func (f *fixture) drain() map[string]bool {
	keys := map[string]bool{}
	for f.c.queue.Len() > 0 {
		k, _ := f.c.queue.Get()
		keys[k] = true
		f.c.queue.Done(k)
		f.c.queue.Forget(k)
	}
	return keys
}
