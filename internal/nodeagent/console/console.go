// Package console is the node agent's console room: it serves the serial
// consoles the API hands the node over a reverse Sessions stream (the
// node needs no listener), sends the console log virtlogd writes (kept
// and followed across rotations), passes client input to the guest's
// serial pty, and keeps an ended instance's log under its VM.
//
// The node agent tells it which instances run here and where their serial
// ptys are (Instances); everything else it owns.
package console

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/utils/clock"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/nodedir"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/state"
)

// Notices a console session ends with.
const (
	NoticeInstanceEnded = "instance ended"
	noticeNotRunning    = "not running: no instance of %s runs on node %s (its last console log is kept: use --log)"
	noticeNoLog         = "no console log of %s is kept on node %s"
)

// API is what the console uses of the API's Consoles service.
type API interface {
	Sessions(ctx context.Context, in *apiv1.ConsoleSessionsRequest, opts ...grpc.CallOption) (apiv1.Consoles_SessionsClient, error)
	Serve(ctx context.Context, opts ...grpc.CallOption) (apiv1.Consoles_ServeClient, error)
}

// Instances is what the console asks the node agent about the instances
// it handles.
type Instances interface {
	// Record returns the state record of VMI uid while the VMI is
	// handled on this node, or nil; cleanup drops the record after the
	// files.
	Record(uid string) *state.VMI
	// SerialPty returns the serial pty of rec's running domain, as its
	// launcher reports it.
	SerialPty(ctx context.Context, rec *state.VMI) (string, error)
}

// Options configure a Server.
type Options struct {
	NodeName string
	// APIs carry the sessions, one per server of the control plane: a
	// server hands a session only to the nodes that keep a Sessions
	// stream with it, so the node keeps one with each. None serves none.
	APIs      []API
	Instances Instances
	Layout    nodedir.Layout
	// Clock times reconnection backoff, log polling and the wait (at
	// most 5 s) for the API to end a session's stream after the node
	// half-closed it; the real clock when nil.
	Clock  clock.WithTicker
	Logger *slog.Logger
}

// Server serves a node's consoles.
type Server struct {
	opts Options
	log  *slog.Logger
}

// New returns a Server; call Run to serve.
func New(opts Options) *Server {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Server{opts: opts, log: opts.Logger}
}

// Run keeps a Sessions stream open with every API, so that each server
// can hand this node console sessions, and serves each session in its own
// goroutine until ctx ends.
func (s *Server) Run(ctx context.Context) {
	if len(s.opts.APIs) == 0 {
		s.log.Warn("the API client has no console service; consoles are not served")
		return
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	for i, api := range s.opts.APIs {
		wg.Go(func() { s.runWith(ctx, api, i, &wg) })
	}
}

// runWith keeps the Sessions stream with one API (server i of the list),
// reconnecting with backoff.
func (s *Server) runWith(ctx context.Context, api API, i int, wg *sync.WaitGroup) {
	log := s.log
	if len(s.opts.APIs) > 1 {
		log = log.With("server", i+1)
	}
	backoff := 100 * time.Millisecond
	for {
		connected, err := s.receiveSessions(ctx, api, wg)
		if ctx.Err() != nil {
			return
		}
		wait := backoff
		switch {
		case connected:
			backoff = 100 * time.Millisecond // it worked: start over
			wait = backoff
		case status.Code(err) == codes.Unimplemented:
			// A server without consoles (older): ask again now and then,
			// it may be upgraded.
			wait = time.Minute
		default:
			backoff = min(backoff*2, 5*time.Second)
		}
		log.Warn("console sessions stream ended; reconnecting", "err", err, "in", wait)
		select {
		case <-ctx.Done():
			return
		case <-s.opts.Clock.After(wait):
		}
	}
}

// receiveSessions serves the sessions of one Sessions stream until it
// ends; connected says whether the API accepted the stream.
func (s *Server) receiveSessions(ctx context.Context, api API, wg *sync.WaitGroup) (connected bool, err error) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := api.Sessions(sctx, &apiv1.ConsoleSessionsRequest{NodeName: s.opts.NodeName})
	if err != nil {
		return false, fmt.Errorf("opening console sessions stream: %w", err)
	}
	// The API sends headers as soon as it registered the stream.
	if md, err := stream.Header(); err == nil && md != nil {
		connected = true
		s.log.Debug("console sessions stream open")
	}
	for {
		cs, err := stream.Recv()
		if err != nil {
			return connected, fmt.Errorf("console sessions stream: %w", err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.serve(ctx, api, cs)
		}()
	}
}

// session is one console served to the API.
type session struct {
	srv    *Server
	s      *apiv1.ConsoleSession
	stream apiv1.Consoles_ServeClient
	log    *slog.Logger
	// inputDone is closed when the API ended the stream (or it broke).
	inputDone chan struct{}
	// input is where client input goes (nil drops it); set once, before
	// inputReady is closed. Input waits for it, so that none typed while
	// the session starts is lost.
	input      func([]byte)
	inputReady chan struct{}
	inputOnce  sync.Once
}

// serve serves session cs over a Serve stream to the server that handed
// it (api): the kept log and live output out, client input to the serial
// port when interactive.
func (s *Server) serve(ctx context.Context, api API, cs *apiv1.ConsoleSession) {
	open := cs.GetOpen()
	log := s.log.With("session", cs.GetSessionId(), "vmi", apiv1.Ref(open.GetNamespace(), open.GetName()),
		"interactive", open.GetInteractive(), "log", open.GetLog(), "follow", open.GetFollow())
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := api.Serve(ctx)
	if err == nil {
		err = stream.Send(&apiv1.ConsoleOutput{SessionId: cs.GetSessionId()})
	}
	if err != nil {
		log.Warn("console session could not be served", "err", err)
		return
	}
	ss := &session{srv: s, s: cs, stream: stream, log: log, inputDone: make(chan struct{}), inputReady: make(chan struct{})}
	go ss.receive(ctx, cancel)
	log.Debug("console session started")
	notice, err := ss.run(ctx)
	if err != nil && ctx.Err() == nil {
		log.Warn("console session failed", "err", err)
		notice = "console error: " + err.Error()
	}
	if ctx.Err() != nil {
		log.Debug("console session ended by the client")
		return
	}
	if notice != "" {
		_ = stream.Send(&apiv1.ConsoleOutput{Notice: notice, Final: true})
	}
	// Half-close, then wait for the API to end the stream, so that the
	// last output is delivered before the stream is torn down.
	_ = stream.CloseSend()
	select {
	case <-ss.inputDone:
	case <-s.opts.Clock.After(5 * time.Second):
	}
	log.Debug("console session ended", "notice", notice)
}

// receive passes client input on until the API ends the stream, which
// ends the session.
func (ss *session) receive(ctx context.Context, cancel context.CancelFunc) {
	defer close(ss.inputDone)
	defer cancel()
	for {
		in, err := ss.stream.Recv()
		if err != nil {
			return
		}
		if len(in.GetData()) == 0 {
			continue
		}
		select {
		case <-ss.inputReady:
		case <-ctx.Done():
			return
		}
		if ss.input != nil {
			ss.input(in.GetData())
		}
	}
}

// enableInput decides where client input goes (nil: nowhere); only the
// first call counts.
func (ss *session) enableInput(fn func([]byte)) {
	ss.inputOnce.Do(func() {
		ss.input = fn
		close(ss.inputReady)
	})
}

func (ss *session) send(b []byte) error {
	return ss.stream.Send(&apiv1.ConsoleOutput{Data: b})
}

func (ss *session) notice(msg string) error {
	return ss.stream.Send(&apiv1.ConsoleOutput{Notice: msg})
}

// run sends the console output the session asks for and returns the
// notice to end it with.
func (ss *session) run(ctx context.Context) (string, error) {
	srv, s, open := ss.srv, ss.s, ss.s.GetOpen()
	defer ss.enableInput(nil) // whatever happens, input stops waiting
	key := apiv1.Ref(open.GetNamespace(), open.GetName())
	rec := srv.record(s.GetVmiUid())
	if rec == nil {
		return ss.ended(key)
	}
	// The instance is here while this stay's record is: not once it
	// migrated away (the record lingers, marked, until the node removes
	// what the instance left), nor when a record of a later stay replaced
	// it (the instance came back; its console log is a new file). The
	// API then follows the instance to where it runs.
	live := func() bool {
		r := srv.record(rec.UID)
		return r != nil && r.MigratedAway == "" && r.CreatedAt.Equal(rec.CreatedAt)
	}
	if err := srv.opts.Layout.CheckVMIDir(rec.UID, rec.Dir); err != nil {
		return "", err
	}
	path := nodedir.ConsoleLogPath(rec.Dir)
	var (
		fl  *logFollower
		err error
	)
	if open.GetLog() {
		fl, err = sendKept(path, open.GetTailBytes(), ss.send)
	} else {
		fl, err = followFromEnd(path, ss.send)
	}
	if err != nil {
		return "", err
	}
	defer fl.Close()
	// Input only once the log is read up to now, so that the guest's
	// answer is in what follows.
	if open.GetInteractive() {
		w, err := srv.openSerial(ctx, rec)
		if err != nil {
			if err := ss.notice("read-only console: " + err.Error()); err != nil {
				return "", err
			}
		} else {
			defer w.Close()
			ss.enableInput(w.write)
		}
	}
	ss.enableInput(nil)
	if !open.GetFollow() {
		return "", nil
	}
	if err := fl.follow(ctx, srv.opts.Clock, logPoll, live); err != nil {
		return "", err
	}
	return NoticeInstanceEnded, nil
}

// ended serves the console of an instance that no longer runs here: its
// kept log, if asked for.
func (ss *session) ended(key string) (string, error) {
	srv, s, open := ss.srv, ss.s, ss.s.GetOpen()
	if !open.GetLog() {
		return fmt.Sprintf(noticeNotRunning, key, srv.opts.NodeName), nil
	}
	path, err := srv.keptLogPath(s.GetVmUid(), s.GetVmiUid())
	if err != nil {
		return "", err
	}
	if path == "" {
		return fmt.Sprintf(noticeNoLog, key, srv.opts.NodeName), nil
	}
	fl, err := sendKept(path, open.GetTailBytes(), ss.send)
	if err != nil {
		return "", err
	}
	fl.Close()
	return NoticeInstanceEnded, nil
}

// record returns the state record of VMI uid while it is handled on this
// node, or nil.
func (s *Server) record(uid string) *state.VMI {
	if uid == "" {
		return nil
	}
	return s.opts.Instances.Record(uid)
}
