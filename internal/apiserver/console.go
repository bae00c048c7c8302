package apiserver

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// consoleService relays serial consoles: a client's Attach is handed to
// the node that holds the console through that node's Sessions stream,
// and the node answers with a Serve stream that Attach pipes to the
// client. Nodes need no listener of their own.
type consoleService struct {
	apiv1.UnimplementedConsolesServer
	s *Server
}

func newConsoleService(s *Server) apiv1.ConsolesServer { return &consoleService{s: s} }

func (c *consoleService) Attach(stream apiv1.Consoles_AttachServer) error {
	ctx := stream.Context()
	first, err := stream.Recv()
	if errors.Is(err, io.EOF) {
		return status.Error(codes.InvalidArgument, "open: Required value: the first message must open the console")
	}
	if err != nil {
		return toStatus(err)
	}
	open, err := consoleOpen(first.GetOpen())
	if err != nil {
		return err
	}
	node, sess, err := c.resolve(ctx, open)
	if err != nil {
		return err
	}
	in := readClientInput(stream, open.Interactive)
	for {
		nc, err := c.s.consoles.handOff(ctx, node, sess)
		if err != nil {
			return err
		}
		c.s.log.Debug("console attached", "vmi", open.Namespace+"/"+open.Name, "node", node,
			"session", sess.SessionId, "interactive", open.Interactive, "log", sess.Open.Log)
		notice, err := pipeConsole(stream, nc, in, node)
		nc.end()
		if err != nil {
			return err
		}
		next, moved := c.moved(ctx, sess, node)
		if !moved {
			if notice != nil {
				return toStatus(stream.Send(notice))
			}
			return nil
		}
		// The instance migrated: its console goes on at the node it now
		// runs on, whose log of it starts where the old node's ended.
		if err := stream.Send(&apiv1.ConsoleOutput{Notice: fmt.Sprintf("the instance moved from node %s to node %s", node, next)}); err != nil {
			return toStatus(err)
		}
		sess = followOn(sess)
		node = next
	}
}

// moved reports the node that a followed instance runs on now when its
// console on node ended because it migrated away: the same instance,
// still running, placed elsewhere. A session that does not follow, or an
// instance that ended or was replaced, ends with the node's stream.
//
// The source node ends its console as soon as it noted the handover,
// a moment before it writes the instance's new node: while the instance
// still names node with its migration from node in flight, moved waits
// on the store for the write that decides (done, failed or aborted, or
// the instance gone) for as long as the client stays.
func (c *consoleService) moved(ctx context.Context, sess *apiv1.ConsoleSession, node string) (string, bool) {
	if !sess.GetOpen().GetFollow() || sess.GetVmiUid() == "" || ctx.Err() != nil {
		return "", false
	}
	open := sess.GetOpen()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events, err := c.s.stores.VMIs.Watch(ctx, store.WatchOptions{
		ListOptions: store.ListOptions{Namespace: open.GetNamespace()}, Name: open.GetName()})
	if err != nil {
		return "", false
	}
	listed := false // the current listing had the instance
	for ev := range events {
		switch ev.Type {
		case apiv1.EventType_ADDED, apiv1.EventType_MODIFIED:
			listed = true
			if next, decided := movedTo(ev.Object, sess.GetVmiUid(), node); decided {
				return next, next != ""
			}
		case apiv1.EventType_RESET:
			listed = false
		case apiv1.EventType_SYNCED:
			if !listed {
				return "", false // gone
			}
		default: // deleted, or the watch failed
			return "", false
		}
	}
	return "", false
}

// movedTo decides from one state of the instance where its console goes
// on after node's ended: next is the node it now runs on ("" when the
// console ends); undecided while its migration away from node is in
// flight.
func movedTo(vmi *apiv1.VirtualMachineInstance, uid, node string) (next string, decided bool) {
	if vmi.GetMetadata().GetUid() != uid || apiv1.IsFinal(vmi.GetStatus().GetPhase()) {
		return "", true
	}
	if n := vmi.GetStatus().GetNodeName(); n != "" && n != node {
		return n, true
	}
	if m := vmi.GetStatus().GetMigrationState(); m != nil && !m.GetCompleted() && m.GetSourceNode() == node {
		return "", false
	}
	return "", true
}

// followOn is the session that continues sess on the node an instance
// migrated to: all of that node's log of the instance, which begins when
// the guest resumed there, then what follows.
func followOn(sess *apiv1.ConsoleSession) *apiv1.ConsoleSession {
	next := proto.Clone(sess).(*apiv1.ConsoleSession)
	next.SessionId = uuid.NewString()
	next.Open.Log, next.Open.TailBytes = true, 0
	return next
}

// consoleOpen defaults and validates what a client asks for.
func consoleOpen(in *apiv1.ConsoleOpen) (*apiv1.ConsoleOpen, error) {
	if in == nil {
		return nil, status.Error(codes.InvalidArgument, "open: Required value: the first message must open the console")
	}
	open := proto.Clone(in).(*apiv1.ConsoleOpen)
	if open.Namespace == "" {
		open.Namespace = "default"
	}
	if open.Name == "" {
		return nil, status.Error(codes.InvalidArgument, "open.name: Required value")
	}
	if open.TailBytes < 0 {
		return nil, status.Errorf(codes.InvalidArgument, "open.tail_bytes: Invalid value: %d: must not be negative", open.TailBytes)
	}
	return open, nil
}

// resolve finds the node that holds the console: the running (or last)
// instance's node, else the node the VM last ran on, which keeps the log
// of its last instance.
func (c *consoleService) resolve(ctx context.Context, open *apiv1.ConsoleOpen) (string, *apiv1.ConsoleSession, error) {
	ns, name := open.Namespace, open.Name
	key := apiv1.Ref(ns, name)
	sess := &apiv1.ConsoleSession{SessionId: uuid.NewString(), Open: open, DomainName: apiv1.DomainName(ns, name)}
	vmi, err := c.s.stores.VMIs.Get(ctx, ns, name)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return "", nil, toStatus(err)
	}
	if node := vmi.GetStatus().GetNodeName(); err == nil && node != "" {
		if phase := vmi.GetStatus().GetPhase(); open.Interactive && phase != apiv1.PhaseRunning {
			return "", nil, status.Errorf(codes.FailedPrecondition, "VMI %s is %s: an interactive console needs a running instance", key, phase)
		}
		sess.VmiUid = vmi.GetMetadata().GetUid()
		sess.VmUid = apiv1.ControllingVMUID(vmi)
		return node, sess, nil
	}
	if open.Interactive {
		return "", nil, status.Errorf(codes.FailedPrecondition, "VM %s has no running instance: an interactive console needs one", key)
	}
	vm, err := c.s.stores.VMs.Get(ctx, ns, name)
	if errors.Is(err, store.ErrNotFound) {
		return "", nil, status.Errorf(codes.NotFound, "VM %s not found", key)
	}
	if err != nil {
		return "", nil, toStatus(err)
	}
	node := vm.GetStatus().GetNodeName()
	if node == "" {
		return "", nil, status.Errorf(codes.NotFound, "VM %s has not run on any node", key)
	}
	sess.VmUid = vm.GetMetadata().GetUid()
	return node, sess, nil
}

// clientInput is what a client types, read from its Attach stream for
// the whole session, across the nodes it may be served by.
type clientInput struct {
	data <-chan []byte
	err  <-chan error // the client's input ended (io.EOF: closed)
}

// readClientInput reads the client's stream until it ends; a read-only
// console drops input. It returns when the Attach call ends.
func readClientInput(stream apiv1.Consoles_AttachServer, interactive bool) clientInput {
	ctx := stream.Context()
	data := make(chan []byte)
	errc := make(chan error, 1)
	go func() {
		for {
			m, err := stream.Recv()
			if err != nil {
				errc <- err
				return
			}
			if !interactive || len(m.GetData()) == 0 {
				continue
			}
			select {
			case data <- m.GetData():
			case <-ctx.Done():
				return
			}
		}
	}()
	return clientInput{data: data, err: errc}
}

// pipeConsole copies the node's output to the client and the client's
// input to the node until either side ends. The node's final notice is
// held back and returned when its stream ended normally, so that the
// caller decides whether the console ends or moves on to another node;
// other notices (a read-only console, ...) go out at once.
// Only this goroutine sends on the client stream; the node stream is sent
// on by its own handler (Serve), so no stream has two senders.
func pipeConsole(stream apiv1.Consoles_AttachServer, nc *nodeConsole, in clientInput, node string) (*apiv1.ConsoleOutput, error) {
	ctx := stream.Context()
	var held *apiv1.ConsoleOutput
	for {
		select {
		case out, ok := <-nc.out:
			if !ok {
				return held, nodeEnded(nc.recvErr, node)
			}
			if held != nil {
				if err := stream.Send(held); err != nil {
					return nil, toStatus(err)
				}
				held = nil
			}
			if out.GetFinal() {
				held = out
				continue
			}
			if err := stream.Send(out); err != nil {
				return nil, toStatus(err)
			}
		case data := <-in.data:
			select {
			case nc.in <- data:
			case <-nc.gone:
			case <-ctx.Done():
				return nil, toStatus(ctx.Err())
			}
		case err := <-in.err:
			if errors.Is(err, io.EOF) {
				// The client closed its input; output goes on until the
				// node or the client ends the session.
				in.err = nil
				continue
			}
			return nil, toStatus(err)
		case <-ctx.Done():
			return nil, toStatus(ctx.Err())
		}
	}
}

// nodeEnded maps how the node's Serve stream ended to the client's status:
// the node closing it is the normal end of a console.
func nodeEnded(err error, node string) error {
	if err == nil || errors.Is(err, io.EOF) {
		return nil
	}
	return status.Error(codes.Unavailable, fmt.Sprintf("node %s ended the console: %v", node, err))
}

func (c *consoleService) Sessions(req *apiv1.ConsoleSessionsRequest, stream apiv1.Consoles_SessionsServer) error {
	node := req.GetNodeName()
	if node == "" {
		return status.Error(codes.InvalidArgument, "node_name: Required value")
	}
	ctx := stream.Context()
	ns, err := c.s.consoles.register(node, ctx.Done())
	if err != nil {
		return err
	}
	defer c.s.consoles.unregister(node, ns)
	// Headers at once tell the node agent that it is registered.
	if err := stream.SendHeader(nil); err != nil {
		return toStatus(err)
	}
	for {
		select {
		case <-ctx.Done():
			return toStatus(ctx.Err())
		case s := <-ns.sessions:
			if err := stream.Send(s); err != nil {
				return toStatus(err)
			}
		}
	}
}

func (c *consoleService) Serve(stream apiv1.Consoles_ServeServer) error {
	ctx := stream.Context()
	first, err := stream.Recv()
	if err != nil {
		return toStatus(err)
	}
	id := first.GetSessionId()
	if id == "" {
		return status.Error(codes.InvalidArgument, "session_id: Required value: the first message must name the session")
	}
	nc := newNodeConsole()
	defer close(nc.gone)
	go nc.receive(stream)
	// A node serves only the sessions handed to it (authz.go lets nodes
	// call Serve at all).
	var node string
	if who := IdentityFrom(ctx); who.Kind == Node {
		node = who.Node
	}
	if !c.s.consoles.claim(id, node, nc) {
		nc.end()
		return status.Errorf(codes.NotFound, "console session %s: unknown, or its client gave up", id)
	}
	for {
		select {
		case data := <-nc.in:
			if err := stream.Send(&apiv1.ConsoleInput{Data: data}); err != nil {
				return toStatus(err)
			}
		case <-nc.done:
			return nil
		case <-ctx.Done():
			return toStatus(ctx.Err())
		}
	}
}
