package pool

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller/controllertest"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
	"github.com/virtplane/terraform-provider-virtplane/internal/store/memstore"
)

var t0 = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

const poolKey0 = "default/web"

type fixture struct {
	c     *Controller
	db    *memstore.DB
	pools controllertest.Cache[*apiv1.VirtualMachinePool]
	vms   controllertest.Cache[*apiv1.VirtualMachine]
	vmis  controllertest.Cache[*apiv1.VirtualMachineInstance]
	now   time.Time
}

// newFixture is a controller over pool and vms, its caches synced.
func newFixture(t testing.TB, pool *apiv1.VirtualMachinePool, vms ...*apiv1.VirtualMachine) *fixture {
	t.Helper()
	f := &fixture{now: t0}
	clock := func() time.Time { return f.now }
	f.db = memstore.NewDB(clock)
	f.pools = controllertest.NewCache(f.db, store.Pools)
	f.vms = controllertest.NewCache(f.db, store.VirtualMachines)
	f.vmis = controllertest.NewCache(f.db, store.VirtualMachineInstances)
	f.c = New(Options{Clock: clock}, f.pools.Informer, f.vms.Informer, f.vmis.Informer,
		f.pools.Store, f.vms.Store, f.vmis.Store, controllertest.Discard())
	if pool != nil {
		f.pools.Store.Seed(pool)
	}
	f.vms.Store.Seed(vms...)
	f.sync(t)
	f.resetWrites()
	return f
}

// sync makes the caches show the stores, as the informers would; their
// handlers observe the controller's expectations.
func (f *fixture) sync(t testing.TB) {
	t.Helper()
	f.pools.Sync(t)
	f.vms.Sync(t)
	f.vmis.Sync(t)
}

func (f *fixture) resetWrites() {
	f.pools.Store.ResetWrites()
	f.vms.Store.ResetWrites()
	f.vmis.Store.ResetWrites()
}

// reconcile runs one pass over the pool; an error fails the test.
func (f *fixture) reconcile(t testing.TB) controller.Result {
	t.Helper()
	res, err := f.c.Reconcile(context.Background(), poolKey0)
	if err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	return res
}

// settle syncs and reconciles until a pass writes nothing, as the
// running controller would between events; it fails after 20 passes.
func (f *fixture) settle(t testing.TB) {
	t.Helper()
	for range 20 {
		f.sync(t)
		f.resetWrites()
		f.reconcile(t)
		if len(f.vms.Store.Writes())+len(f.pools.Store.Writes())+len(f.vmis.Store.Writes()) == 0 {
			f.resetWrites()
			return
		}
	}
	t.Fatal("the pool did not settle in 20 passes")
}

func (f *fixture) pool(t testing.TB) *apiv1.VirtualMachinePool {
	t.Helper()
	return f.pools.Get(t, "default", "web")
}

// updatePool changes the stored pool as a user's update would (generation
// bumped) and syncs the caches.
func (f *fixture) updatePool(t testing.TB, fn func(*apiv1.VirtualMachinePool)) {
	t.Helper()
	f.pools.Update(t, "default", "web", func(p *apiv1.VirtualMachinePool) {
		fn(p)
		p.Metadata.Generation++
	})
	f.sync(t)
}

// vmNames lists the stored VMs' names, sorted.
func (f *fixture) vmNames(t testing.TB) []string {
	t.Helper()
	vms, _, err := f.vms.Store.List(context.Background(), store.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, vm := range vms {
		out = append(out, vm.Metadata.Name)
	}
	slices.Sort(out)
	return out
}

// written lists "op name" of the VM writes since the last reset.
func (f *fixture) written() []string {
	var out []string
	for _, w := range f.vms.Store.Writes() {
		op := w.Op
		if op == "update" && w.Object.GetMetadata().GetDeletionTimestamp() != nil {
			op = "delete"
		}
		out = append(out, op+" "+w.Object.GetMetadata().GetName())
	}
	return out
}

func names(pool string, ordinals ...int) []string {
	out := make([]string, len(ordinals))
	for i, n := range ordinals {
		out[i] = apiv1.PoolVMName(pool, n)
	}
	slices.Sort(out)
	return out
}

func newPool(replicas int32) *apiv1.VirtualMachinePool {
	return &apiv1.VirtualMachinePool{
		Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: "web", Uid: "pool-uid", Generation: 1,
			Finalizers: []string{apiv1.FinalizerPool}},
		Spec: &apiv1.VirtualMachinePoolSpec{
			Replicas:       &replicas,
			Selector:       &apiv1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			MaxUnavailable: apiv1.DefaultMaxUnavailable,
			ScaleInOrder:   apiv1.DefaultScaleInOrder,
			VirtualMachineTemplate: &apiv1.VirtualMachineTemplateSpec{
				Metadata: &apiv1.ObjectMeta{
					Labels:      map[string]string{"app": "web", "tier": "front"},
					Annotations: map[string]string{"team": "blue"},
				},
				Spec: &apiv1.VirtualMachineSpec{
					RunStrategy: apiv1.RunStrategyAlways,
					Template: &apiv1.VirtualMachineInstanceTemplateSpec{
						Metadata: &apiv1.ObjectMeta{Labels: map[string]string{"app": "web"}},
						Spec: &apiv1.VirtualMachineInstanceSpec{
							Domain: &apiv1.DomainSpec{
								Memory:  &apiv1.Memory{Guest: "128Mi"},
								Devices: &apiv1.Devices{Interfaces: []*apiv1.Interface{{Name: "default"}}},
							},
						},
					},
				},
			},
		},
	}
}

// poolVM is the VM the pool makes as ordinal n, as stored: created at
// t0 + n seconds.
func poolVM(pool *apiv1.VirtualMachinePool, n int) *apiv1.VirtualMachine {
	vm := newVM(pool, apiv1.PoolVMName(pool.Metadata.Name, n), apiv1.PoolRevision(pool.Spec.VirtualMachineTemplate))
	vm.Metadata.Uid = fmt.Sprintf("vm-uid-%d", n)
	vm.Metadata.Generation = 1
	vm.Metadata.CreationTimestamp = timestamppb.New(t0.Add(time.Duration(n) * time.Second))
	return vm
}

// poolVMs are ordinals 0..n-1.
func poolVMs(pool *apiv1.VirtualMachinePool, n int) []*apiv1.VirtualMachine {
	out := make([]*apiv1.VirtualMachine, n)
	for i := range n {
		out[i] = poolVM(pool, i)
	}
	return out
}

// runAll plays the VM controller and the nodes, roughly, for every VM
// not being deleted, as if each were Always: a VM whose restart is queued
// loses its instance, and a VM without an instance gets one from its
// template, Running with Ready as given; the VM's Ready condition
// follows and its requests are done. vmcontroller_test.go uses the real
// VM controller instead.
func (f *fixture) runAll(t testing.TB, ready bool) {
	t.Helper()
	ctx := context.Background()
	vms, _, _ := f.vms.Store.List(ctx, store.ListOptions{})
	for _, vm := range vms {
		if vm.Metadata.DeletionTimestamp != nil {
			continue
		}
		vmi, err := f.vmis.Store.Get(ctx, "default", vm.Metadata.Name)
		if err == nil && restartQueued(vm, vmi) {
			if _, _, err := f.vmis.Store.Delete(ctx, "default", vmi.Metadata.Name, store.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			vmi = nil
		} else if err != nil {
			vmi = nil
		}
		if vmi == nil {
			f.startVMI(t, vm, ready)
		}
		f.vms.Update(t, "default", vm.Metadata.Name, func(vm *apiv1.VirtualMachine) {
			if vm.Status == nil {
				vm.Status = &apiv1.VirtualMachineStatus{}
			}
			vm.Status.StateChangeRequests = nil
			if vmi == nil {
				setReady(&vm.Status.Conditions, ready)
			}
		})
	}
	f.sync(t)
}

func restartQueued(vm *apiv1.VirtualMachine, vmi *apiv1.VirtualMachineInstance) bool {
	reqs := vm.GetStatus().GetStateChangeRequests()
	return len(reqs) > 0 && reqs[0].Action == apiv1.StateChangeStop && reqs[0].Uid == vmi.Metadata.Uid
}

// startVMI stores vm's instance, made from its template as the VM
// controller makes it, Running.
func (f *fixture) startVMI(t testing.TB, vm *apiv1.VirtualMachine, ready bool) *apiv1.VirtualMachineInstance {
	t.Helper()
	tmpl := vm.Spec.Template
	vmi := &apiv1.VirtualMachineInstance{
		Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: vm.Metadata.Name,
			Labels:          tmpl.GetMetadata().GetLabels(),
			OwnerReferences: []*apiv1.OwnerReference{{Kind: apiv1.KindVirtualMachine, Name: vm.Metadata.Name, Uid: vm.Metadata.Uid, Controller: true}}},
		Spec:   proto.Clone(tmpl.Spec).(*apiv1.VirtualMachineInstanceSpec),
		Status: &apiv1.VirtualMachineInstanceStatus{Phase: apiv1.PhaseRunning},
	}
	setReady(&vmi.Status.Conditions, ready)
	out, err := f.vmis.Store.Create(context.Background(), vmi)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// setReady changes the Ready condition of name's instance and VM.
func (f *fixture) setReady(t testing.TB, name string, ready bool) {
	t.Helper()
	f.vmis.Update(t, "default", name, func(vmi *apiv1.VirtualMachineInstance) { setReady(&vmi.Status.Conditions, ready) })
	f.vms.Update(t, "default", name, func(vm *apiv1.VirtualMachine) { setReady(&vm.Status.Conditions, ready) })
	f.sync(t)
}

func setReady(conds *[]*apiv1.Condition, ready bool) {
	s := apiv1.ConditionFalse
	if ready {
		s = apiv1.ConditionTrue
	}
	*conds = apiv1.SetCondition(*conds, &apiv1.Condition{Type: apiv1.ConditionReady, Status: s}, t0)
}

// restartRequested lists the VMs whose restart is queued, sorted.
func (f *fixture) restartRequested(t testing.TB) []string {
	t.Helper()
	ctx := context.Background()
	vms, _, _ := f.vms.Store.List(ctx, store.ListOptions{})
	var out []string
	for _, vm := range vms {
		if vmi, err := f.vmis.Store.Get(ctx, "default", vm.Metadata.Name); err == nil && restartQueued(vm, vmi) {
			out = append(out, vm.Metadata.Name)
		}
	}
	return out
}
