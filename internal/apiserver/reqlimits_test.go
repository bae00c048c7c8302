package apiserver

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// The size table names methods; methods that share a request type share
// a limit (the codec sees only the type); nothing larger than the largest
// limit is read; the largest legitimate requests fit their methods.
func TestRequestLimits(t *testing.T) {
	methods := map[string]bool{}
	byType := map[protoreflect.FullName][]string{}
	for _, sd := range apiv1.Services() {
		ms := sd.Methods()
		for i := range ms.Len() {
			full := "/" + string(sd.FullName()) + "/" + string(ms.Get(i).Name())
			methods[full] = true
			in := ms.Get(i).Input().FullName()
			byType[in] = append(byType[in], full)
		}
	}
	largest := 0
	for m, n := range requestLimits {
		if !methods[m] {
			t.Errorf("requestLimits names %s, which is no method", m)
		}
		if n <= smallRequest {
			t.Errorf("%s: a limit of %d, no more than every method's %d", m, n, smallRequest)
		}
		largest = max(largest, n)
	}
	for in, ms := range byType {
		for _, m := range ms[1:] {
			if requestLimit(m) != requestLimit(ms[0]) {
				t.Errorf("%s and %s take %s but have different limits", ms[0], m, in)
			}
		}
		if got := typeLimits[in].bytes; got != requestLimit(ms[0]) {
			t.Errorf("%s: the codec's limit is %d, the methods' %d", in, got, requestLimit(ms[0]))
		}
	}
	if DefaultMaxRecvMsgSize != largest {
		t.Errorf("DefaultMaxRecvMsgSize is %d, the largest method limit %d", DefaultMaxRecvMsgSize, largest)
	}

	for _, tc := range []struct {
		method string
		req    proto.Message
	}{
		{apiv1.VirtualMachines_Create_FullMethodName, &apiv1.CreateVirtualMachineRequest{Vm: largestVM()}},
		{apiv1.VirtualMachines_Update_FullMethodName, &apiv1.UpdateVirtualMachineRequest{Vm: largestVM()}},
		{apiv1.ReplicaSets_Create_FullMethodName, &apiv1.CreateReplicaSetRequest{ReplicaSet: &apiv1.VirtualMachineInstanceReplicaSet{
			Metadata: largestVM().Metadata, Spec: &apiv1.VirtualMachineInstanceReplicaSetSpec{Template: largestVM().Spec.Template}}}},
		{apiv1.Images_Create_FullMethodName, &apiv1.CreateImageRequest{Image: &apiv1.Image{Metadata: largestMeta(),
			Spec: &apiv1.ImageSpec{Url: "https://example.com/" + strings.Repeat("u", 2000), Sha256: strings.Repeat("0", 64), Format: "qcow2"}}}},
		{apiv1.Migrations_Create_FullMethodName, &apiv1.CreateMigrationRequest{Migration: &apiv1.VirtualMachineInstanceMigration{
			Metadata: largestMeta(), Spec: &apiv1.VirtualMachineInstanceMigrationSpec{VmiName: strings.Repeat("n", 63), AddedNodeSelector: largestMeta().Labels}}}},
		{apiv1.Nodes_Register_FullMethodName, &apiv1.RegisterNodeRequest{Node: largestNode()}},
		{apiv1.Nodes_Heartbeat_FullMethodName, &apiv1.HeartbeatRequest{Name: largestNode().Metadata.Name, Images: &apiv1.NodeImageList{Items: largestNode().Status.Images},
			NetworkInventory: &apiv1.NodeNetworkInventory{Bridges: largestNode().Status.Bridges, Networks: largestNode().Status.Networks}}},
		{apiv1.VirtualMachineInstances_UpdateStatus_FullMethodName, &apiv1.UpdateVirtualMachineInstanceStatusRequest{Vmi: largestVMI()}},
		{apiv1.VirtualMachineInstances_List_FullMethodName, &apiv1.ListVirtualMachineInstancesRequest{Options: &apiv1.ListOptions{LabelSelector: strings.Repeat("s", 8<<10)}}},
		{apiv1.Images_UpdateNodeStatus_FullMethodName, &apiv1.UpdateImageNodeStatusRequest{Name: strings.Repeat("i", 253),
			Status: &apiv1.ImageNodeStatus{Node: strings.Repeat("n", 253), Message: strings.Repeat("m", validation.MaxStatusMessageLen)}}},
		{apiv1.Consoles_Serve_FullMethodName, &apiv1.ConsoleOutput{Data: make([]byte, 32<<10), SessionId: strings.Repeat("s", 64)}},
	} {
		n, limit := proto.Size(tc.req), requestLimit(tc.method)
		t.Logf("%s: the largest legitimate request is %d bytes, the limit %d", tc.method, n, limit)
		if n > limit {
			t.Errorf("%s: the largest legitimate request is %d bytes, over the method's limit of %d", tc.method, n, limit)
		}
	}
}

// largestMeta is metadata with labels and annotations at their limits.
func largestMeta() *apiv1.ObjectMeta {
	m := largestVM().Metadata
	m.Name, m.Namespace = strings.Repeat("n", 63), "default"
	return m
}

// largestNode is a registration with every list at its limit.
func largestNode() *apiv1.Node {
	n := limitNode(strings.Repeat("n", 253))
	n.Metadata.Labels = largestMeta().Labels
	for i := 0; validation.NodeImageListSize(n.Status.Images) <= validation.MaxNodeImageListBytes-4200; i++ {
		n.Status.Images = append(n.Status.Images, &apiv1.NodeImage{Name: fmt.Sprintf("%s%05d.qcow2", strings.Repeat("i", 4000), i),
			Format: "qcow2", Sha256: strings.Repeat("0", 64), VirtualSizeBytes: 1 << 40, SizeBytes: 1 << 40})
	}
	for i := range validation.MaxNodeBridges {
		n.Status.Bridges = append(n.Status.Bridges, fmt.Sprintf("br%013d", i))
	}
	for i := range validation.MaxNodeNetworks {
		n.Status.Networks = append(n.Status.Networks, fmt.Sprintf("%s%013d", strings.Repeat("n", 50), i))
	}
	return n
}

// largestVMI is largestVM's instance with a status a node writes during
// a migration (the target's domain XML at its limit).
func largestVMI() *apiv1.VirtualMachineInstance {
	vm := largestVM()
	return &apiv1.VirtualMachineInstance{
		Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: "largest", Labels: vm.Spec.Template.Metadata.Labels,
			Annotations: vm.Spec.Template.Metadata.Annotations},
		Spec: vm.Spec.Template.Spec,
		Status: &apiv1.VirtualMachineInstanceStatus{Phase: apiv1.PhaseRunning, NodeName: "node-a",
			MigrationState: &apiv1.MigrationState{TargetDomainXml: strings.Repeat("x", 256<<10)}},
	}
}

// refusals is virtplane_api_refused_total of method and reason.
func refusals(e *secEnv, method, reason string) float64 {
	e.t.Helper()
	svc, m := splitMethod(method)
	want := map[string]string{"service": svc, "method": m, "reason": reason}
	mfs, err := e.reg.Gather()
	if err != nil {
		e.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "virtplane_api_refused_total" {
			continue
		}
	metrics:
		for _, mt := range mf.GetMetric() {
			for _, l := range mt.GetLabel() {
				if want[l.GetName()] != l.GetValue() {
					continue metrics
				}
			}
			return mt.GetCounter().GetValue()
		}
	}
	return 0
}

// A node's call of a method it may not call is refused before its body is
// read: the server reads no request of it (before, grpc read and decoded
// it, and the interceptor refused it after).
func TestForbiddenCallsAreRefusedBeforeTheBodyIsRead(t *testing.T) {
	e := newSecEnv(t, Limits{})
	a := e.join("node-a")
	big := vmWithAnnotation(1 << 20)
	for range 20 {
		_, err := a.c.VMs.Create(ctx(), &apiv1.CreateVirtualMachineRequest{Vm: big})
		wantCode(t, "a node creating a VM", err, codes.PermissionDenied)
	}
	w, err := a.c.Pools.Watch(ctx(), &apiv1.WatchPoolsRequest{})
	if err == nil {
		_, err = w.Recv()
	}
	wantCode(t, "a node watching pools", err, codes.PermissionDenied)
	for _, m := range []string{apiv1.VirtualMachines_Create_FullMethodName, apiv1.Pools_Watch_FullMethodName} {
		if n := e.payloads.count(m); n != 0 {
			t.Errorf("%s: the server read %d requests of a node that may not call it", m, n)
		}
	}
	if n := refusals(e, apiv1.VirtualMachines_Create_FullMethodName, "forbidden"); n != 20 {
		t.Errorf("%v forbidden creates counted, want 20", n)
	}
	// The node's own methods still work.
	if _, err := a.c.Nodes.Heartbeat(ctx(), &apiv1.HeartbeatRequest{Name: "node-a"}); status.Code(err) != codes.NotFound {
		t.Fatalf("heartbeat of an unregistered node: %v", err)
	}
}

// A request over its method's limit is refused before it is decoded, with
// the limit in the message; one within it goes through.
func TestRequestOverItsMethodsLimit(t *testing.T) {
	e := newSecEnv(t, Limits{})
	admin := e.admin()
	key := &apiv1.ObjectKey{Namespace: "default", Name: strings.Repeat("x", smallRequest)}
	_, err := admin.VMs.Get(ctx(), &apiv1.GetVirtualMachineRequest{Key: key})
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), fmt.Sprintf("VirtualMachines/Get takes requests of at most %d bytes", smallRequest)) {
		t.Fatalf("a get of %d bytes: %v, want ResourceExhausted naming the limit", smallRequest, clipErr(err))
	}
	if n := e.payloads.decoded(apiv1.VirtualMachines_Get_FullMethodName); n != 0 {
		t.Fatalf("the server decoded %d oversized requests", n)
	}
	if n := refusals(e, apiv1.VirtualMachines_Get_FullMethodName, "size"); n != 1 {
		t.Fatalf("%v size refusals counted, want 1", n)
	}
	// A create over the object limit: the codec refuses it.
	_, err = admin.VMs.Create(ctx(), &apiv1.CreateVirtualMachineRequest{Vm: vmWithAnnotation(objectRequest + 1)})
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "VirtualMachines/Create takes requests of at most") {
		t.Fatalf("a create over the object limit: %v, want ResourceExhausted naming the limit", clipErr(err))
	}
	if n := e.payloads.decoded(apiv1.VirtualMachines_Create_FullMethodName); n != 0 {
		t.Fatalf("the server decoded %d oversized creates", n)
	}
	// A stream's request over its limit: refused by the stream's RecvMsg
	// (oversizedStream), not handed to the handler empty.
	w, err := admin.VMs.Watch(ctx(), &apiv1.WatchVirtualMachinesRequest{Options: &apiv1.WatchOptions{LabelSelector: strings.Repeat("s", smallRequest)}})
	if err == nil {
		_, err = w.Recv()
	}
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "VirtualMachines/Watch takes requests of at most") {
		t.Fatalf("a watch of %d bytes: %v, want ResourceExhausted naming the limit", smallRequest, clipErr(err))
	}
	if n := e.payloads.decoded(apiv1.VirtualMachines_Watch_FullMethodName); n != 0 {
		t.Fatalf("the server decoded %d oversized watch requests", n)
	}
	// Within the limit: validation answers, naming the field.
	_, err = admin.VMs.Create(ctx(), &apiv1.CreateVirtualMachineRequest{Vm: vmWithAnnotation(objectRequest - 1<<10)})
	wantCode(t, "a create within the limit with too many annotations", err, codes.InvalidArgument)
	if !strings.Contains(err.Error(), "metadata.annotations") {
		t.Fatalf("want the field named: %v", clipErr(err))
	}
	// Every refused message left the codec's side table as its call was
	// refused: nothing is kept of it.
	left := 0
	e.srv.oversize.m.Range(func(any, any) bool { left++; return true })
	if left != 0 {
		t.Fatalf("%d refused request messages still held by the server", left)
	}
}

// gate holds calls of one method in its handler until opened.
type gate struct {
	method  string
	entered chan struct{}
	open    chan struct{}
}

func newGate(method string) *gate {
	return &gate{method: method, entered: make(chan struct{}, 100), open: make(chan struct{})}
}

func (g *gate) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if info.FullMethod == g.method {
		g.entered <- struct{}{}
		select {
		case <-g.open:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return h(ctx, req)
}

// Calls in flight are counted per identity from before their body is read
// until they end (a stream: until its request has been read); large-body
// methods have a smaller cap.
func TestRequestsInFlight(t *testing.T) {
	g := newGate(apiv1.VirtualMachines_Create_FullMethodName)
	e := newSecEnvWith(t, Limits{AdminRequests: 3, AdminLargeRequests: 2, NodeRequests: 2, NodeLargeRequests: 1}, []grpc.UnaryServerInterceptor{g.unary})
	admin := e.admin()
	node := e.join("node-a")
	held := make(chan error, 2)
	for i := range 2 {
		go func() {
			_, err := admin.VMs.Create(ctx(), &apiv1.CreateVirtualMachineRequest{Vm: validVM(fmt.Sprintf("held-%d", i))})
			held <- err
		}()
		<-g.entered
	}
	_, err := admin.VMs.Create(ctx(), &apiv1.CreateVirtualMachineRequest{Vm: validVM("third")})
	wantCode(t, "a third create with two held (large cap 2)", err, codes.ResourceExhausted)
	if _, err := admin.VMs.List(ctx(), &apiv1.ListVirtualMachinesRequest{}); err != nil {
		t.Fatalf("a list beside two held creates (cap 3): %v", err)
	}
	// A console stream holds the third call until its first message.
	actx, cancel := context.WithCancel(ctx())
	defer cancel()
	attach, err := admin.Consoles.Attach(actx)
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "the console stream counted as the third call in flight", func() bool {
		_, err := admin.VMs.List(ctx(), &apiv1.ListVirtualMachinesRequest{})
		return status.Code(err) == codes.ResourceExhausted
	})
	// Another identity has calls of its own.
	if _, err := node.c.Nodes.Get(ctx(), &apiv1.GetNodeRequest{Name: "node-a"}); status.Code(err) != codes.NotFound {
		t.Fatalf("node-a beside the admin's full count: %v", err)
	}
	if err := attach.Send(&apiv1.ConsoleInput{Open: &apiv1.ConsoleOpen{Name: "nothing"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := attach.Recv(); status.Code(err) != codes.NotFound {
		t.Fatalf("attaching to no instance: %v", err)
	}
	if _, err := admin.VMs.List(ctx(), &apiv1.ListVirtualMachinesRequest{}); err != nil {
		t.Fatalf("a list once the console's open was read: %v", err)
	}
	close(g.open)
	for range 2 {
		if err := <-held; err != nil {
			t.Fatal(err)
		}
	}
	// Released as each call ended: three creates fit again, one at a time.
	for i := range 3 {
		if _, err := admin.VMs.Create(ctx(), &apiv1.CreateVirtualMachineRequest{Vm: validVM(fmt.Sprintf("after-%d", i))}); err != nil {
			t.Fatal(err)
		}
	}
	if n := refusals(e, apiv1.VirtualMachines_Create_FullMethodName, "large_requests"); n != 1 {
		t.Errorf("%v large-request refusals counted, want 1", n)
	}
	if n := refusals(e, apiv1.VirtualMachines_List_FullMethodName, "requests"); n < 1 {
		t.Errorf("%v in-flight refusals counted, want at least 1", n)
	}
}

// The root-only unix socket is trusted: its callers (admins, role all's
// node agent) are not counted.
func TestUnixSocketCallsAreNotCounted(t *testing.T) {
	g := newGate(apiv1.VirtualMachines_Create_FullMethodName)
	e := newSecEnv(t, Limits{AdminRequests: 1, AdminLargeRequests: 1})
	gs := grpc.NewServer(e.srv.ServerOptions(Listener{Unix: true}, []grpc.UnaryServerInterceptor{g.unary}, nil)...)
	e.srv.Register(gs)
	sock := filepath.Join(t.TempDir(), "api.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = gs.Serve(l) }()
	t.Cleanup(gs.Stop)
	uc, err := client.Dial(context.Background(), client.Config{Endpoint: "unix://" + sock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = uc.Close() })
	held := make(chan error, 3)
	for i := range 3 {
		go func() {
			_, err := uc.VMs.Create(ctx(), &apiv1.CreateVirtualMachineRequest{Vm: validVM(fmt.Sprintf("unix-%d", i))})
			held <- err
		}()
		<-g.entered
	}
	close(g.open)
	for range 3 {
		if err := <-held; err != nil {
			t.Fatal(err)
		}
	}
}
