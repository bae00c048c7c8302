package apiserver

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"
)

// Limits bound what one caller may cost the server. Zero fields take the
// defaults below.
type Limits struct {
	// MaxRecvMsgSize caps a request message, whatever its method: grpc
	// refuses a larger one from its length prefix, before reading it.
	// Each method has a limit of its own (reqlimits.go), which the codec
	// applies after the read and before decoding.
	MaxRecvMsgSize int
	// MaxConcurrentStreams per TLS connection (HTTP/2 SETTINGS): further
	// streams wait on the client side.
	MaxConcurrentStreams uint32
	// Streams per identity open at once (watches, console sessions).
	AdminStreams, NodeStreams int
	// Requests per second (and burst) per identity on TLS listeners; the
	// root-only unix socket is not rate-limited.
	AdminRate, NodeRate, AnonymousRate    rate.Limit
	AdminBurst, NodeBurst, AnonymousBurst int
	// Calls per identity in flight at once on TLS listeners, counted from
	// the tap handle (before a request is read) until the call ends (a
	// stream: until its request is read), and of those the calls of
	// methods that take large requests (reqlimits.go). Every call's
	// request may be read up to MaxRecvMsgSize, so these bound what one
	// identity makes the server hold; the unix socket is not limited.
	AdminRequests, NodeRequests, AnonymousRequests int
	AdminLargeRequests, NodeLargeRequests          int
}

// Defaults of Limits.
const (
	// The largest request any method takes (a stored object, 1.5 MiB):
	// nothing larger is read at all.
	DefaultMaxRecvMsgSize       = storedRequest
	DefaultMaxConcurrentStreams = 256
	DefaultAdminStreams         = 1024
	// A node holds its VMI watch, its console session stream and one
	// stream per open console.
	DefaultNodeStreams = 128
	// Terraform makes at most its parallelism (10) calls at once and the
	// CLI one (the provider's acceptance tests and the benchmark use the
	// unix socket): 32 leaves room for a few of them at once, 16 for
	// Terraform's ten VM creates or updates (large requests) and more.
	// 32 requests of MaxRecvMsgSize are 48 MiB.
	DefaultAdminRequests      = 32
	DefaultAdminLargeRequests = 16
	// A node agent makes a call at a time per VMI worker (--node-workers,
	// default twice the CPUs), image pull worker (2), snapshot and restore
	// worker (1 each), plus its heartbeat and console session; almost all
	// of a worker's time goes to libvirt and the guest, not to its call.
	// Its large requests are its status writes, which carry the instance.
	DefaultNodeRequests      = 64
	DefaultNodeLargeRequests = 32
	// Joins, per source address: one per joining node.
	DefaultAnonymousRequests = 4
)

func (l Limits) withDefaults() Limits {
	if l.MaxRecvMsgSize == 0 {
		l.MaxRecvMsgSize = DefaultMaxRecvMsgSize
	}
	if l.MaxConcurrentStreams == 0 {
		l.MaxConcurrentStreams = DefaultMaxConcurrentStreams
	}
	if l.AdminStreams == 0 {
		l.AdminStreams = DefaultAdminStreams
	}
	if l.NodeStreams == 0 {
		l.NodeStreams = DefaultNodeStreams
	}
	// Terraform refreshing a few hundred VMs with parallelism 10 stays far
	// below the admin rate; a node beats every 10 s and updates statuses
	// as its VMIs change.
	if l.AdminRate == 0 {
		l.AdminRate, l.AdminBurst = 500, 1000
	}
	if l.NodeRate == 0 {
		l.NodeRate, l.NodeBurst = 50, 200
	}
	// Joins only, per source address.
	if l.AnonymousRate == 0 {
		l.AnonymousRate, l.AnonymousBurst = 1, 5
	}
	if l.AdminRequests == 0 {
		l.AdminRequests = DefaultAdminRequests
	}
	if l.AdminLargeRequests == 0 {
		l.AdminLargeRequests = min(DefaultAdminLargeRequests, l.AdminRequests)
	}
	if l.NodeRequests == 0 {
		l.NodeRequests = DefaultNodeRequests
	}
	if l.NodeLargeRequests == 0 {
		l.NodeLargeRequests = min(DefaultNodeLargeRequests, l.NodeRequests)
	}
	if l.AnonymousRequests == 0 {
		l.AnonymousRequests = DefaultAnonymousRequests
	}
	return l
}

// limiter enforces Limits per identity.
type limiter struct {
	l       Limits
	metrics *Metrics

	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	rate    *rate.Limiter
	streams int
	// requests in flight, and those of large-request methods.
	requests, large int
}

func newLimiter(l Limits, m *Metrics) *limiter {
	return &limiter{l: l.withDefaults(), metrics: m, buckets: map[string]*bucket{}}
}

// maxBuckets bounds the table.
const maxBuckets = 10000

func (lm *limiter) bucketLocked(id Identity) *bucket {
	k := id.limitKey()
	b := lm.buckets[k]
	if b == nil {
		if len(lm.buckets) >= maxBuckets {
			// Anonymous callers come from any address: drop the buckets
			// of callers with no open stream or call. Their rate state
			// restarts full, which costs at most one burst each.
			for k, b := range lm.buckets {
				if b.streams == 0 && b.requests == 0 {
					delete(lm.buckets, k)
				}
			}
		}
		r, burst := lm.l.AdminRate, lm.l.AdminBurst
		switch id.Kind {
		case Node:
			r, burst = lm.l.NodeRate, lm.l.NodeBurst
		case Anonymous:
			r, burst = lm.l.AnonymousRate, lm.l.AnonymousBurst
		}
		b = &bucket{rate: rate.NewLimiter(r, burst)}
		lm.buckets[k] = b
	}
	return b
}

// allow takes one request from id's rate bucket.
func (lm *limiter) allow(id Identity, method string) error {
	if id.Trusted {
		return nil
	}
	lm.mu.Lock()
	ok := lm.bucketLocked(id).rate.Allow()
	lm.mu.Unlock()
	if !ok {
		lm.refused(method, "rate")
		return status.Errorf(codes.ResourceExhausted, "%s: request rate limit exceeded; retry with backoff", id)
	}
	return nil
}

// openStream counts a stream of id; release ends it.
func (lm *limiter) openStream(id Identity, method string) (release func(), err error) {
	max := lm.l.AdminStreams
	if id.Kind == Node {
		max = lm.l.NodeStreams
	}
	lm.mu.Lock()
	b := lm.bucketLocked(id)
	if b.streams >= max {
		lm.mu.Unlock()
		lm.refused(method, "streams")
		return nil, status.Errorf(codes.ResourceExhausted, "%s already has %d streams open (the limit); close some first", id, max)
	}
	b.streams++
	lm.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			lm.mu.Lock()
			b.streams--
			lm.mu.Unlock()
		})
	}, nil
}

// startRequest counts a call of id in flight until release, which may be
// called more than once. Calls of methods that take large requests
// (largeRequest) count against the smaller large cap too.
func (lm *limiter) startRequest(id Identity, method string) (release func(), err error) {
	if id.Trusted {
		return func() {}, nil
	}
	most, mostLarge := lm.l.AdminRequests, lm.l.AdminLargeRequests
	switch id.Kind {
	case Node:
		most, mostLarge = lm.l.NodeRequests, lm.l.NodeLargeRequests
	case Anonymous:
		// Anonymous callers may call Join only, a small request.
		most, mostLarge = lm.l.AnonymousRequests, 0
	}
	large := largeRequest(method)
	lm.mu.Lock()
	b := lm.bucketLocked(id)
	switch {
	case b.requests >= most:
		lm.mu.Unlock()
		lm.refused(method, "requests")
		return nil, status.Errorf(codes.ResourceExhausted, "%s already has %d calls in flight (the limit); retry when they end", id, most)
	case large && b.large >= mostLarge:
		lm.mu.Unlock()
		lm.refused(method, "large_requests")
		return nil, status.Errorf(codes.ResourceExhausted, "%s already has %d calls with large requests in flight (the limit); retry when they end", id, mostLarge)
	}
	b.requests++
	if large {
		b.large++
	}
	lm.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			lm.mu.Lock()
			b.requests--
			if large {
				b.large--
			}
			lm.mu.Unlock()
		})
	}, nil
}

func (lm *limiter) refused(method, reason string) {
	if lm.metrics != nil {
		svc, m := splitMethod(method)
		lm.metrics.refusals.WithLabelValues(svc, m, reason).Inc()
	}
}

// streamLimit caps the streams each identity holds open.
func (s *Server) streamLimit(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	release, err := s.limits.openStream(IdentityFrom(ss.Context()), info.FullMethod)
	if err != nil {
		return err
	}
	defer release()
	return h(srv, ss)
}

type requestSlotKey struct{}

// requestDone ends a unary call's in-flight count when its handler
// returns, before grpc writes the response, so that a caller at its limit
// can make its next call as soon as it has the answer.
func requestDone(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if release, ok := ctx.Value(requestSlotKey{}).(func()); ok {
		defer release()
	}
	return h(ctx, req)
}

// requestRead ends a stream's in-flight count once its first message (a
// server stream's request, a console's open) has been read: a stream is
// long-lived, and what it holds from then on the stream limit bounds.
func requestRead(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	if release, ok := ss.Context().Value(requestSlotKey{}).(func()); ok {
		ss = &firstRecv{ServerStream: ss, done: release}
	}
	return h(srv, ss)
}

// firstRecv calls done once its first RecvMsg has returned.
type firstRecv struct {
	grpc.ServerStream
	done func()
}

func (f *firstRecv) RecvMsg(m any) error {
	err := f.ServerStream.RecvMsg(m)
	f.done()
	return err
}

// recoverUnary turns a handler's panic into an Internal error for that
// call alone, instead of the whole agent and every VM's control.
func recoverUnary(log *slog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (resp any, err error) {
		defer func() {
			if r := recover(); r != nil {
				log.Error("API handler panicked", "method", info.FullMethod, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
				err = status.Error(codes.Internal, "internal error (logged by the server)")
			}
		}()
		return h(ctx, req)
	}
}

func recoverStream(log *slog.Logger) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) (err error) {
		defer func() {
			if r := recover(); r != nil {
				log.Error("API handler panicked", "method", info.FullMethod, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
				err = status.Error(codes.Internal, "internal error (logged by the server)")
			}
		}()
		return h(srv, ss)
	}
}

// Keepalive: the server pings idle connections so that a vanished node's
// streams (its console session stream above all) end within a minute, and
// refuses clients that ping more often than every 10 s.
var (
	keepaliveParams = keepalive.ServerParameters{Time: 30 * time.Second, Timeout: 15 * time.Second}
	keepalivePolicy = keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}
)

// ServerOptions are the grpc options of one listener: authentication,
// method authorization and the rate and in-flight limits in the tap
// handle (before bodies are read), message sizes (reqlimits.go) and
// stream limits,
// keepalive, panic recovery, metrics, the audit trail (audit.go),
// authorization per method, and any extra interceptors (run last, just
// before the handler).
func (s *Server) ServerOptions(l Listener, unary []grpc.UnaryServerInterceptor, stream []grpc.StreamServerInterceptor) []grpc.ServerOption {
	lim := s.limits.l
	us := []grpc.UnaryServerInterceptor{requestDone, s.oversize.unary, recoverUnary(s.log)}
	ss := []grpc.StreamServerInterceptor{s.oversize.stream, recoverStream(s.log)}
	if m := s.opts.Metrics; m != nil {
		us, ss = append(us, m.Unary), append(ss, m.Stream)
	}
	// The audit interceptors wrap authorization, so that a call its
	// checks of the request refuse is recorded with that refusal
	// (the tap handle's refusals are recorded there: auditRefused).
	us = append(append(us, s.auditUnary, s.authorizeUnary, requireLeaderUnary), unary...)
	ss = append(append(ss, requestRead, s.auditStream, s.streamLimit, s.authorizeStream, requireLeaderStream), stream...)
	opts := []grpc.ServerOption{
		grpc.InTapHandle(s.tapHandle(l)),
		grpc.MaxRecvMsgSize(lim.MaxRecvMsgSize),
		grpc.ForceServerCodecV2(newLimitCodec(s.limits.refused, s.oversize)),
		grpc.ChainUnaryInterceptor(us...),
		grpc.ChainStreamInterceptor(ss...),
	}
	if !l.Unix {
		opts = append(opts,
			grpc.MaxConcurrentStreams(lim.MaxConcurrentStreams),
			grpc.KeepaliveParams(keepaliveParams),
			grpc.KeepaliveEnforcementPolicy(keepalivePolicy),
			// The TLS handshake must finish in this time: a connection that
			// sends nothing holds no goroutine for long.
			grpc.ConnectionTimeout(10*time.Second),
		)
	}
	return opts
}
