package node

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller/controllertest"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
	"github.com/virtplane/terraform-provider-virtplane/internal/store/memstore"
)

// t0 is the controller's clock at the start of every test.
var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

const (
	lease  = 40 * time.Second
	margin = 10 * time.Second
)

// readyNode is a node as the API leaves it after a heartbeat stamped hb
// (by the API server's clock, which need not be the controller's).
func readyNode(name string, hb time.Time) *apiv1.Node {
	return &apiv1.Node{
		Metadata: &apiv1.ObjectMeta{Name: name, Uid: "uid-" + name},
		Spec:     &apiv1.NodeSpec{},
		Status: &apiv1.NodeStatus{
			Schedulable: true,
			Heartbeat:   timestamppb.New(hb),
			LeaseExpiry: timestamppb.New(hb.Add(lease)),
			Conditions: []*apiv1.Condition{{
				Type: apiv1.ConditionReady, Status: apiv1.ConditionTrue, Reason: "NodeAgentHeartbeat",
				LastTransitionTime: timestamppb.New(hb),
			}},
		},
	}
}

// vm is a VM with a node failure policy.
func vm(name, policy string) *apiv1.VirtualMachine {
	return &apiv1.VirtualMachine{
		Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: name, Uid: "vm-uid-" + name},
		Spec:     &apiv1.VirtualMachineSpec{RunStrategy: apiv1.RunStrategyAlways, NodeFailurePolicy: policy},
	}
}

// instance is the VMI of VM name, on node in phase.
func instance(name, node, phase string) *apiv1.VirtualMachineInstance {
	return &apiv1.VirtualMachineInstance{
		Metadata: &apiv1.ObjectMeta{
			Namespace: "default", Name: name, Uid: "vmi-uid-" + name,
			OwnerReferences: []*apiv1.OwnerReference{{Kind: apiv1.KindVirtualMachine, Name: name, Uid: "vm-uid-" + name, Controller: true}},
		},
		Spec:   &apiv1.VirtualMachineInstanceSpec{},
		Status: &apiv1.VirtualMachineInstanceStatus{Phase: phase, NodeName: node},
	}
}

type fixture struct {
	t     *testing.T
	now   time.Time
	nodes controllertest.Cache[*apiv1.Node]
	vmis  controllertest.Cache[*apiv1.VirtualMachineInstance]
	vms   controllertest.Cache[*apiv1.VirtualMachine]
	c     *Controller
	// fencer is the controller's storage fencer (nil: none).
	fencer Fencer
}

func newFixture(t *testing.T, nodes []*apiv1.Node, vms []*apiv1.VirtualMachine, vmis ...*apiv1.VirtualMachineInstance) *fixture {
	t.Helper()
	return newFixtureFencing(t, nil, nodes, vms, vmis...)
}

// newFixtureFencing is newFixture with a storage fencer.
func newFixtureFencing(t *testing.T, fencer Fencer, nodes []*apiv1.Node, vms []*apiv1.VirtualMachine, vmis ...*apiv1.VirtualMachineInstance) *fixture {
	t.Helper()
	f := &fixture{t: t, now: t0, fencer: fencer}
	clock := func() time.Time { return f.now }
	db := memstore.NewDB(clock)
	f.nodes = controllertest.NewCache(db, store.Nodes, nodes...)
	f.vmis = controllertest.NewCache(db, store.VirtualMachineInstances, vmis...)
	f.vms = controllertest.NewCache(db, store.VirtualMachines, vms...)
	f.c = f.newController()
	f.syncCaches()
	return f
}

func (f *fixture) newController() *Controller {
	return New(Options{Lease: lease, FenceMargin: margin, Clock: func() time.Time { return f.now }, Fencer: f.fencer},
		f.nodes.Informer, f.vmis.Informer, f.vms.Informer, f.nodes.Store, f.vmis.Store, controllertest.Discard())
}

// syncCaches makes the informers show what the stores hold.
func (f *fixture) syncCaches() {
	f.t.Helper()
	f.nodes.Sync(f.t)
	f.vmis.Sync(f.t)
	f.vms.Sync(f.t)
}

// at runs Reconcile for node at controller time t0+d.
func (f *fixture) at(d time.Duration, node string) time.Duration {
	f.t.Helper()
	f.now = t0.Add(d)
	res, err := f.c.Reconcile(context.Background(), node)
	if err != nil {
		f.t.Fatalf("reconcile %s at +%v: %v", node, d, err)
	}
	return res.RequeueAfter
}

// heartbeat does what the API's Heartbeat does, stamping hb.
func (f *fixture) heartbeat(node string, hb time.Time) {
	f.t.Helper()
	f.nodes.Update(f.t, "", node, func(n *apiv1.Node) {
		n.Status.Schedulable = true
		n.Status.Heartbeat = timestamppb.New(hb)
		n.Status.LeaseExpiry = timestamppb.New(hb.Add(lease))
		n.Status.Conditions = apiv1.SetCondition(n.Status.Conditions, &apiv1.Condition{
			Type: apiv1.ConditionReady, Status: apiv1.ConditionTrue, Reason: "NodeAgentHeartbeat",
		}, hb)
	})
}

func (f *fixture) node(name string) *apiv1.Node {
	f.t.Helper()
	return f.nodes.Get(f.t, "", name)
}

func (f *fixture) vmi(name string) *apiv1.VirtualMachineInstance {
	f.t.Helper()
	return f.vmis.Get(f.t, "default", name)
}

// failed lists the VMIs written to Failed so far, in write order.
func (f *fixture) failed() []string {
	var out []string
	for _, w := range f.vmis.Store.Writes() {
		if w.Object.GetStatus().GetPhase() == apiv1.PhaseFailed {
			out = append(out, w.Key)
		}
	}
	return out
}
