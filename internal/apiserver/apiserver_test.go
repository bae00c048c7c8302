package apiserver

import (
	"context"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/etcdserver"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

type fixture struct {
	vms   apiv1.VirtualMachinesClient
	vmis  apiv1.VirtualMachineInstancesClient
	nodes apiv1.NodesClient
	st    Stores
	now   time.Time
	srv   *Server
	conn  grpc.ClientConnInterface
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	return newFixtureWith(t, Options{})
}

// newFixtureWith serves the API with opts (its clock is the fixture's).
func newFixtureWith(t *testing.T, opts Options) *fixture {
	t.Helper()
	ctx := context.Background()
	srv, err := etcdserver.Start(ctx, etcdserver.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	c := srv.Client()
	st := NewStores(c, store.Options{Prefix: "/test/registry"})
	f := &fixture{st: st, now: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)}
	opts.Clock = func() time.Time { return f.now }
	f.srv = New(st, opts)
	conn := testutil.ServeGRPC(t, f.srv.Register)
	f.conn = conn
	f.vms = apiv1.NewVirtualMachinesClient(conn)
	f.vmis = apiv1.NewVirtualMachineInstancesClient(conn)
	f.nodes = apiv1.NewNodesClient(conn)
	return f
}

func validVM(name string) *apiv1.VirtualMachine {
	return &apiv1.VirtualMachine{
		Metadata: &apiv1.ObjectMeta{Name: name, Labels: map[string]string{"app": "web"}},
		Spec: &apiv1.VirtualMachineSpec{
			RunStrategy: "Always",
			Template: &apiv1.VirtualMachineInstanceTemplateSpec{Spec: &apiv1.VirtualMachineInstanceSpec{
				Domain: &apiv1.DomainSpec{
					Cpu:    &apiv1.CPU{Cores: 1},
					Memory: &apiv1.Memory{Guest: "1024Mi"},
					Devices: &apiv1.Devices{Disks: []*apiv1.Disk{{
						Name: "root", Disk: &apiv1.DiskTarget{Bus: "virtio"},
					}}},
				},
				Volumes: []*apiv1.Volume{{Name: "root", Image: &apiv1.ImageVolume{Name: "debian.qcow2"}}},
			}},
		},
	}
}

func code(err error) codes.Code { return status.Code(err) }

func TestCreateDefaultsAndOwnsServerFields(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	in := validVM("web")
	in.Metadata.Uid = "client-chosen"
	in.Metadata.Finalizers = []string{"x"}
	in.Status = &apiv1.VirtualMachineStatus{PrintableStatus: "Running", Ready: true}
	out, err := f.vms.Create(ctx, &apiv1.CreateVirtualMachineRequest{Vm: in})
	if err != nil {
		t.Fatal(err)
	}
	m := out.Metadata
	if m.Namespace != "default" || m.Uid == "" || m.Uid == "client-chosen" || m.ResourceVersion == 0 || m.Generation != 1 || m.CreationTimestamp == nil {
		t.Fatalf("metadata not server-owned: %v", m)
	}
	if len(m.Finalizers) != 0 || out.Status.GetReady() || out.Status.GetPrintableStatus() != "" {
		t.Fatalf("client set server fields: %v %v", m.Finalizers, out.Status)
	}
	if g := out.Spec.Template.Spec.Domain.Memory.Guest; g != "1Gi" {
		t.Fatalf("memory not canonical: %q", g)
	}
	got, err := f.vms.Get(ctx, &apiv1.GetVirtualMachineRequest{Key: &apiv1.ObjectKey{Name: "web"}})
	if err != nil || !proto.Equal(got, out) {
		t.Fatalf("get: %v %v", err, got)
	}
	if _, err := f.vms.Create(ctx, &apiv1.CreateVirtualMachineRequest{Vm: validVM("web")}); code(err) != codes.AlreadyExists {
		t.Fatalf("duplicate create: %v", err)
	}
	if _, err := f.vms.Get(ctx, &apiv1.GetVirtualMachineRequest{Key: &apiv1.ObjectKey{Name: "nope"}}); code(err) != codes.NotFound {
		t.Fatalf("get missing: %v", err)
	}
}

func TestCreateInvalidNamesFields(t *testing.T) {
	f := newFixture(t)
	vm := validVM("Bad_Name")
	vm.Spec.RunStrategy = "always"
	vm.Spec.Template.Spec.Domain.Memory.Guest = "1GB"
	_, err := f.vms.Create(context.Background(), &apiv1.CreateVirtualMachineRequest{Vm: vm})
	if code(err) != codes.InvalidArgument {
		t.Fatalf("want InvalidArgument, got %v", err)
	}
	st, _ := status.FromError(err)
	fields := map[string]bool{}
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok {
			for _, v := range br.FieldViolations {
				fields[v.Field] = true
			}
		}
	}
	for _, want := range []string{"metadata.name", "spec.run_strategy", "spec.template.spec.domain.memory.guest"} {
		if !fields[want] {
			t.Errorf("no violation for %s in %v (%v)", want, fields, err)
		}
	}
	// Nothing was stored.
	list, err := f.vms.List(context.Background(), &apiv1.ListVirtualMachinesRequest{})
	if err != nil || len(list.Items) != 0 {
		t.Fatalf("list after invalid create: %v %v", err, list)
	}
}

func TestUpdateCASGenerationAndStatus(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	created, err := f.vms.Create(ctx, &apiv1.CreateVirtualMachineRequest{Vm: validVM("web")})
	if err != nil {
		t.Fatal(err)
	}
	// The controller's status must survive user updates.
	if _, err := f.st.VMs.GuaranteedUpdate(ctx, "default", "web", func(vm *apiv1.VirtualMachine) (*apiv1.VirtualMachine, error) {
		vm.Status.PrintableStatus = "Running"
		return vm, nil
	}); err != nil {
		t.Fatal(err)
	}
	cur, _ := f.vms.Get(ctx, &apiv1.GetVirtualMachineRequest{Key: &apiv1.ObjectKey{Name: "web"}})

	// Stale version: Aborted.
	stale := proto.Clone(created).(*apiv1.VirtualMachine)
	stale.Spec.RunStrategy = "Halted"
	if _, err := f.vms.Update(ctx, &apiv1.UpdateVirtualMachineRequest{Vm: stale}); code(err) != codes.Aborted {
		t.Fatalf("stale update: %v", err)
	}
	// No version: InvalidArgument.
	stale.Metadata.ResourceVersion = 0
	if _, err := f.vms.Update(ctx, &apiv1.UpdateVirtualMachineRequest{Vm: stale}); code(err) != codes.InvalidArgument {
		t.Fatalf("versionless update: %v", err)
	}

	// Label-only change: no generation bump, status kept.
	upd := proto.Clone(cur).(*apiv1.VirtualMachine)
	upd.Metadata.Labels["tier"] = "front"
	upd.Status = nil
	out, err := f.vms.Update(ctx, &apiv1.UpdateVirtualMachineRequest{Vm: upd})
	if err != nil {
		t.Fatal(err)
	}
	if out.Metadata.Generation != 1 || out.Status.PrintableStatus != "Running" || out.Metadata.Labels["tier"] != "front" {
		t.Fatalf("label update: %v", out)
	}
	// Spec change bumps generation.
	upd = proto.Clone(out).(*apiv1.VirtualMachine)
	upd.Spec.RunStrategy = "Halted"
	out2, err := f.vms.Update(ctx, &apiv1.UpdateVirtualMachineRequest{Vm: upd})
	if err != nil {
		t.Fatal(err)
	}
	if out2.Metadata.Generation != 2 || out2.Metadata.ResourceVersion <= out.Metadata.ResourceVersion {
		t.Fatalf("spec update: %v", out2.Metadata)
	}
	// Same content again: no write.
	out3, err := f.vms.Update(ctx, &apiv1.UpdateVirtualMachineRequest{Vm: out2})
	if err != nil || out3.Metadata.ResourceVersion != out2.Metadata.ResourceVersion {
		t.Fatalf("no-op update wrote: %v %v", err, out3.GetMetadata())
	}
	// Renaming through update is not possible.
	upd = proto.Clone(out2).(*apiv1.VirtualMachine)
	upd.Metadata.Uid = "other"
	if _, err := f.vms.Update(ctx, &apiv1.UpdateVirtualMachineRequest{Vm: upd}); code(err) != codes.InvalidArgument {
		t.Fatalf("uid change: %v", err)
	}
}

func TestDeleteHonoursFinalizers(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if _, err := f.vms.Create(ctx, &apiv1.CreateVirtualMachineRequest{Vm: validVM("web")}); err != nil {
		t.Fatal(err)
	}
	// A controller put a finalizer on it.
	if _, err := f.st.VMs.GuaranteedUpdate(ctx, "default", "web", func(vm *apiv1.VirtualMachine) (*apiv1.VirtualMachine, error) {
		vm.Metadata.Finalizers = []string{"virtplane.io/vm-controller"}
		return vm, nil
	}); err != nil {
		t.Fatal(err)
	}
	key := &apiv1.ObjectKey{Name: "web"}
	if _, err := f.vms.Delete(ctx, &apiv1.DeleteVirtualMachineRequest{Key: key, Options: &apiv1.DeleteOptions{Uid: "wrong"}}); code(err) == codes.OK {
		t.Fatal("delete with wrong uid precondition succeeded")
	}
	out, err := f.vms.Delete(ctx, &apiv1.DeleteVirtualMachineRequest{Key: key})
	if err != nil || out.Metadata.DeletionTimestamp == nil {
		t.Fatalf("delete with finalizer: %v %v", err, out.GetMetadata())
	}
	if _, err := f.vms.Get(ctx, &apiv1.GetVirtualMachineRequest{Key: key}); err != nil {
		t.Fatalf("terminating VM gone early: %v", err)
	}
	if _, err := f.st.VMs.GuaranteedUpdate(ctx, "default", "web", func(vm *apiv1.VirtualMachine) (*apiv1.VirtualMachine, error) {
		vm.Metadata.Finalizers = nil
		return vm, nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.vms.Get(ctx, &apiv1.GetVirtualMachineRequest{Key: key}); code(err) != codes.NotFound {
		t.Fatalf("VM still there after last finalizer: %v", err)
	}
}

func TestWatchStream(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := f.vms.Create(ctx, &apiv1.CreateVirtualMachineRequest{Vm: validVM("a")}); err != nil {
		t.Fatal(err)
	}
	w, err := f.vms.Watch(ctx, &apiv1.WatchVirtualMachinesRequest{Options: &apiv1.WatchOptions{}})
	if err != nil {
		t.Fatal(err)
	}
	expect := func(typ apiv1.EventType, name string) *apiv1.VirtualMachineEvent {
		t.Helper()
		ev, err := w.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type != typ || (name != "" && ev.Object.GetMetadata().GetName() != name) {
			t.Fatalf("want %v %s, got %v %s", typ, name, ev.Type, ev.Object.GetMetadata().GetName())
		}
		return ev
	}
	expect(apiv1.EventType_ADDED, "a")
	expect(apiv1.EventType_SYNCED, "")
	if _, err := f.vms.Create(ctx, &apiv1.CreateVirtualMachineRequest{Vm: validVM("b")}); err != nil {
		t.Fatal(err)
	}
	expect(apiv1.EventType_ADDED, "b")
	if _, err := f.vms.Delete(ctx, &apiv1.DeleteVirtualMachineRequest{Key: &apiv1.ObjectKey{Name: "a"}}); err != nil {
		t.Fatal(err)
	}
	expect(apiv1.EventType_DELETED, "a")

	// Errors on a server stream surface at the first Recv.
	ws, err := f.vms.Watch(ctx, &apiv1.WatchVirtualMachinesRequest{Options: &apiv1.WatchOptions{LabelSelector: "a in in"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ws.Recv(); code(err) != codes.InvalidArgument {
		t.Fatalf("bad selector: %v", err)
	}
}

func TestNodeRegisterAndHeartbeat(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	reg := &apiv1.Node{
		Metadata: &apiv1.ObjectMeta{Name: "host-1", Labels: map[string]string{"node.virtplane.io/zone": "a"}},
		Status: &apiv1.NodeStatus{
			Capacity:    map[string]string{"cpu": "2", "memory": "24Gi"},
			Allocatable: map[string]string{"cpu": "2", "memory": "23Gi"},
			Schedulable: true,
			NodeInfo:    &apiv1.NodeInfo{Hostname: "host-1", AgentVersion: "dev"},
		},
	}
	n, err := f.nodes.Register(ctx, &apiv1.RegisterNodeRequest{Node: reg})
	if err != nil {
		t.Fatal(err)
	}
	ready := apiv1.FindCondition(n.Status.Conditions, "Ready")
	if ready.GetStatus() != apiv1.ConditionTrue || !n.Status.Heartbeat.AsTime().Equal(f.now) {
		t.Fatalf("registered node: %v", n.Status)
	}
	if got := n.Status.LeaseExpiry.AsTime().Sub(f.now); got != 40*time.Second {
		t.Fatalf("lease %v", got)
	}
	// Operators' spec survives re-registration.
	if _, err := f.st.Nodes.GuaranteedUpdate(ctx, "", "host-1", func(n *apiv1.Node) (*apiv1.Node, error) {
		n.Spec.Unschedulable = true
		return n, nil
	}); err != nil {
		t.Fatal(err)
	}
	f.now = f.now.Add(10 * time.Second)
	n2, err := f.nodes.Register(ctx, &apiv1.RegisterNodeRequest{Node: reg})
	if err != nil || !n2.Spec.Unschedulable || n2.Metadata.Uid != n.Metadata.Uid {
		t.Fatalf("re-register: %v %v", err, n2)
	}
	f.now = f.now.Add(10 * time.Second)
	hb, err := f.nodes.Heartbeat(ctx, &apiv1.HeartbeatRequest{Name: "host-1", Schedulable: true})
	if err != nil || hb.LeaseDurationSeconds != 40 || hb.HeartbeatIntervalSeconds != 10 {
		t.Fatalf("heartbeat: %v %v", err, hb)
	}
	n3, _ := f.nodes.Get(ctx, &apiv1.GetNodeRequest{Name: "host-1"})
	if !n3.Status.Heartbeat.AsTime().Equal(f.now) || n3.Status.Allocatable["memory"] != "23Gi" {
		t.Fatalf("after heartbeat: %v", n3.Status)
	}
	if _, err := f.nodes.Heartbeat(ctx, &apiv1.HeartbeatRequest{Name: "ghost"}); code(err) != codes.NotFound {
		t.Fatalf("heartbeat of unknown node: %v", err)
	}
	bad := proto.Clone(reg).(*apiv1.Node)
	bad.Metadata.Name = "Not A Name"
	if _, err := f.nodes.Register(ctx, &apiv1.RegisterNodeRequest{Node: bad}); code(err) != codes.InvalidArgument {
		t.Fatalf("bad node name: %v", err)
	}
	list, err := f.nodes.List(ctx, &apiv1.ListNodesRequest{LabelSelector: "node.virtplane.io/zone=a"})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("list nodes: %v %v", err, list)
	}
}
