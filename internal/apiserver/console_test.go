package apiserver

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// consoleFixture is the API over a real in-process gRPC server; tests
// play both the client and the node agent.
type consoleFixture struct {
	*fixture
	consoles apiv1.ConsolesClient
	ctx      context.Context
}

func newConsoleFixture(t *testing.T) *consoleFixture {
	t.Helper()
	f := newFixture(t)
	conn := testutil.ServeGRPC(t, New(f.st, Options{}).Register)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return &consoleFixture{fixture: f, consoles: apiv1.NewConsolesClient(conn), ctx: ctx}
}

// vmi stores a VMI owned by VM uid vmUID on node.
func (f *consoleFixture) vmi(t *testing.T, name, phase, node, vmUID string) *apiv1.VirtualMachineInstance {
	t.Helper()
	v, err := f.st.VMIs.Create(f.ctx, &apiv1.VirtualMachineInstance{
		Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: name, OwnerReferences: []*apiv1.OwnerReference{
			{Kind: "Other", Uid: "not-it", Controller: false},
			{Kind: apiv1.KindVirtualMachine, Name: name, Uid: vmUID, Controller: true},
		}},
		Spec:   &apiv1.VirtualMachineInstanceSpec{Domain: &apiv1.DomainSpec{Memory: &apiv1.Memory{Guest: "128Mi"}}},
		Status: &apiv1.VirtualMachineInstanceStatus{Phase: phase, NodeName: node},
	})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// node opens a Sessions stream for name and waits until the API has it.
func (f *consoleFixture) node(t *testing.T, name string) (apiv1.Consoles_SessionsClient, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(f.ctx)
	t.Cleanup(cancel)
	s, err := f.consoles.Sessions(ctx, &apiv1.ConsoleSessionsRequest{NodeName: name})
	if err != nil {
		t.Fatal(err)
	}
	if md, err := s.Header(); err != nil || md == nil {
		t.Fatalf("Sessions headers: %v, %v", md, err)
	}
	return s, cancel
}

func (f *consoleFixture) attach(t *testing.T, open *apiv1.ConsoleOpen) (apiv1.Consoles_AttachClient, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(f.ctx)
	t.Cleanup(cancel)
	c, err := f.consoles.Attach(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Send(&apiv1.ConsoleInput{Open: open}); err != nil {
		t.Fatal(err)
	}
	return c, cancel
}

// serve answers session s as a node agent does.
func (f *consoleFixture) serve(t *testing.T, s *apiv1.ConsoleSession) (apiv1.Consoles_ServeClient, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(f.ctx)
	t.Cleanup(cancel)
	n, err := f.consoles.Serve(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Send(&apiv1.ConsoleOutput{SessionId: s.GetSessionId()}); err != nil {
		t.Fatal(err)
	}
	return n, cancel
}

func recvErr[T any](recv func() (T, error)) error {
	_, err := recv()
	return err
}

// A client's session reaches the VMI's node with what the node needs;
// output and input flow; the node's end is the client's clean end.
func TestConsoleRoutesSessionToNode(t *testing.T) {
	f := newConsoleFixture(t)
	vmi := f.vmi(t, "web", apiv1.PhaseRunning, "n1", "vm-uid")
	other, _ := f.node(t, "n2")
	sessions, _ := f.node(t, "n1")

	client, _ := f.attach(t, &apiv1.ConsoleOpen{Name: "web", Interactive: true, Log: true, Follow: true, TailBytes: 10})
	s, err := sessions.Recv()
	if err != nil {
		t.Fatal(err)
	}
	want := &apiv1.ConsoleSession{
		SessionId: s.GetSessionId(), VmiUid: vmi.Metadata.Uid, VmUid: "vm-uid", DomainName: "default_web",
		Open: &apiv1.ConsoleOpen{Namespace: "default", Name: "web", Interactive: true, Log: true, Follow: true, TailBytes: 10},
	}
	if len(s.GetSessionId()) < 32 || !proto.Equal(s, want) {
		t.Fatalf("session %v, want %v", s, want)
	}
	node, _ := f.serve(t, s)
	if err := node.Send(&apiv1.ConsoleOutput{Data: []byte("login: ")}); err != nil {
		t.Fatal(err)
	}
	if out, err := client.Recv(); err != nil || string(out.GetData()) != "login: " {
		t.Fatalf("client got %v, %v", out, err)
	}
	if err := client.Send(&apiv1.ConsoleInput{Data: []byte("root\r")}); err != nil {
		t.Fatal(err)
	}
	if in, err := node.Recv(); err != nil || string(in.GetData()) != "root\r" {
		t.Fatalf("node got %v, %v", in, err)
	}
	if err := node.Send(&apiv1.ConsoleOutput{Notice: "instance ended", Final: true}); err != nil {
		t.Fatal(err)
	}
	if err := node.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if out, err := client.Recv(); err != nil || out.GetNotice() != "instance ended" {
		t.Fatalf("client got %v, %v", out, err)
	}
	if err := recvErr(client.Recv); !errors.Is(err, io.EOF) {
		t.Fatalf("client stream ended with %v, want a clean end", err)
	}
	if err := recvErr(node.Recv); !errors.Is(err, io.EOF) {
		t.Fatalf("node stream ended with %v, want a clean end", err)
	}
	// The other node saw nothing.
	got := make(chan error, 1)
	go func() { got <- recvErr(other.Recv) }()
	select {
	case err := <-got:
		t.Fatalf("node n2 got a session (or ended: %v)", err)
	case <-time.After(100 * time.Millisecond):
	}
}

// A client that leaves ends the node's side; a node that goes away ends
// the client's with Unavailable; a read-only console drops input.
func TestConsoleEndsBothWays(t *testing.T) {
	f := newConsoleFixture(t)
	f.vmi(t, "web", apiv1.PhaseRunning, "n1", "vm-uid")
	sessions, _ := f.node(t, "n1")

	leaving, leave := f.attach(t, &apiv1.ConsoleOpen{Name: "web", Follow: true})
	s, err := sessions.Recv()
	if err != nil {
		t.Fatal(err)
	}
	node, _ := f.serve(t, s)
	// Once output flows, the session is piped.
	if err := node.Send(&apiv1.ConsoleOutput{Data: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	if out, err := leaving.Recv(); err != nil || string(out.GetData()) != "x" {
		t.Fatalf("client got %v, %v", out, err)
	}
	leave()
	if err := recvErr(node.Recv); !errors.Is(err, io.EOF) {
		t.Fatalf("node stream after the client left: %v, want its end", err)
	}

	client, _ := f.attach(t, &apiv1.ConsoleOpen{Name: "web", Follow: true})
	s, err = sessions.Recv()
	if err != nil {
		t.Fatal(err)
	}
	node, nodeGone := f.serve(t, s)
	if err := client.Send(&apiv1.ConsoleInput{Data: []byte("ignored")}); err != nil {
		t.Fatal(err)
	}
	if err := node.Send(&apiv1.ConsoleOutput{Data: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	if out, err := client.Recv(); err != nil || string(out.GetData()) != "x" {
		t.Fatalf("client got %v, %v", out, err)
	}
	inputs := make(chan error, 1)
	go func() { inputs <- recvErr(node.Recv) }()
	nodeGone()
	if err := recvErr(client.Recv); code(err) != codes.Unavailable || !strings.Contains(err.Error(), "node n1") {
		t.Fatalf("client after the node went away: %v", err)
	}
	if err := <-inputs; code(err) != codes.Canceled {
		t.Fatalf("read-only input reached the node, or its stream ended oddly: %v", err)
	}
}

// A followed console goes on at the node an instance migrated to: the old
// node's end notice gives way to one that names the move, the new node is
// asked for all its log of the instance, and input typed meanwhile
// reaches it. An instance that then ends ends the console.
func TestConsoleFollowsMigratedInstance(t *testing.T) {
	f := newConsoleFixture(t)
	vmi := f.vmi(t, "web", apiv1.PhaseRunning, "n1", "vm-uid")
	n1, _ := f.node(t, "n1")
	n2, _ := f.node(t, "n2")

	client, _ := f.attach(t, &apiv1.ConsoleOpen{Name: "web", Interactive: true, Follow: true})
	s1, err := n1.Recv()
	if err != nil {
		t.Fatal(err)
	}
	src, _ := f.serve(t, s1)
	if err := src.Send(&apiv1.ConsoleOutput{Data: []byte("tick 1\n")}); err != nil {
		t.Fatal(err)
	}
	if out, err := client.Recv(); err != nil || string(out.GetData()) != "tick 1\n" {
		t.Fatalf("client got %v, %v", out, err)
	}
	// A notice that does not end the session goes out at once.
	if err := src.Send(&apiv1.ConsoleOutput{Notice: "read-only console: no pty"}); err != nil {
		t.Fatal(err)
	}
	if out, err := client.Recv(); err != nil || out.GetNotice() != "read-only console: no pty" {
		t.Fatalf("client got %v, %v", out, err)
	}
	// The migration completes: the instance is on n2, and n1's console
	// of it ends.
	vmi.Status.NodeName = "n2"
	if _, err := f.st.VMIs.Update(f.ctx, vmi); err != nil {
		t.Fatal(err)
	}
	if err := src.Send(&apiv1.ConsoleOutput{Notice: "instance ended", Final: true}); err != nil {
		t.Fatal(err)
	}
	if err := src.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if out, err := client.Recv(); err != nil || out.GetNotice() != "the instance moved from node n1 to node n2" {
		t.Fatalf("client got %v, %v; want the move's notice", out, err)
	}
	if err := client.Send(&apiv1.ConsoleInput{Data: []byte("typed during the move\r")}); err != nil {
		t.Fatal(err)
	}
	s2, err := n2.Recv()
	if err != nil {
		t.Fatal(err)
	}
	want := &apiv1.ConsoleSession{
		SessionId: s2.GetSessionId(), VmiUid: vmi.Metadata.Uid, VmUid: "vm-uid", DomainName: "default_web",
		Open: &apiv1.ConsoleOpen{Namespace: "default", Name: "web", Interactive: true, Log: true, Follow: true},
	}
	if s2.GetSessionId() == s1.GetSessionId() || !proto.Equal(s2, want) {
		t.Fatalf("session on n2 %v, want %v", s2, want)
	}
	dst, _ := f.serve(t, s2)
	if in, err := dst.Recv(); err != nil || string(in.GetData()) != "typed during the move\r" {
		t.Fatalf("n2 got %v, %v", in, err)
	}
	if err := dst.Send(&apiv1.ConsoleOutput{Data: []byte("tick 2\n")}); err != nil {
		t.Fatal(err)
	}
	if out, err := client.Recv(); err != nil || string(out.GetData()) != "tick 2\n" {
		t.Fatalf("client got %v, %v", out, err)
	}
	if err := recvErr(src.Recv); !errors.Is(err, io.EOF) {
		t.Fatalf("n1's stream ended with %v, want a clean end", err)
	}
	// The guest stops on n2: the console ends with n2's notice.
	vmi, err = f.st.VMIs.Get(f.ctx, "default", "web")
	if err != nil {
		t.Fatal(err)
	}
	vmi.Status.Phase = apiv1.PhaseSucceeded
	if _, err := f.st.VMIs.Update(f.ctx, vmi); err != nil {
		t.Fatal(err)
	}
	if err := dst.Send(&apiv1.ConsoleOutput{Notice: "instance ended", Final: true}); err != nil {
		t.Fatal(err)
	}
	if err := dst.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if out, err := client.Recv(); err != nil || out.GetNotice() != "instance ended" {
		t.Fatalf("client got %v, %v", out, err)
	}
	if err := recvErr(client.Recv); !errors.Is(err, io.EOF) {
		t.Fatalf("client stream ended with %v, want a clean end", err)
	}
}

func TestConsoleResolveErrors(t *testing.T) {
	f := newConsoleFixture(t)
	f.vmi(t, "pending", apiv1.PhaseScheduled, "n1", "vm-p")
	vm, err := f.vms.Create(f.ctx, &apiv1.CreateVirtualMachineRequest{Vm: validVM("stopped")})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		open *apiv1.ConsoleOpen
		code codes.Code
		msg  string
	}{
		{&apiv1.ConsoleOpen{}, codes.InvalidArgument, "open.name: Required value"},
		{&apiv1.ConsoleOpen{Name: "x", TailBytes: -1}, codes.InvalidArgument, "open.tail_bytes"},
		{&apiv1.ConsoleOpen{Name: "nope"}, codes.NotFound, "VM default/nope not found"},
		{&apiv1.ConsoleOpen{Name: "stopped", Log: true}, codes.NotFound, "VM default/stopped has not run on any node"},
		{&apiv1.ConsoleOpen{Name: "stopped", Interactive: true}, codes.FailedPrecondition, "no running instance"},
		{&apiv1.ConsoleOpen{Name: "pending", Interactive: true}, codes.FailedPrecondition, "VMI default/pending is Scheduled"},
		{&apiv1.ConsoleOpen{Name: "pending"}, codes.Unavailable, "node n1 is not connected for consoles"},
	}
	for _, tc := range cases {
		c, _ := f.attach(t, tc.open)
		if err := recvErr(c.Recv); code(err) != tc.code || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%v: %v, want %s with %q", tc.open, err, tc.code, tc.msg)
		}
	}
	if c, err := f.consoles.Attach(f.ctx); err != nil {
		t.Fatal(err)
	} else if err := c.CloseSend(); err != nil {
		t.Fatal(err)
	} else if err := recvErr(c.Recv); code(err) != codes.InvalidArgument {
		t.Errorf("attach without open: %v", err)
	}
	n, err := f.consoles.Serve(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Send(&apiv1.ConsoleOutput{SessionId: "made-up"}); err != nil {
		t.Fatal(err)
	}
	if err := recvErr(n.Recv); code(err) != codes.NotFound {
		t.Errorf("serving an unknown session: %v", err)
	}

	// A VM whose instance is gone: its last node, with the VM's uid.
	if _, err := f.st.VMs.GuaranteedUpdate(f.ctx, "default", "stopped", func(v *apiv1.VirtualMachine) (*apiv1.VirtualMachine, error) {
		v = proto.Clone(v).(*apiv1.VirtualMachine)
		v.Status = &apiv1.VirtualMachineStatus{NodeName: "n3"}
		return v, nil
	}); err != nil {
		t.Fatal(err)
	}
	sessions, _ := f.node(t, "n3")
	f.attach(t, &apiv1.ConsoleOpen{Namespace: "default", Name: "stopped", Log: true})
	s, err := sessions.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if s.GetVmUid() != vm.Metadata.Uid || s.GetVmiUid() != "" || !s.GetOpen().GetLog() {
		t.Fatalf("session of a stopped VM: %v", s)
	}
}

// The source node ends its console of a migrating instance as soon as it
// noted the handover, a moment before it writes the instance's new node:
// a followed console waits for that write, and goes on at the target;
// when the migration is written as failed instead, the console ends with
// the node's notice.
func TestConsoleWaitsForTheHandover(t *testing.T) {
	f := newConsoleFixture(t)
	n1, _ := f.node(t, "n1")
	n2, _ := f.node(t, "n2")
	for _, fails := range []bool{false, true} {
		name := map[bool]string{false: "moves", true: "stays"}[fails]
		vmi := f.vmi(t, name, apiv1.PhaseRunning, "n1", "vm-"+name)
		vmi.Status.MigrationState = &apiv1.MigrationState{MigrationUid: "m-" + name, SourceNode: "n1", TargetNode: "n2"}
		vmi, err := f.st.VMIs.Update(f.ctx, vmi)
		if err != nil {
			t.Fatal(err)
		}
		client, _ := f.attach(t, &apiv1.ConsoleOpen{Name: name, Follow: true})
		s1, err := n1.Recv()
		if err != nil {
			t.Fatal(err)
		}
		src, _ := f.serve(t, s1)
		if err := src.Send(&apiv1.ConsoleOutput{Notice: "instance ended", Final: true}); err != nil {
			t.Fatal(err)
		}
		if err := src.CloseSend(); err != nil {
			t.Fatal(err)
		}
		// n1's stream is over: the API has decided on n1's end.
		if err := recvErr(src.Recv); !errors.Is(err, io.EOF) {
			t.Fatalf("%s: n1's stream ended with %v, want a clean end", name, err)
		}
		vmi.Status.MigrationState.Completed = true
		if fails {
			vmi.Status.MigrationState.Failed = true
		} else {
			vmi.Status.NodeName = "n2"
		}
		if _, err := f.st.VMIs.Update(f.ctx, vmi); err != nil {
			t.Fatal(err)
		}
		out, err := client.Recv()
		if fails {
			if err != nil || out.GetNotice() != "instance ended" {
				t.Fatalf("%s: client got %v, %v; want n1's notice", name, out, err)
			}
			if err := recvErr(client.Recv); !errors.Is(err, io.EOF) {
				t.Fatalf("%s: client stream ended with %v, want a clean end", name, err)
			}
			continue
		}
		if err != nil || out.GetNotice() != "the instance moved from node n1 to node n2" {
			t.Fatalf("%s: client got %v, %v; want the move's notice", name, out, err)
		}
		if s2, err := n2.Recv(); err != nil || s2.GetVmiUid() != vmi.GetMetadata().GetUid() {
			t.Fatalf("%s: n2 got %v, %v", name, s2, err)
		}
	}
}

func TestMovedTo(t *testing.T) {
	inFlight := &apiv1.MigrationState{SourceNode: "n1", TargetNode: "n2"}
	done := &apiv1.MigrationState{SourceNode: "n1", TargetNode: "n2", Completed: true}
	for _, tc := range []struct {
		name, uid, phase, node string
		mig                    *apiv1.MigrationState
		next                   string
		decided                bool
	}{
		{"moved", "u", apiv1.PhaseRunning, "n2", done, "n2", true},
		{"handover not written yet", "u", apiv1.PhaseRunning, "n1", inFlight, "", false},
		{"migration failed", "u", apiv1.PhaseRunning, "n1", &apiv1.MigrationState{SourceNode: "n1", Completed: true, Failed: true}, "", true},
		{"no migration", "u", apiv1.PhaseRunning, "n1", nil, "", true},
		{"another node's migration", "u", apiv1.PhaseRunning, "n1", &apiv1.MigrationState{SourceNode: "n3"}, "", true},
		{"ended", "u", apiv1.PhaseFailed, "n1", inFlight, "", true},
		{"replaced", "other", apiv1.PhaseRunning, "n2", nil, "", true},
	} {
		vmi := &apiv1.VirtualMachineInstance{Metadata: &apiv1.ObjectMeta{Uid: tc.uid},
			Status: &apiv1.VirtualMachineInstanceStatus{Phase: tc.phase, NodeName: tc.node, MigrationState: tc.mig}}
		if next, decided := movedTo(vmi, "u", "n1"); next != tc.next || decided != tc.decided {
			t.Errorf("%s: movedTo = %q, %v; want %q, %v", tc.name, next, decided, tc.next, tc.decided)
		}
	}
}
