package export

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"
	clocktesting "k8s.io/utils/clock/testing"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller/controllertest"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
	"github.com/virtplane/terraform-provider-virtplane/internal/store/memstore"
)

var t0 = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

const vmUID = "0b8a4d5e-8a43-4a0e-a0d5-6f4c2f2a9c11"

type fixture struct {
	c       *Controller
	clock   *clocktesting.FakeClock
	exports controllertest.Cache[*apiv1.VirtualMachineExport]
	vms     controllertest.Cache[*apiv1.VirtualMachine]
	vmis    controllertest.Cache[*apiv1.VirtualMachineInstance]
	nodes   controllertest.Cache[*apiv1.Node]
	classes controllertest.Cache[*apiv1.StorageClass]
	all     []interface{ Sync(testing.TB) }
}

func newExport() *apiv1.VirtualMachineExport {
	return &apiv1.VirtualMachineExport{
		Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: "ex", Uid: "ex-uid", CreationTimestamp: timestamppb.New(t0)},
		Spec:     &apiv1.VirtualMachineExportSpec{SourceKind: apiv1.KindVirtualMachine, SourceName: "vm", TtlDuration: "2h"},
		Status: &apiv1.VirtualMachineExportStatus{Phase: apiv1.ExportPending, TokenSha256: apiv1.ExportTokenHash("t"),
			ExpirationTime: timestamppb.New(t0.Add(2 * time.Hour))},
	}
}

func newVM(volumes ...*apiv1.Volume) *apiv1.VirtualMachine {
	return &apiv1.VirtualMachine{
		Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: "vm", Uid: vmUID},
		Spec:     &apiv1.VirtualMachineSpec{Template: &apiv1.VirtualMachineInstanceTemplateSpec{Spec: &apiv1.VirtualMachineInstanceSpec{Volumes: volumes}}},
		Status:   &apiv1.VirtualMachineStatus{NodeName: "n1"},
	}
}

func persistent(name string) *apiv1.Volume {
	return &apiv1.Volume{Name: name, Persistent: &apiv1.PersistentVolume{Size: "1Gi"}}
}

func exportNode() *apiv1.Node {
	return &apiv1.Node{Metadata: &apiv1.ObjectMeta{Name: "n1"},
		Status: &apiv1.NodeStatus{ExportAddress: "192.0.2.1:8444", ExportCertificate: "CERT"}}
}

func newFixture(t *testing.T, vm *apiv1.VirtualMachine, node *apiv1.Node) *fixture {
	t.Helper()
	db := memstore.NewDB(func() time.Time { return t0 })
	var vms []*apiv1.VirtualMachine
	if vm != nil {
		vms = append(vms, vm)
	}
	var nodes []*apiv1.Node
	if node != nil {
		nodes = append(nodes, node)
	}
	f := &fixture{
		clock:   clocktesting.NewFakeClock(t0),
		exports: controllertest.NewCache(db, store.Exports, newExport()),
		vms:     controllertest.NewCache(db, store.VirtualMachines, vms...),
		vmis:    controllertest.NewCache(db, store.VirtualMachineInstances),
		nodes:   controllertest.NewCache(db, store.Nodes, nodes...),
	}
	classes := controllertest.NewCache(db, store.StorageClasses)
	f.classes = classes
	snaps := controllertest.NewCache(db, store.Snapshots)
	contents := controllertest.NewCache(db, store.SnapshotContents)
	f.all = []interface{ Sync(testing.TB) }{f.exports, f.vms, f.vmis, f.nodes, classes, snaps, contents}
	f.c = New(Options{Clock: f.clock}, Informers{Exports: f.exports.Informer, VMs: f.vms.Informer, VMIs: f.vmis.Informer,
		Nodes: f.nodes.Informer, Classes: classes.Informer, Snaps: snaps.Informer, Contents: contents.Informer},
		f.exports.Store, controllertest.Discard())
	return f
}

// reconcile syncs the caches and reconciles the export once.
func (f *fixture) reconcile(t *testing.T) (*apiv1.VirtualMachineExport, time.Duration) {
	t.Helper()
	for _, c := range f.all {
		c.Sync(t)
	}
	res, err := f.c.Reconcile(context.Background(), "default/ex")
	if err != nil {
		t.Fatal(err)
	}
	f.exports.Sync(t)
	return f.exports.Get(t, "default", "ex"), res.RequeueAfter
}

func reason(e *apiv1.VirtualMachineExport) string {
	return apiv1.FindCondition(e.GetStatus().GetConditions(), apiv1.ConditionReady).GetReason()
}

func TestStoppedVMIsServedByItsNode(t *testing.T) {
	f := newFixture(t, newVM(persistent("data"), &apiv1.Volume{Name: "boot", Image: &apiv1.ImageVolume{Name: "img"}}), exportNode())
	e, requeue := f.reconcile(t)
	st := e.GetStatus()
	if st.GetPhase() != apiv1.ExportReady || st.GetNodeName() != "n1" || e.GetMetadata().GetLabels()[apiv1.LabelNodeName] != "n1" ||
		st.GetSourceUid() != vmUID || st.GetCaCert() != "CERT" {
		t.Fatalf("export: %v labels %v", st, e.GetMetadata().GetLabels())
	}
	if len(st.GetVolumes()) != 1 || st.GetVolumes()[0].GetName() != "data" {
		t.Fatalf("volumes %v, want only the persistent one", st.GetVolumes())
	}
	if got, want := e.Link("data", apiv1.ExportFormatQcow2), "https://192.0.2.1:8444/v1/exports/default/ex/volumes/data/disk.qcow2"; got != want {
		t.Errorf("qcow2 link %q, want %q", got, want)
	}
	if requeue != 2*time.Hour {
		t.Errorf("requeued after %s, want at the expiry, 2h", requeue)
	}
	if st.GetTokenSha256() != apiv1.ExportTokenHash("t") {
		t.Errorf("token hash changed: %q", st.GetTokenSha256())
	}
}

func TestStartingTheVMEndsTheExport(t *testing.T) {
	f := newFixture(t, newVM(persistent("data")), exportNode())
	if e, _ := f.reconcile(t); e.GetStatus().GetPhase() != apiv1.ExportReady {
		t.Fatalf("phase %s", e.GetStatus().GetPhase())
	}
	if _, err := f.vmis.Store.Create(context.Background(), &apiv1.VirtualMachineInstance{Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: "vm"}}); err != nil {
		t.Fatal(err)
	}
	e, requeue := f.reconcile(t)
	if e.GetStatus().GetPhase() != apiv1.ExportTerminated || reason(e) != apiv1.ExportReasonVMStarted || requeue != 0 {
		t.Fatalf("after the start: %s %s requeue %s", e.GetStatus().GetPhase(), reason(e), requeue)
	}
	// The node keeps the label: it is the one to stop serving.
	if e.GetMetadata().GetLabels()[apiv1.LabelNodeName] != "n1" {
		t.Errorf("labels %v", e.GetMetadata().GetLabels())
	}
	// Terminated is final: the VM stopping again does not revive it.
	if _, _, err := f.vmis.Store.Delete(context.Background(), "default", "vm", store.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if e, _ := f.reconcile(t); e.GetStatus().GetPhase() != apiv1.ExportTerminated {
		t.Fatalf("after the stop: %s", e.GetStatus().GetPhase())
	}
}

func TestRunningVMKeepsTheExportPending(t *testing.T) {
	f := newFixture(t, newVM(persistent("data")), exportNode())
	if _, err := f.vmis.Store.Create(context.Background(), &apiv1.VirtualMachineInstance{Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: "vm"}}); err != nil {
		t.Fatal(err)
	}
	if e, _ := f.reconcile(t); e.GetStatus().GetPhase() != apiv1.ExportPending || reason(e) != apiv1.ExportReasonVMRunning {
		t.Fatalf("running VM: %s %s", e.GetStatus().GetPhase(), reason(e))
	}
}

func TestExportExpiresByTheClock(t *testing.T) {
	f := newFixture(t, newVM(persistent("data")), exportNode())
	f.reconcile(t)
	f.clock.Step(2 * time.Hour)
	if e, _ := f.reconcile(t); e.GetStatus().GetPhase() != apiv1.ExportTerminated || reason(e) != apiv1.ExportReasonExpired {
		t.Fatalf("at the expiry: %s %s", e.GetStatus().GetPhase(), reason(e))
	}
}

func TestExportWithoutAnythingToServe(t *testing.T) {
	for _, c := range []struct {
		name       string
		vm         *apiv1.VirtualMachine
		node       *apiv1.Node
		phase, why string
	}{
		{"no persistent volume", newVM(&apiv1.Volume{Name: "boot", Image: &apiv1.ImageVolume{Name: "img"}}), exportNode(), apiv1.ExportSkipped, apiv1.ExportReasonNoVolumes},
		{"no VM", nil, exportNode(), apiv1.ExportPending, apiv1.ExportReasonSourceGone},
		{"node serves no exports", newVM(persistent("data")), &apiv1.Node{Metadata: &apiv1.ObjectMeta{Name: "n1"}}, apiv1.ExportPending, apiv1.ExportReasonNoNode},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, c.vm, c.node)
			e, _ := f.reconcile(t)
			if e.GetStatus().GetPhase() != c.phase || reason(e) != c.why {
				t.Fatalf("%s %s, want %s %s", e.GetStatus().GetPhase(), reason(e), c.phase, c.why)
			}
			if len(e.GetStatus().GetVolumes()) != 0 || e.GetMetadata().GetLabels()[apiv1.LabelNodeName] != "" {
				t.Errorf("not served, yet volumes %v labels %v", e.GetStatus().GetVolumes(), e.GetMetadata().GetLabels())
			}
		})
	}
}

// An RBD volume is served by a node that serves exports and reaches its
// class: the VM's last node when it does, else another.
func TestRBDVolumeIsServedByANodeThatReachesTheClass(t *testing.T) {
	vm := newVM(&apiv1.Volume{Name: "data", Persistent: &apiv1.PersistentVolume{Size: "1Gi", StorageClass: "ceph"}})
	n1 := exportNode() // serves exports, but does not report the class
	f := newFixture(t, vm, n1)
	if _, err := f.nodes.Store.Create(context.Background(), &apiv1.Node{Metadata: &apiv1.ObjectMeta{Name: "n2"},
		Status: &apiv1.NodeStatus{ExportAddress: "192.0.2.2:8444", ExportCertificate: "CERT2",
			Storage: []*apiv1.NodeStorage{{Class: "ceph", Ready: true}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.classes.Store.Create(context.Background(), &apiv1.StorageClass{Metadata: &apiv1.ObjectMeta{Name: "ceph"},
		Spec: &apiv1.StorageClassSpec{Rbd: &apiv1.RBDStorage{Pool: "p"}}}); err != nil {
		t.Fatal(err)
	}
	e, _ := f.reconcile(t)
	if e.GetStatus().GetPhase() != apiv1.ExportReady || e.GetStatus().GetNodeName() != "n2" || e.GetStatus().GetCaCert() != "CERT2" ||
		e.GetStatus().GetVolumes()[0].GetStorageClass() != "ceph" {
		t.Fatalf("export %v", e.GetStatus())
	}
}
