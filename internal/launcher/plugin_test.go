package launcher

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
)

// fakeLauncher is a LauncherServer with just enough behaviour to check
// what crosses the plugin boundary.
type fakeLauncher struct {
	launcherpb.UnimplementedLauncherServer

	mu       sync.Mutex
	st       *launcherpb.DomainStatus
	lease    int64
	lastSync *launcherpb.SyncRequest
	events   chan *launcherpb.DomainEvent
	block    chan struct{} // GetDomain waits on it when set
}

func newFakeLauncher() *fakeLauncher {
	return &fakeLauncher{
		st:     &launcherpb.DomainStatus{Name: "ns_vm"},
		events: make(chan *launcherpb.DomainEvent, 8),
	}
}

func (f *fakeLauncher) status() *launcherpb.DomainStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	return &launcherpb.DomainStatus{
		Exists: f.st.Exists, State: f.st.State, Reason: f.st.Reason, Uuid: f.st.Uuid,
		Name: f.st.Name, VmiUid: f.st.VmiUid, PausedByUser: f.st.PausedByUser,
	}
}

func (f *fakeLauncher) set(fn func(st *launcherpb.DomainStatus)) *launcherpb.DomainStatus {
	f.mu.Lock()
	fn(f.st)
	f.mu.Unlock()
	st := f.status()
	f.events <- &launcherpb.DomainEvent{Status: st, Event: "Changed"}
	return st
}

func (f *fakeLauncher) Sync(_ context.Context, req *launcherpb.SyncRequest) (*launcherpb.DomainStatus, error) {
	if req.GetVmi().GetMetadata().GetUid() == "" {
		return nil, status.Error(codes.InvalidArgument, "uid required")
	}
	f.mu.Lock()
	f.lastSync = req
	f.mu.Unlock()
	return f.set(func(st *launcherpb.DomainStatus) {
		st.Exists, st.State, st.Reason, st.Uuid, st.VmiUid = true, "Running", "Booted", "uuid-1", req.GetVmi().GetMetadata().GetUid()
	}), nil
}

func (f *fakeLauncher) Pause(context.Context, *launcherpb.Empty) (*launcherpb.DomainStatus, error) {
	return f.set(func(st *launcherpb.DomainStatus) { st.State, st.Reason, st.PausedByUser = "Paused", "User", true }), nil
}

func (f *fakeLauncher) Delete(context.Context, *launcherpb.Empty) (*launcherpb.DomainStatus, error) {
	return nil, status.Error(codes.FailedPrecondition, "domain ns_vm is Running; Kill it before Delete")
}

func (f *fakeLauncher) GetDomain(ctx context.Context, _ *launcherpb.Empty) (*launcherpb.DomainStatus, error) {
	f.mu.Lock()
	block := f.block
	f.mu.Unlock()
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		}
	}
	return f.status(), nil
}

func (f *fakeLauncher) Ping(context.Context, *launcherpb.Empty) (*launcherpb.PingResponse, error) {
	return &launcherpb.PingResponse{Version: "fake", Pid: 1}, nil
}

func (f *fakeLauncher) RenewLease(_ context.Context, req *launcherpb.LeaseRequest) (*launcherpb.Empty, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lease = req.GetValidForMillis()
	return &launcherpb.Empty{}, nil
}

func (f *fakeLauncher) leaseMillis() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lease
}

func (f *fakeLauncher) Events(_ *launcherpb.Empty, s grpc.ServerStreamingServer[launcherpb.DomainEvent]) error {
	if err := s.Send(&launcherpb.DomainEvent{Status: f.status(), Event: "Current"}); err != nil {
		return err
	}
	for {
		select {
		case <-s.Context().Done():
			return nil
		case ev := <-f.events:
			if err := s.Send(ev); err != nil {
				return err
			}
		}
	}
}

// newHarness connects a Client to srv through go-plugin's real gRPC plugin
// machinery in-process (Nomad's NewDriverHarness).
func newHarness(t *testing.T, srv launcherpb.LauncherServer) (Client, *plugin.GRPCClient) {
	t.Helper()
	gc, gs := plugin.TestPluginGRPCConn(t, false, PluginSet(srv))
	t.Cleanup(func() {
		_ = gc.Conn.Close()
		gs.Stop()
	})
	raw, err := gc.Dispense(PluginName)
	if err != nil {
		t.Fatal(err)
	}
	rpc, ok := raw.(launcherpb.LauncherClient)
	if !ok {
		t.Fatalf("dispensed %T", raw)
	}
	return NewClient(rpc, func() { _ = gc.Conn.Close() }, nil), gc
}

func TestClientThroughPlugin(t *testing.T) {
	f := newFakeLauncher()
	c, _ := newHarness(t, f)
	ctx := context.Background()

	if err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	v := &apiv1.VirtualMachineInstance{Metadata: &apiv1.ObjectMeta{Uid: "u1", Namespace: "ns", Name: "vm"}}
	st, err := c.Sync(ctx, v, &launcherpb.SyncOptions{DomainName: "ns_vm", TbCacheMib: 16})
	if err != nil || st.GetState() != "Running" || st.GetVmiUid() != "u1" {
		t.Fatalf("Sync = %v, %v", st, err)
	}
	f.mu.Lock()
	got := f.lastSync
	f.mu.Unlock()
	if got.GetOptions().GetTbCacheMib() != 16 || got.GetVmi().GetMetadata().GetName() != "vm" {
		t.Fatalf("server got %v", got)
	}
	if st, err := c.Pause(ctx); err != nil || !st.GetPausedByUser() {
		t.Fatalf("Pause = %v, %v", st, err)
	}
	if err := c.RenewLease(ctx, 1500*time.Millisecond); err != nil || f.leaseMillis() != 1500 {
		t.Fatalf("RenewLease: %v, server got %d ms", err, f.leaseMillis())
	}
	// Status codes survive the boundary and the client's wrapping.
	_, err = c.Delete(ctx)
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("Delete error = %v (code %s)", err, status.Code(err))
	}
	_, err = c.Sync(ctx, &apiv1.VirtualMachineInstance{}, nil)
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("Sync error = %v", err)
	}
	// Not implemented by the fake: Unimplemented, not a hang.
	if _, err := c.Kill(ctx); status.Code(err) != codes.Unimplemented {
		t.Fatalf("Kill error = %v", err)
	}
}

func TestClientHonoursContext(t *testing.T) {
	f := newFakeLauncher()
	f.block = make(chan struct{})
	defer close(f.block)
	c, _ := newHarness(t, f)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.GetDomain(ctx)
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("GetDomain error = %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("GetDomain took %s", d)
	}
}

func TestClientEvents(t *testing.T) {
	f := newFakeLauncher()
	c, _ := newHarness(t, f)
	ctx, cancel := context.WithCancel(context.Background())
	ch, err := c.Events(ctx)
	if err != nil {
		t.Fatal(err)
	}
	next := func() *launcherpb.DomainEvent {
		t.Helper()
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatal("events channel closed")
			}
			return ev
		case <-time.After(5 * time.Second):
			t.Fatal("no event")
			return nil
		}
	}
	if ev := next(); ev.GetEvent() != "Current" {
		t.Fatalf("first event = %v", ev)
	}
	if _, err := c.Pause(context.Background()); err != nil {
		t.Fatal(err)
	}
	if ev := next(); ev.GetStatus().GetState() != "Paused" {
		t.Fatalf("event = %v", ev)
	}
	cancel()
	for range ch { // drains, then closes
	}
}

func TestClientDetach(t *testing.T) {
	f := newFakeLauncher()
	c, _ := newHarness(t, f)
	c.Detach()
	c.Detach() // idempotent
	if err := c.Ping(context.Background()); !errors.Is(err, ErrDetached) {
		t.Fatalf("Ping after Detach = %v", err)
	}
	if _, err := c.Events(context.Background()); !errors.Is(err, ErrDetached) {
		t.Fatalf("Events after Detach = %v", err)
	}
	if err := c.Stop(context.Background()); err == nil {
		t.Fatal("Stop without a process succeeded")
	}
}

func TestEventsFailsWhenLauncherUnreachable(t *testing.T) {
	f := newFakeLauncher()
	c, gc := newHarness(t, f)
	_ = gc.Conn.Close()
	if _, err := c.Events(context.Background()); err == nil {
		t.Fatal("Events over a closed connection succeeded")
	}
}
