package apiserver

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	clocktesting "k8s.io/utils/clock/testing"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/etcdserver"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// serveWith serves the API over stores with the given unary interceptors
// until the test ends.
func serveWith(t *testing.T, stores Stores, unary ...grpc.UnaryServerInterceptor) *grpc.ClientConn {
	t.Helper()
	return testutil.ServeGRPC(t, New(stores, Options{}).Register, grpc.ChainUnaryInterceptor(unary...))
}

// A nearly full etcd refuses users' VM writes with a message that says
// what to do, while a node's heartbeat and status writes, and deletes, go
// on: etcd itself would refuse them all once the quota is reached.
func TestQuotaGuardRefusesUserWritesBeforeEtcdIsFull(t *testing.T) {
	const quota = 8 << 20
	srv, err := etcdserver.Start(t.Context(), etcdserver.Config{DataDir: t.TempDir(), QuotaBackendBytes: quota})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	cli := srv.Client()
	usage := etcdserver.NewUsageReader(cli, srv.Quota())
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
	guard := NewQuotaGuard(usage, clk, QuotaOptions{Interval: 10 * time.Second})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go guard.Run(ctx)

	conn := serveWith(t, NewStores(cli, store.Options{Prefix: "/test/registry"}), guard.Unary)
	vms, nodes := apiv1.NewVirtualMachinesClient(conn), apiv1.NewNodesClient(conn)
	res := map[string]string{"cpu": "2", "memory": "4Gi"}
	if _, err := nodes.Register(ctx, &apiv1.RegisterNodeRequest{Node: &apiv1.Node{
		Metadata: &apiv1.ObjectMeta{Name: "host-1"},
		Status:   &apiv1.NodeStatus{Capacity: res, Allocatable: res, Schedulable: true, NodeInfo: &apiv1.NodeInfo{Hostname: "host-1"}},
	}}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, "the guard's first reading", func() bool {
		guard.mu.Lock()
		defer guard.mu.Unlock()
		return !guard.read.IsZero()
	})
	if _, err := vms.Create(ctx, &apiv1.CreateVirtualMachineRequest{Vm: validVM("before")}); err != nil {
		t.Fatalf("create with an empty store: %v", err)
	}

	// Fill etcd to between 91% and its quota. etcd reports, and checks
	// against its quota, the size of what it committed, which lags writes
	// by up to its batch interval; a compaction at each write's revision
	// commits at once (and removes nothing: every key is new), so that no
	// uncounted write carries the store past its quota.
	value := strings.Repeat("x", 64<<10)
	var last etcdserver.Usage
	for i := 0; last.Fraction() < 0.91; i++ {
		if i > 2*quota/len(value) {
			t.Fatalf("the store never reached 91%% of its quota: %+v", last)
		}
		put, err := cli.Put(ctx, fmt.Sprintf("/fill/%04d", i), value)
		if err != nil {
			t.Fatalf("filling, write %d: %v", i, err)
		}
		if _, err := cli.Compact(ctx, put.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
			t.Fatal(err)
		}
		if last, err = usage.Usage(ctx); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("filled: %d of %d bytes", last.DBSize, last.Quota)

	// The next reading refuses user writes, each with the same message.
	clk.Step(10 * time.Second)
	testutil.Eventually(t, 30*time.Second, "the guard to read the filled store", guardRefusing(guard, true))
	_, refused := vms.Create(ctx, &apiv1.CreateVirtualMachineRequest{Vm: validVM("after")})
	if status.Code(refused) != codes.ResourceExhausted {
		t.Fatalf("create while nearly full: %v, want ResourceExhausted", refused)
	}
	msg := status.Convert(refused).Message()
	for _, want := range []string{"etcd database is 9", "% of its 8 MiB quota", "compact and defragment", "docs/operations.md"} {
		if !strings.Contains(msg, want) {
			t.Errorf("refusal %q lacks %q", msg, want)
		}
	}
	t.Logf("refusal: %s", msg)
	key := &apiv1.ObjectKey{Namespace: "default", Name: "before"}
	if _, err := vms.Start(ctx, &apiv1.StartVirtualMachineRequest{Key: key}); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("start while nearly full: %v, want ResourceExhausted", err)
	}
	vm, err := vms.Get(ctx, &apiv1.GetVirtualMachineRequest{Key: key})
	if err != nil {
		t.Fatal(err)
	}
	vm.Metadata.Labels = map[string]string{"more": "data"}
	if _, err := vms.Update(ctx, &apiv1.UpdateVirtualMachineRequest{Vm: vm}); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("update while nearly full: %v, want ResourceExhausted", err)
	}
	// A pool or replica set would add a VM or instance per replica.
	if _, err := apiv1.NewPoolsClient(conn).Create(ctx, &apiv1.CreatePoolRequest{Pool: validPool("db")}); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("pool create while nearly full: %v, want ResourceExhausted", err)
	}
	if _, err := apiv1.NewReplicaSetsClient(conn).Scale(ctx, &apiv1.ScaleRequest{Key: key, Replicas: 9}); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("scale while nearly full: %v, want ResourceExhausted", err)
	}

	// What keeps nodes and their VMs alive still writes.
	if _, err := nodes.Heartbeat(ctx, &apiv1.HeartbeatRequest{Name: "host-1", Schedulable: true}); err != nil {
		t.Fatalf("heartbeat while nearly full: %v", err)
	}
	if _, err := vms.Delete(ctx, &apiv1.DeleteVirtualMachineRequest{Key: key}); err != nil {
		t.Fatalf("delete while nearly full: %v", err)
	}

	// Space freed (compact, defragment): the next reading lets writes in.
	if _, err := cli.Delete(ctx, "/fill/", clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	rev, err := cli.Get(ctx, "/")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Compact(ctx, rev.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Defragment(ctx, cli.Endpoints()[0]); err != nil {
		t.Fatal(err)
	}
	clk.Step(10 * time.Second)
	testutil.Eventually(t, 30*time.Second, "the guard to read the defragmented store", guardRefusing(guard, false))
	if _, err := vms.Create(ctx, &apiv1.CreateVirtualMachineRequest{Vm: validVM("again")}); err != nil {
		t.Fatalf("create after defragmentation: %v", err)
	}
}

func guardRefusing(g *QuotaGuard, want bool) func() bool {
	return func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.refusing == want
	}
}

type fixedUsage struct{ size, quota int64 }

func (f fixedUsage) StorageUsage(context.Context) (int64, int64, error) { return f.size, f.quota, nil }

type failingUsage struct{}

func (failingUsage) StorageUsage(context.Context) (int64, int64, error) {
	return 0, 0, fmt.Errorf("etcd unreachable")
}

// A reading older than MaxAge refuses nothing: the guard never turns an
// unreadable etcd into refused writes of its own.
func TestQuotaGuardForgetsOldReadings(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	g := NewQuotaGuard(fixedUsage{size: 95, quota: 100}, clk, QuotaOptions{Interval: time.Second, MaxAge: 3 * time.Second})
	g.poll(t.Context())
	info := &grpc.UnaryServerInfo{FullMethod: apiv1.VirtualMachines_Create_FullMethodName}
	ok := func(context.Context, any) (any, error) { return "done", nil }
	if _, err := g.Unary(t.Context(), nil, info, ok); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("fresh reading at 95%%: %v", err)
	}
	g.src = failingUsage{}
	clk.Step(2 * time.Second)
	g.poll(t.Context())
	if _, err := g.Unary(t.Context(), nil, info, ok); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("reading 2 s old: %v", err)
	}
	clk.Step(2 * time.Second)
	if _, err := g.Unary(t.Context(), nil, info, ok); err != nil {
		t.Fatalf("reading 4 s old still refuses: %v", err)
	}
	// Unguarded methods pass whatever the reading.
	g.src = fixedUsage{size: 99, quota: 100}
	g.poll(t.Context())
	for _, m := range []string{apiv1.Nodes_Heartbeat_FullMethodName, apiv1.VirtualMachineInstances_UpdateStatus_FullMethodName, apiv1.VirtualMachines_Delete_FullMethodName} {
		if _, err := g.Unary(t.Context(), nil, &grpc.UnaryServerInfo{FullMethod: m}, ok); err != nil {
			t.Errorf("%s at 99%%: %v", m, err)
		}
	}
}

func TestFormatBytes(t *testing.T) {
	for n, want := range map[int64]string{
		512: "512 B", 2 << 30: "2 GiB", 8 << 20: "8 MiB", 1932735283: "1.8 GiB", 1536: "1.5 KiB",
	} {
		if got := formatBytes(n); got != want {
			t.Errorf("formatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}
