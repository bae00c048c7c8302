package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/state"
)

// Notices a console session ends with.
const (
	NoticeInstanceEnded = "instance ended"
	noticeNotRunning    = "not running: no instance of %s runs on node %s (its last console log is kept: use --log)"
	noticeNoLog         = "no console log of %s is kept on node %s"
)

// consoleLoop keeps a Sessions stream open, so that the API can hand this
// node console sessions, and serves each in its own goroutine. The node
// needs no listener: the API reaches it through this stream.
func (a *Agent) consoleLoop(ctx context.Context) {
	if a.api.Consoles == nil {
		a.log.Warn("the API client has no console service; consoles are not served")
		return
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	backoff := 100 * time.Millisecond
	for {
		connected, err := a.receiveSessions(ctx, &wg)
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
		a.log.Warn("console sessions stream ended; reconnecting", "err", err, "in", wait)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// receiveSessions serves the sessions of one Sessions stream until it
// ends; connected says whether the API accepted the stream.
func (a *Agent) receiveSessions(ctx context.Context, wg *sync.WaitGroup) (connected bool, err error) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := a.api.Consoles.Sessions(sctx, &apiv1.ConsoleSessionsRequest{NodeName: a.opts.NodeName})
	if err != nil {
		return false, fmt.Errorf("opening console sessions stream: %w", err)
	}
	// The API sends headers as soon as it registered the stream.
	if md, err := stream.Header(); err == nil && md != nil {
		connected = true
		a.log.Debug("console sessions stream open")
	}
	for {
		s, err := stream.Recv()
		if err != nil {
			return connected, fmt.Errorf("console sessions stream: %w", err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			a.serveConsole(ctx, s)
		}()
	}
}

// consoleSession is one console served to the API.
type consoleSession struct {
	a      *Agent
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

// serveConsole serves session s over a Serve stream: the kept log and
// live output out, client input to the serial port when interactive.
func (a *Agent) serveConsole(ctx context.Context, s *apiv1.ConsoleSession) {
	open := s.GetOpen()
	log := a.log.With("session", s.GetSessionId(), "vmi", open.GetNamespace()+"/"+open.GetName(),
		"interactive", open.GetInteractive(), "log", open.GetLog(), "follow", open.GetFollow())
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := a.api.Consoles.Serve(ctx)
	if err == nil {
		err = stream.Send(&apiv1.ConsoleOutput{SessionId: s.GetSessionId()})
	}
	if err != nil {
		log.Warn("console session could not be served", "err", err)
		return
	}
	cs := &consoleSession{a: a, s: s, stream: stream, log: log, inputDone: make(chan struct{}), inputReady: make(chan struct{})}
	go cs.receive(ctx, cancel)
	log.Debug("console session started")
	notice, err := cs.run(ctx)
	if err != nil && ctx.Err() == nil {
		log.Warn("console session failed", "err", err)
		notice = "console error: " + err.Error()
	}
	if ctx.Err() != nil {
		log.Debug("console session ended by the client")
		return
	}
	if notice != "" {
		_ = stream.Send(&apiv1.ConsoleOutput{Notice: notice})
	}
	// Half-close, then wait for the API to end the stream, so that the
	// last output is delivered before the stream is torn down.
	_ = stream.CloseSend()
	select {
	case <-cs.inputDone:
	case <-time.After(5 * time.Second):
	}
	log.Debug("console session ended", "notice", notice)
}

// receive passes client input on until the API ends the stream, which
// ends the session.
func (cs *consoleSession) receive(ctx context.Context, cancel context.CancelFunc) {
	defer close(cs.inputDone)
	defer cancel()
	for {
		in, err := cs.stream.Recv()
		if err != nil {
			return
		}
		if len(in.GetData()) == 0 {
			continue
		}
		select {
		case <-cs.inputReady:
		case <-ctx.Done():
			return
		}
		if cs.input != nil {
			cs.input(in.GetData())
		}
	}
}

// enableInput decides where client input goes (nil: nowhere); only the
// first call counts.
func (cs *consoleSession) enableInput(fn func([]byte)) {
	cs.inputOnce.Do(func() {
		cs.input = fn
		close(cs.inputReady)
	})
}

func (cs *consoleSession) send(b []byte) error {
	return cs.stream.Send(&apiv1.ConsoleOutput{Data: b})
}

func (cs *consoleSession) notice(msg string) error {
	return cs.stream.Send(&apiv1.ConsoleOutput{Notice: msg})
}

// run sends the console output the session asks for and returns the
// notice to end it with.
func (cs *consoleSession) run(ctx context.Context) (string, error) {
	a, s, open := cs.a, cs.s, cs.s.GetOpen()
	defer cs.enableInput(nil) // whatever happens, input stops waiting
	key := open.GetNamespace() + "/" + open.GetName()
	rec := a.liveRecord(s.GetVmiUid())
	if rec == nil {
		return cs.ended(key)
	}
	live := func() bool { return a.liveRecord(rec.UID) != nil }
	path := ConsoleLogPath(rec.Dir)
	var (
		fl  *logFollower
		err error
	)
	if open.GetLog() {
		fl, err = sendKept(path, open.GetTailBytes(), cs.send)
	} else {
		fl, err = followFromEnd(path, cs.send)
	}
	if err != nil {
		return "", err
	}
	defer fl.Close()
	// Input only once the log is read up to now, so that the guest's
	// answer is in what follows.
	if open.GetInteractive() {
		w, err := a.openSerial(ctx, rec)
		if err != nil {
			if err := cs.notice("read-only console: " + err.Error()); err != nil {
				return "", err
			}
		} else {
			defer w.Close()
			cs.enableInput(w.write)
		}
	}
	cs.enableInput(nil)
	if !open.GetFollow() {
		return "", nil
	}
	if err := fl.follow(ctx, logPoll, live); err != nil {
		return "", err
	}
	return NoticeInstanceEnded, nil
}

// ended serves the console of an instance that no longer runs here: its
// kept log, if asked for.
func (cs *consoleSession) ended(key string) (string, error) {
	a, s, open := cs.a, cs.s, cs.s.GetOpen()
	if !open.GetLog() {
		return fmt.Sprintf(noticeNotRunning, key, a.opts.NodeName), nil
	}
	path, err := a.keptLogPath(s.GetVmUid(), s.GetVmiUid())
	if err != nil {
		return "", err
	}
	if path == "" {
		return fmt.Sprintf(noticeNoLog, key, a.opts.NodeName), nil
	}
	fl, err := sendKept(path, open.GetTailBytes(), cs.send)
	if err != nil {
		return "", err
	}
	fl.Close()
	return NoticeInstanceEnded, nil
}

// liveRecord returns the state record of VMI uid while it is handled on
// this node, or nil; cleanup drops the record after the files.
func (a *Agent) liveRecord(uid string) *state.VMI {
	if uid == "" {
		return nil
	}
	rec, err := a.db.GetVMI(uid)
	if err != nil {
		if !errors.Is(err, state.ErrNotFound) {
			a.log.Warn("reading state record", "vmi_uid", uid, "err", err)
		}
		return nil
	}
	return rec
}
