package apiserver

import (
	"context"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// consoleHandoff bounds how long Attach waits for a node to take a
// session and open its Serve stream.
const consoleHandoff = 10 * time.Second

// consoleHub routes console sessions: node name → the node's open
// Sessions stream, and session id → the Attach waiting for the node's
// Serve stream. It lives in this process only, so a node's consoles are
// reachable through the server it keeps its Sessions stream with.
type consoleHub struct {
	mu      sync.Mutex
	nodes   map[string]*nodeSessions
	pending map[string]pendingSession
}

// pendingSession is an Attach waiting for the node it was handed to.
type pendingSession struct {
	node  string
	ready chan *nodeConsole
}

func newConsoleHub() *consoleHub {
	return &consoleHub{nodes: map[string]*nodeSessions{}, pending: map[string]pendingSession{}}
}

// nodeSessions is one open Sessions stream of a node.
type nodeSessions struct {
	sessions chan *apiv1.ConsoleSession
	closed   <-chan struct{}
}

// register makes ns the node's Sessions stream. A second stream for a
// node is refused while the first is open: whoever holds it receives what
// users type at that node's consoles. A node agent that reconnects finds
// its old stream gone (its connection closed, or keepalive ended it) and
// retries until then.
func (h *consoleHub) register(node string, closed <-chan struct{}) (*nodeSessions, error) {
	ns := &nodeSessions{sessions: make(chan *apiv1.ConsoleSession), closed: closed}
	h.mu.Lock()
	defer h.mu.Unlock()
	if old := h.nodes[node]; old != nil {
		select {
		case <-old.closed:
		default:
			return nil, status.Errorf(codes.AlreadyExists, "node %s already holds its console session stream", node)
		}
	}
	h.nodes[node] = ns
	return ns, nil
}

func (h *consoleHub) unregister(node string, ns *nodeSessions) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.nodes[node] == ns {
		delete(h.nodes, node)
	}
}

// handOff gives sess to node and waits for the node's Serve stream of it.
func (h *consoleHub) handOff(ctx context.Context, node string, sess *apiv1.ConsoleSession) (*nodeConsole, error) {
	h.mu.Lock()
	ns := h.nodes[node]
	ready := make(chan *nodeConsole, 1)
	if ns != nil {
		h.pending[sess.SessionId] = pendingSession{node: node, ready: ready}
	}
	h.mu.Unlock()
	if ns == nil {
		return nil, status.Errorf(codes.Unavailable, "node %s is not connected for consoles", node)
	}
	timer := time.NewTimer(consoleHandoff)
	defer timer.Stop()
	var err error
	select {
	case ns.sessions <- sess:
		select {
		case nc := <-ready:
			return nc, nil
		case <-timer.C:
			err = status.Errorf(codes.Unavailable, "node %s took the console session but did not serve it within %s", node, consoleHandoff)
		case <-ctx.Done():
			err = toStatus(ctx.Err())
		}
	case <-ns.closed:
		err = status.Errorf(codes.Unavailable, "node %s is not connected for consoles", node)
	case <-timer.C:
		err = status.Errorf(codes.Unavailable, "node %s did not take the console session within %s", node, consoleHandoff)
	case <-ctx.Done():
		err = toStatus(ctx.Err())
	}
	// Given up; a Serve that claimed the session meanwhile (under the
	// lock, so it is in ready by now) is ended.
	h.mu.Lock()
	delete(h.pending, sess.SessionId)
	h.mu.Unlock()
	select {
	case nc := <-ready:
		nc.end()
	default:
	}
	return nil, err
}

// claim hands a node's Serve stream to the Attach waiting for session id;
// false if none waits for it from node (empty: an admin, any node).
func (h *consoleHub) claim(id, node string, nc *nodeConsole) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	p, ok := h.pending[id]
	if !ok || (node != "" && p.node != node) {
		return false
	}
	delete(h.pending, id)
	p.ready <- nc // buffered; sent under the lock, see handOff
	return true
}

// nodeConsole is a node's Serve stream as Attach sees it.
type nodeConsole struct {
	out     chan *apiv1.ConsoleOutput // from the node; closed when its stream ends
	recvErr error                     // why out was closed; read after it is
	in      chan []byte               // client input, sent on by Serve
	done    chan struct{}             // closed by end: Attach is over
	gone    chan struct{}             // closed when Serve returned
	endOnce sync.Once
}

func newNodeConsole() *nodeConsole {
	return &nodeConsole{
		out: make(chan *apiv1.ConsoleOutput, 16), in: make(chan []byte, 16),
		done: make(chan struct{}), gone: make(chan struct{}),
	}
}

func (nc *nodeConsole) end() { nc.endOnce.Do(func() { close(nc.done) }) }

// receive feeds the node's messages to out until its stream ends.
func (nc *nodeConsole) receive(stream apiv1.Consoles_ServeServer) {
	defer close(nc.out)
	for {
		m, err := stream.Recv()
		if err != nil {
			nc.recvErr = err
			return
		}
		select {
		case nc.out <- m:
		case <-nc.done:
			return
		}
	}
}
