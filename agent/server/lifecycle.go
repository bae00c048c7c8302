package server

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
)

// Shutdown stops the agent and returns by ctx's deadline whatever is stuck
// (a call that ignores cancellation, a controller, etcd's close): a step
// still running when its time is up is left behind and named in the log,
// so SIGTERM ends the process within --shutdown-timeout. Steps run in
// order, each bounded by a share of the time left so that one stuck step
// does not starve the rest: the node agent (its last heartbeat needs the
// API), the API's in-flight calls, the metrics listener, the controllers
// and other background work, and last the store, whose acknowledged
// writes are on disk already.
func (a *Agent) Shutdown(ctx context.Context) {
	start := time.Now()
	var stuck []string

	// A third of the time: stopping the node agent is quick unless it is
	// stuck, and a stuck one must leave time to the rest.
	nctx, cancel := share(ctx, 3)
	a.stopNodeAgent(nctx)
	cancel()
	if a.nodeDone != nil && !closed(a.nodeDone) {
		stuck = append(stuck, "node agent")
	}

	// In-flight calls get half of what is left: watches never end by
	// themselves, so with any watch open the graceful stop lasts all it is
	// given, and the controllers and the store must still get their turn.
	stuck = append(stuck, a.stopGRPC(ctx)...)
	// The calls have ended and written their records; what is queued for
	// syslog gets a few seconds (audit.Logger.Close).
	if err := a.audit.Close(); err != nil {
		a.log.Warn("closing the audit log", "err", err)
	}

	if a.httpSrv != nil {
		// A scrape is quick, but a CPU profile runs for its 30 s.
		hctx, cancel := share(ctx, 3)
		if err := a.httpSrv.Shutdown(hctx); err != nil {
			_ = a.httpSrv.Close() // drops what still runs
		}
		cancel()
	}
	if a.cancel != nil {
		a.cancel()
	}
	// Half of what is left, so that the store is closed even when a
	// controller does not stop: its writes would fail anyway.
	cctx, cancel := share(ctx, 2)
	if !waitFor(cctx, a.wg.Wait) {
		stuck = append(stuck, "controllers or listeners")
	}
	cancel()
	switch {
	case a.etcd != nil:
		if !waitFor(ctx, func() { _ = a.etcd.Close() }) {
			stuck = append(stuck, "embedded etcd")
		}
	case a.client != nil:
		if !waitFor(ctx, func() { _ = a.client.Close() }) {
			stuck = append(stuck, "etcd client")
		}
	}
	// The unix socket is not removed here: its listener unlinks it when the
	// gRPC server closes it, so a socket this agent never bound (another
	// agent's, or a file at the path) is left alone.
	if len(stuck) > 0 {
		a.log.Error("agent shutdown gave up waiting; exiting anyway", "stuck", stuck,
			"after", time.Since(start).Round(time.Millisecond))
		return
	}
	a.log.Info("agent stopped")
}

// stopGRPC stops the API servers: a graceful stop for half of the time ctx
// has left, then a hard one (which cancels every call) bounded by half of
// the rest. It returns the servers that had not stopped by then.
func (a *Agent) stopGRPC(ctx context.Context) []string {
	gctx, cancel := share(ctx, 2)
	defer cancel()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		stuck []string
	)
	for name, s := range map[string]*grpc.Server{"API on the unix socket": a.unixSrv, "API on the TLS listener": a.tcpSrv} {
		if s == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			stopped := make(chan struct{})
			go func() { s.GracefulStop(); close(stopped) }()
			select {
			case <-stopped:
				return
			case <-gctx.Done():
			}
			// Stop ends GracefulStop too; both return once every call
			// handler has, which a handler deaf to cancellation delays.
			hctx, cancel := share(ctx, 2)
			defer cancel()
			if !waitFor(hctx, s.Stop) {
				mu.Lock()
				stuck = append(stuck, name)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return stuck
}

// share is ctx bounded to 1/n of the time it has left, so that one stuck
// step leaves time to the steps after it. Without a deadline it is ctx.
func share(ctx context.Context, n int) (context.Context, context.CancelFunc) {
	dl, ok := ctx.Deadline()
	if !ok {
		return context.WithCancel(ctx)
	}
	return context.WithDeadline(ctx, time.Now().Add(time.Until(dl)/time.Duration(n)))
}

// waitFor runs fn and reports whether it returned before ctx ended. fn
// always starts, so a late close still happens while the process lives.
func waitFor(ctx context.Context, fn func()) bool {
	done := make(chan struct{})
	go func() { fn(); close(done) }()
	select {
	case <-done:
		return true
	case <-ctx.Done():
		return closed(done)
	}
}

func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// socketUmask is the umask while the API socket is bound: bind(2) creates
// the file with mode 0777 minus the umask, so the socket is never, even for
// an instant, open to group or others. The umask is process-wide, which is
// safe here: Start binds the socket before the node agent and its
// launchers (child processes inherit the umask) exist, so only etcd's
// goroutines run meanwhile, and its files are 0600 and 0700 anyway. Only
// group and other bits are masked, so a directory created in that instant
// keeps its owner's search bit; the owner's execute bit on a socket means
// nothing (connect needs write permission).
const socketUmask = 0o077

// listenUnix listens on path, the API's root-only socket (--socket). Its
// directory is created 0700; an existing one that others may write to is
// refused, since whoever can write there can put their own socket at path
// and receive what local clients send (VM specs, user data). A stale socket
// at path is replaced, a live one (another agent) or anything that is not
// a socket is refused and left as it is.
func listenUnix(path string) (net.Listener, error) {
	if err := ensureSocketDir(filepath.Dir(path)); err != nil {
		return nil, fmt.Errorf("--socket %s: %w", path, err)
	}
	st, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("--socket %s: %w", path, err)
	case st.Mode().Type() != fs.ModeSocket:
		return nil, fmt.Errorf("--socket %s: the path exists and is not a socket (%s); refusing to replace it", path, fileType(st.Mode()))
	default:
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("--socket %s: another agent is serving it", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("--socket %s: removing the stale socket: %w", path, err)
		}
	}
	old := unix.Umask(socketUmask)
	l, err := net.Listen("unix", path)
	unix.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("--socket: %w", err)
	}
	// 0700 from bind is as private; 0600 is the documented mode.
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return nil, fmt.Errorf("--socket %s: restricting its mode: %w", path, err)
	}
	return l, nil
}

// ensureSocketDir creates dir 0700, or checks that an existing dir is a
// directory no one but its owner (this user or root) can write to.
// Tightening an existing one instead could break whatever else uses it
// (it may be /run or /tmp), so that is the operator's call.
func ensureSocketDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating the socket directory: %w", err)
	}
	st, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("socket directory: %w", err)
	}
	if !st.IsDir() {
		return fmt.Errorf("socket directory %s is not a directory", dir)
	}
	if st.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("socket directory %s is writable by group or others (%s): anyone who can write there can put their own socket in the agent's place; use a directory only its owner can write (e.g. chmod go-w, or a new directory, which the agent creates 0700)",
			dir, st.Mode())
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && int(sys.Uid) != os.Geteuid() && sys.Uid != 0 {
		return fmt.Errorf("socket directory %s belongs to uid %d, neither this user nor root: its owner could replace the socket", dir, sys.Uid)
	}
	return nil
}

// fileType names a mode's file type for an error message.
func fileType(m fs.FileMode) string {
	switch m.Type() {
	case 0:
		return "a regular file"
	case fs.ModeDir:
		return "a directory"
	case fs.ModeSymlink:
		return "a symbolic link"
	case fs.ModeNamedPipe:
		return "a named pipe"
	case fs.ModeDevice, fs.ModeDevice | fs.ModeCharDevice:
		return "a device"
	}
	return m.Type().String()
}
