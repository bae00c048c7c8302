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
	// MaxRecvMsgSize caps a request message. The largest legitimate one is
	// a VM with every field at its limit (validation.MaxObjectBytes, 1 MiB;
	// 982 KiB measured), so 2 MiB leaves room for the request around it
	// while a caller can no longer make the server buffer grpc's 4 MiB
	// default per stream.
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
}

// Defaults of Limits.
const (
	DefaultMaxRecvMsgSize       = 2 << 20
	DefaultMaxConcurrentStreams = 256
	DefaultAdminStreams         = 1024
	// A node holds its VMI watch, its console session stream and one
	// stream per open console.
	DefaultNodeStreams = 128
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
			// of callers with no open stream. Their rate state restarts
			// full, which costs at most one burst each.
			for k, b := range lm.buckets {
				if b.streams == 0 {
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

// ServerOptions are the grpc options of one listener: authentication in
// the tap handle (before bodies are read), message and stream limits,
// keepalive, panic recovery, metrics, authorization per method, and any
// extra interceptors (run last, just before the handler).
func (s *Server) ServerOptions(l Listener, unary []grpc.UnaryServerInterceptor, stream []grpc.StreamServerInterceptor) []grpc.ServerOption {
	lim := s.limits.l
	us := []grpc.UnaryServerInterceptor{recoverUnary(s.log)}
	ss := []grpc.StreamServerInterceptor{recoverStream(s.log)}
	if m := s.opts.Metrics; m != nil {
		us, ss = append(us, m.Unary), append(ss, m.Stream)
	}
	us = append(append(us, s.authorizeUnary, requireLeaderUnary), unary...)
	ss = append(append(ss, s.streamLimit, s.authorizeStream, requireLeaderStream), stream...)
	opts := []grpc.ServerOption{
		grpc.InTapHandle(s.tapHandle(l)),
		grpc.MaxRecvMsgSize(lim.MaxRecvMsgSize),
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
