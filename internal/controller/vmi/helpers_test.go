package vmi

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/informer"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
	"github.com/virtplane/terraform-provider-virtplane/internal/store/memstore"
)

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

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
	t       *testing.T
	now     time.Time
	vmiSt   *memstore.Store[*apiv1.VirtualMachineInstance]
	nodeSt  *memstore.Store[*apiv1.Node]
	vmiInf  *informer.Informer[*apiv1.VirtualMachineInstance]
	nodeInf *informer.Informer[*apiv1.Node]
	c       *Controller
}

func newFixture(t *testing.T, opts Options, nodes []*apiv1.Node, vmis ...*apiv1.VirtualMachineInstance) *fixture {
	t.Helper()
	f := &fixture{t: t, now: t0}
	clock := func() time.Time { return f.now }
	db := memstore.NewDB(clock)
	f.vmiSt = memstore.New(db, store.VirtualMachineInstances)
	f.nodeSt = memstore.New(db, store.Nodes)
	f.vmiSt.Seed(vmis...)
	f.nodeSt.Seed(nodes...)
	f.vmiInf = informer.New(f.vmiSt, store.ListOptions{}, discard())
	f.nodeInf = informer.New(f.nodeSt, store.ListOptions{}, discard())
	opts.Clock = clock
	f.c = New(opts, f.vmiInf, f.nodeInf, f.vmiSt, discard())
	f.syncCaches()
	return f
}

// syncCaches makes the informers show what the stores hold, as the watch
// would.
func (f *fixture) syncCaches() {
	f.t.Helper()
	vmis, _, err := f.vmiSt.List(context.Background(), store.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	f.vmiInf.Fill(vmis...)
	nodes, _, err := f.nodeSt.List(context.Background(), store.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	f.nodeInf.Fill(nodes...)
}

func (f *fixture) reconcile(name string) (time.Duration, error) {
	f.t.Helper()
	res, err := f.c.Reconcile(context.Background(), "default/"+name)
	return res.RequeueAfter, err
}

func (f *fixture) stored(name string) *apiv1.VirtualMachineInstance {
	f.t.Helper()
	v, err := f.vmiSt.Get(context.Background(), "default", name)
	if err != nil {
		f.t.Fatal(err)
	}
	return v
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
