package snapshot

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

const snapKey = "default/snap"

type fixture struct {
	c        *Controller
	db       *memstore.DB
	snaps    controllertest.Cache[*apiv1.VirtualMachineSnapshot]
	contents controllertest.Cache[*apiv1.VirtualMachineSnapshotContent]
	vms      controllertest.Cache[*apiv1.VirtualMachine]
	vmis     controllertest.Cache[*apiv1.VirtualMachineInstance]
	// classes hold "ceph" (rbd) and "nfs" (a shared filesystem).
	classes controllertest.Cache[*apiv1.StorageClass]
	now     time.Time
	// goneNodes are the nodes Options.NodeGone reports deleted.
	goneNodes map[string]bool
}

// newFixture stores the objects and runs a controller over them, its
// caches synced.
func newFixture(t testing.TB, snap *apiv1.VirtualMachineSnapshot, vm *apiv1.VirtualMachine, vmi *apiv1.VirtualMachineInstance) *fixture {
	t.Helper()
	f := &fixture{now: t0, goneNodes: map[string]bool{}}
	clock := func() time.Time { return f.now }
	f.db = memstore.NewDB(clock)
	f.snaps = controllertest.NewCache(f.db, store.Snapshots)
	f.contents = controllertest.NewCache(f.db, store.SnapshotContents)
	f.vms = controllertest.NewCache(f.db, store.VirtualMachines)
	f.vmis = controllertest.NewCache(f.db, store.VirtualMachineInstances)
	f.classes = controllertest.NewCache(f.db, store.StorageClasses,
		&apiv1.StorageClass{Metadata: &apiv1.ObjectMeta{Name: "ceph"}, Spec: &apiv1.StorageClassSpec{Rbd: &apiv1.RBDStorage{Pool: "vp"}}},
		&apiv1.StorageClass{Metadata: &apiv1.ObjectMeta{Name: "nfs"}, Spec: &apiv1.StorageClassSpec{SharedFilesystem: &apiv1.SharedFilesystemStorage{Path: "/mnt/nfs"}}})
	if snap != nil {
		f.snaps.Store.Seed(snap)
	}
	if vm != nil {
		f.vms.Store.Seed(vm)
	}
	if vmi != nil {
		f.vmis.Store.Seed(vmi)
	}
	f.restart(t)
	return f
}

// restart replaces the controller with a fresh one over the same stores,
// as a new leader (or a restarted server) would start.
func (f *fixture) restart(t testing.TB) {
	t.Helper()
	clock := func() time.Time { return f.now }
	f.snaps.Informer, f.contents.Informer = newInformer(f.snaps.Store), newInformer(f.contents.Store)
	f.vms.Informer, f.vmis.Informer = newInformer(f.vms.Store), newInformer(f.vmis.Store)
	f.classes.Informer = newInformer(f.classes.Store)
	f.c = New(Options{Clock: clock, NodeGone: func(n string) bool { return f.goneNodes[n] }, Classes: f.classes.Informer}, f.snaps.Informer, f.contents.Informer, f.vms.Informer, f.vmis.Informer,
		f.snaps.Store, f.contents.Store, f.vms.Store, controllertest.Discard())
	f.sync(t)
}

func newInformer[T store.Object](st *memstore.Store[T]) *informer.Informer[T] {
	return informer.New(st, store.ListOptions{}, controllertest.Discard())
}

// sync makes the caches show the stores, as the informers would.
func (f *fixture) sync(t testing.TB) {
	t.Helper()
	f.snaps.Sync(t)
	f.contents.Sync(t)
	f.vms.Sync(t)
	f.vmis.Sync(t)
	f.classes.Sync(t)
}

func (f *fixture) resetWrites() {
	f.snaps.Store.ResetWrites()
	f.contents.Store.ResetWrites()
	f.vms.Store.ResetWrites()
	f.vmis.Store.ResetWrites()
}

func (f *fixture) writes() int {
	return len(f.snaps.Store.Writes()) + len(f.contents.Store.Writes()) + len(f.vms.Store.Writes()) + len(f.vmis.Store.Writes())
}

// reconcile runs one pass; an error fails the test.
func (f *fixture) reconcile(t testing.TB) controller.Result {
	t.Helper()
	res, err := f.c.Reconcile(context.Background(), snapKey)
	if err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	return res
}

// settle syncs and reconciles until a pass writes nothing, as the running
// controller would between events, and returns that pass's result.
func (f *fixture) settle(t testing.TB) controller.Result {
	t.Helper()
	for range 20 {
		f.sync(t)
		f.resetWrites()
		res := f.reconcile(t)
		if f.writes() == 0 {
			return res
		}
	}
	t.Fatal("the snapshot did not settle in 20 passes")
	return controller.Result{}
}

func (f *fixture) snap(t testing.TB) *apiv1.VirtualMachineSnapshot {
	t.Helper()
	return f.snaps.Get(t, "default", "snap")
}

func (f *fixture) vm(t testing.TB) *apiv1.VirtualMachine {
	t.Helper()
	return f.vms.Get(t, "default", "web")
}

// content is the snapshot's content, nil when there is none.
func (f *fixture) content(t testing.TB) *apiv1.VirtualMachineSnapshotContent {
	t.Helper()
	ct, err := f.contents.Store.Get(context.Background(), "default", apiv1.SnapshotContentName("snap-uid"))
	if err != nil {
		return nil
	}
	return ct
}

// nodeDone plays the node: the content gets the outcome fn writes.
func (f *fixture) nodeDone(t testing.TB, fn func(*apiv1.VirtualMachineSnapshotContent)) {
	t.Helper()
	f.contents.Update(t, "default", apiv1.SnapshotContentName("snap-uid"), fn)
}

func succeeded(vols ...string) func(*apiv1.VirtualMachineSnapshotContent) {
	return func(ct *apiv1.VirtualMachineSnapshotContent) {
		ct.Status = &apiv1.VirtualMachineSnapshotContentStatus{
			Phase: apiv1.SnapshotSucceeded, ReadyToUse: true, CreationTime: timestamppb.New(t0.Add(time.Second)),
			Indications: []string{apiv1.IndicationOnline, apiv1.IndicationNoGuestAgent},
		}
		for _, v := range vols {
			ct.Status.VolumeBackups = append(ct.Status.VolumeBackups, &apiv1.VolumeBackup{VolumeName: v, Path: "/x/" + v + ".qcow2"})
		}
	}
}

func newSnapshot() *apiv1.VirtualMachineSnapshot {
	return &apiv1.VirtualMachineSnapshot{
		Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: "snap", Uid: "snap-uid", Generation: 1,
			CreationTimestamp: timestamppb.New(t0)},
		Spec: &apiv1.VirtualMachineSnapshotSpec{Source: "web", DeletionPolicy: apiv1.DeletionPolicyDelete},
	}
}

// newVM is a VM with a persistent volume, an image volume and a
// cloud-init seed, last run on node (none: never ran).
func newVM(node string) *apiv1.VirtualMachine {
	return &apiv1.VirtualMachine{
		Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: "web", Uid: "vm-uid", Generation: 2,
			Labels: map[string]string{"app": "web"}, Annotations: map[string]string{"team": "blue"},
			Finalizers: []string{apiv1.FinalizerVMController}},
		Spec: &apiv1.VirtualMachineSpec{
			RunStrategy: apiv1.RunStrategyAlways,
			Template: &apiv1.VirtualMachineInstanceTemplateSpec{
				Spec: &apiv1.VirtualMachineInstanceSpec{
					Domain: &apiv1.DomainSpec{Memory: &apiv1.Memory{Guest: "128Mi"}},
					Volumes: []*apiv1.Volume{
						{Name: "root", Image: &apiv1.ImageVolume{Name: "cirros"}},
						{Name: "data", Persistent: &apiv1.PersistentVolume{Size: "1Gi"}},
						{Name: "seed", CloudInitNoCloud: &apiv1.CloudInitNoCloud{UserData: "#cloud-config"}},
					},
				},
			},
		},
		Status: &apiv1.VirtualMachineStatus{NodeName: node},
	}
}

// newVMI is web's instance, running on node.
func newVMI(node string) *apiv1.VirtualMachineInstance {
	return &apiv1.VirtualMachineInstance{
		Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: "web", Uid: "vmi-uid",
			OwnerReferences: []*apiv1.OwnerReference{{Kind: apiv1.KindVirtualMachine, Name: "web", Uid: "vm-uid", Controller: true}}},
		Status: &apiv1.VirtualMachineInstanceStatus{Phase: apiv1.PhaseRunning, NodeName: node},
	}
}

func progressing(s *apiv1.VirtualMachineSnapshot) *apiv1.Condition {
	return apiv1.FindCondition(s.GetStatus().GetConditions(), ConditionProgressing)
}
