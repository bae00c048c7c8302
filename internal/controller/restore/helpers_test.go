package restore

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller/controllertest"
	"github.com/virtplane/terraform-provider-virtplane/internal/informer"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
	"github.com/virtplane/terraform-provider-virtplane/internal/store/memstore"
)

var t0 = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

const restoreKey = "default/rest"

type fixture struct {
	c        *Controller
	restores controllertest.Cache[*apiv1.VirtualMachineRestore]
	snaps    controllertest.Cache[*apiv1.VirtualMachineSnapshot]
	contents controllertest.Cache[*apiv1.VirtualMachineSnapshotContent]
	vms      controllertest.Cache[*apiv1.VirtualMachine]
	vmis     controllertest.Cache[*apiv1.VirtualMachineInstance]
	now      time.Time
	// goneNodes are the nodes Options.NodeGone reports deleted.
	goneNodes map[string]bool
}

// newFixture holds the restore, the snapshot "snap" of VM web (uid
// vm-uid) with its content on node n1 (volume data copied), and the
// given VMs and instance.
func newFixture(t testing.TB, r *apiv1.VirtualMachineRestore, vmi *apiv1.VirtualMachineInstance, vms ...*apiv1.VirtualMachine) *fixture {
	t.Helper()
	f := &fixture{now: t0, goneNodes: map[string]bool{}}
	db := memstore.NewDB(func() time.Time { return f.now })
	f.restores = controllertest.NewCache(db, store.Restores, r)
	f.snaps = controllertest.NewCache(db, store.Snapshots, newSnapshot())
	f.contents = controllertest.NewCache(db, store.SnapshotContents, newContent())
	f.vms = controllertest.NewCache(db, store.VirtualMachines, vms...)
	f.vmis = controllertest.NewCache(db, store.VirtualMachineInstances)
	if vmi != nil {
		f.vmis.Store.Seed(vmi)
	}
	f.restart(t)
	return f
}

// restart replaces the controller with a fresh one over the same stores
// (a new leader).
func (f *fixture) restart(t testing.TB) {
	t.Helper()
	f.restores.Informer = newInformer(f.restores.Store)
	f.snaps.Informer = newInformer(f.snaps.Store)
	f.contents.Informer = newInformer(f.contents.Store)
	f.vms.Informer = newInformer(f.vms.Store)
	f.vmis.Informer = newInformer(f.vmis.Store)
	f.c = New(Options{Clock: func() time.Time { return f.now }, NodeGone: func(n string) bool { return f.goneNodes[n] }}, f.restores.Informer, f.snaps.Informer, f.contents.Informer,
		f.vms.Informer, f.vmis.Informer, f.restores.Store, f.vms.Store, f.contents.Store, controllertest.Discard())
	f.sync(t)
}

func newInformer[T store.Object](st *memstore.Store[T]) *informer.Informer[T] {
	return informer.New(st, store.ListOptions{}, controllertest.Discard())
}

func (f *fixture) sync(t testing.TB) {
	t.Helper()
	f.restores.Sync(t)
	f.snaps.Sync(t)
	f.contents.Sync(t)
	f.vms.Sync(t)
	f.vmis.Sync(t)
}

func (f *fixture) writes() int {
	n := len(f.restores.Store.Writes()) + len(f.vms.Store.Writes())
	f.restores.Store.ResetWrites()
	f.vms.Store.ResetWrites()
	return n
}

// settle syncs and reconciles until a pass writes nothing and returns
// that pass's result.
func (f *fixture) settle(t testing.TB) controller.Result {
	t.Helper()
	f.writes()
	for range 20 {
		f.sync(t)
		res, err := f.c.Reconcile(context.Background(), restoreKey)
		if err != nil {
			t.Fatalf("reconcile: %v", err)
		}
		if f.writes() == 0 {
			return res
		}
	}
	t.Fatal("the restore did not settle in 20 passes")
	return controller.Result{}
}

func (f *fixture) restore(t testing.TB) *apiv1.VirtualMachineRestore {
	t.Helper()
	return f.restores.Get(t, "default", "rest")
}

// vm is the stored VM name, nil when there is none.
func (f *fixture) vm(name string) *apiv1.VirtualMachine {
	vm, err := f.vms.Store.Get(context.Background(), "default", name)
	if err != nil {
		return nil
	}
	return vm
}

// node plays the snapshot's node on the restore.
func (f *fixture) node(t testing.TB, fn func(*apiv1.VirtualMachineRestoreStatus)) {
	t.Helper()
	f.restores.Update(t, "default", "rest", func(r *apiv1.VirtualMachineRestore) { fn(r.Status) })
}

func newRestore(target string) *apiv1.VirtualMachineRestore {
	return &apiv1.VirtualMachineRestore{
		Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: "rest", Uid: "rest-uid", Generation: 1,
			CreationTimestamp: timestamppb.New(t0)},
		Spec: &apiv1.VirtualMachineRestoreSpec{Target: target, Snapshot: "snap"},
	}
}

func newSnapshot() *apiv1.VirtualMachineSnapshot {
	return &apiv1.VirtualMachineSnapshot{
		Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: "snap", Uid: "snap-uid", Finalizers: []string{apiv1.FinalizerSnapshot}},
		Spec:     &apiv1.VirtualMachineSnapshotSpec{Source: "web"},
		Status: &apiv1.VirtualMachineSnapshotStatus{Phase: apiv1.SnapshotSucceeded, ReadyToUse: true,
			ContentName: apiv1.SnapshotContentName("snap-uid"), SourceUid: "vm-uid", NodeName: "n1"},
	}
}

func newContent() *apiv1.VirtualMachineSnapshotContent {
	src := sourceVM()
	return &apiv1.VirtualMachineSnapshotContent{
		Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: apiv1.SnapshotContentName("snap-uid"),
			Labels: map[string]string{apiv1.LabelNodeName: "n1"}, Finalizers: []string{apiv1.FinalizerSnapshotData}},
		Spec: &apiv1.VirtualMachineSnapshotContentSpec{
			SnapshotName: "snap", SnapshotUid: "snap-uid", NodeName: "n1", Volumes: []string{"data"},
			Source: &apiv1.VirtualMachine{
				Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: "web", Uid: "vm-uid",
					Labels: map[string]string{"app": "web"}, Annotations: map[string]string{"team": "blue"}},
				Spec: src.Spec,
			},
		},
		Status: &apiv1.VirtualMachineSnapshotContentStatus{Phase: apiv1.SnapshotSucceeded, ReadyToUse: true,
			VolumeBackups: []*apiv1.VolumeBackup{{VolumeName: "data", Path: "/data/snapshots/c/data.qcow2"}}},
	}
}

// sourceVM is web as snapshotted: running, on n1, 128Mi, two interfaces.
func sourceVM() *apiv1.VirtualMachine {
	return &apiv1.VirtualMachine{
		Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: "web", Uid: "vm-uid", Generation: 4,
			Finalizers: []string{apiv1.FinalizerVMController}},
		Spec: &apiv1.VirtualMachineSpec{
			RunStrategy: apiv1.RunStrategyAlways,
			Template: &apiv1.VirtualMachineInstanceTemplateSpec{
				Spec: &apiv1.VirtualMachineInstanceSpec{
					Domain: &apiv1.DomainSpec{Memory: &apiv1.Memory{Guest: "128Mi"}, Devices: &apiv1.Devices{
						Interfaces: []*apiv1.Interface{
							{Name: "default", MacAddress: "02:00:00:00:00:01"},
							{Name: "second", MacAddress: "02:00:00:00:00:02"},
						},
					}},
					Volumes: []*apiv1.Volume{{Name: "data", Persistent: &apiv1.PersistentVolume{Size: "1Gi"}}},
				},
			},
		},
		Status: &apiv1.VirtualMachineStatus{NodeName: "n1"},
	}
}

// changedVM is web after the snapshot: 256Mi, another volume, stopped.
func changedVM() *apiv1.VirtualMachine {
	vm := sourceVM()
	vm.Spec.Template.Spec.Domain.Memory.Guest = "256Mi"
	vm.Spec.Template.Spec.Volumes = append(vm.Spec.Template.Spec.Volumes, &apiv1.Volume{Name: "extra", Persistent: &apiv1.PersistentVolume{Size: "1Gi"}})
	vm.Spec.RunStrategy = apiv1.RunStrategyManual
	return vm
}

func runningVMI() *apiv1.VirtualMachineInstance {
	return &apiv1.VirtualMachineInstance{
		Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: "web", Uid: "vmi-uid",
			OwnerReferences: []*apiv1.OwnerReference{{Kind: apiv1.KindVirtualMachine, Name: "web", Uid: "vm-uid", Controller: true}}},
		Status: &apiv1.VirtualMachineInstanceStatus{Phase: apiv1.PhaseRunning, NodeName: "n1"},
	}
}

var storeDeleteAll = store.DeleteOptions{}
