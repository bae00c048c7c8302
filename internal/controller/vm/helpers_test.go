package vm

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller/controllertest"
	"github.com/virtplane/terraform-provider-virtplane/internal/informer"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
	"github.com/virtplane/terraform-provider-virtplane/internal/store/memstore"
)

var t0 = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

type fixture struct {
	c    *Controller
	vms  controllertest.Cache[*apiv1.VirtualMachine]
	vmis controllertest.Cache[*apiv1.VirtualMachineInstance]
	now  time.Time
}

func newFixture(t *testing.T, vm *apiv1.VirtualMachine, vmi *apiv1.VirtualMachineInstance) *fixture {
	t.Helper()
	f := &fixture{now: t0}
	clock := func() time.Time { return f.now }
	db := memstore.NewDB(clock)
	f.vms = controllertest.NewCache(db, store.VirtualMachines)
	f.vmis = controllertest.NewCache(db, store.VirtualMachineInstances)
	f.c = newController(Options{Clock: clock, Rand: func() float64 { return 0 }}, f.vms.Informer, f.vmis.Informer, f.vms.Store, f.vmis.Store,
		controllertest.Discard())
	f.seed(vm, vmi)
	return f
}

// seed puts objects in the store and the caches, as a synced informer would.
func (f *fixture) seed(vm *apiv1.VirtualMachine, vmi *apiv1.VirtualMachineInstance) {
	if vm != nil {
		f.vms.Store.Seed(vm)
		got, _ := f.vms.Store.Get(context.Background(), vm.Metadata.Namespace, vm.Metadata.Name)
		f.vms.Informer.Fill(got)
	}
	if vmi != nil {
		f.vmis.Store.Seed(vmi)
		got, _ := f.vmis.Store.Get(context.Background(), vmi.Metadata.Namespace, vmi.Metadata.Name)
		f.vmis.Informer.Fill(got)
	}
	f.vms.Store.ResetWrites()
	f.vmis.Store.ResetWrites()
}

// refresh makes the caches show the store, as the informers would.
func (f *fixture) refresh() {
	vms, _, _ := f.vms.Store.List(context.Background(), store.ListOptions{})
	f.vms.Informer.Fill(vms...)
	vmis, _, _ := f.vmis.Store.List(context.Background(), store.ListOptions{})
	for _, v := range vmis {
		f.c.exp.CreationObserved(informer.Key(v))
		if v.Metadata.DeletionTimestamp != nil {
			f.c.exp.DeletionObserved(informer.Key(v))
		}
	}
	if len(vmis) == 0 {
		f.c.exp.DeletionObserved("default/web")
	}
	f.vmis.Informer.Fill(vmis...)
}

func (f *fixture) reconcile(t *testing.T) time.Duration {
	t.Helper()
	res, err := f.c.Reconcile(context.Background(), "default/web")
	if err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	return res.RequeueAfter
}

func (f *fixture) vm(t *testing.T) *apiv1.VirtualMachine {
	t.Helper()
	return f.vms.Get(t, "default", "web")
}

// vmiAction summarises what the pass did to the VMI.
func (f *fixture) vmiAction() string {
	ws := f.vmis.Store.Writes()
	if len(ws) == 0 {
		return "none"
	}
	switch w := ws[0]; {
	case w.Op == "create":
		return "start"
	case w.Op == "delete" || w.Object.GetMetadata().GetDeletionTimestamp() != nil:
		return "delete"
	case len(w.Object.GetMetadata().GetFinalizers()) == 0:
		return "release" // finalizer handover of a final VMI that stays
	default:
		return "update"
	}
}

func newVM(strategy string) *apiv1.VirtualMachine {
	return &apiv1.VirtualMachine{
		Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: "web", Uid: "vm-uid", Generation: 1,
			Finalizers: []string{apiv1.FinalizerVMController}},
		Spec: &apiv1.VirtualMachineSpec{
			RunStrategy: strategy,
			Template: &apiv1.VirtualMachineInstanceTemplateSpec{
				Metadata: &apiv1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec: &apiv1.VirtualMachineInstanceSpec{
					Domain: &apiv1.DomainSpec{Memory: &apiv1.Memory{Guest: "128Mi"}},
				},
			},
		},
		Status: &apiv1.VirtualMachineStatus{},
	}
}

func newVMI(phase string, ran bool) *apiv1.VirtualMachineInstance {
	vmi := &apiv1.VirtualMachineInstance{
		Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: "web", Uid: "vmi-uid",
			Annotations:     map[string]string{apiv1.AnnotationVMGeneration: "1"},
			OwnerReferences: []*apiv1.OwnerReference{{Kind: apiv1.KindVirtualMachine, Name: "web", Uid: "vm-uid", Controller: true}},
			Finalizers:      []string{apiv1.FinalizerVMController}},
		Spec: &apiv1.VirtualMachineInstanceSpec{Domain: &apiv1.DomainSpec{Memory: &apiv1.Memory{Guest: "128Mi"}}},
		Status: &apiv1.VirtualMachineInstanceStatus{Phase: phase,
			PhaseTransitionTimestamps: []*apiv1.PhaseTransitionTimestamp{{Phase: apiv1.PhasePending, Time: timestamppb.New(t0)}}},
	}
	if ran {
		vmi.Status.PhaseTransitionTimestamps = append(vmi.Status.PhaseTransitionTimestamps,
			&apiv1.PhaseTransitionTimestamp{Phase: apiv1.PhaseRunning, Time: timestamppb.New(t0)})
	}
	return vmi
}

func startReq() *apiv1.StateChangeRequest {
	return &apiv1.StateChangeRequest{Action: apiv1.StateChangeStart}
}
func stopReq(uid string) *apiv1.StateChangeRequest {
	return &apiv1.StateChangeRequest{Action: apiv1.StateChangeStop, Uid: uid}
}
