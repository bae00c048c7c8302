package apiserver

import (
	"context"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
)

// Metrics counts and times API calls.
type Metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	refusals *prometheus.CounterVec
}

// NewMetrics registers the API collectors with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "virtplane_api_requests_total",
			Help: "API calls by service, method and gRPC code.",
		}, []string{"service", "method", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "virtplane_api_request_duration_seconds",
			Help:    "Latency of unary API calls; for watches, how long the stream was open.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2.5, 14),
		}, []string{"service", "method"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "virtplane_api_refused_total",
			Help: "Calls refused before their handler ran, by reason: unauthenticated, rate, forbidden, requests, large_requests, streams, size.",
		}, []string{"service", "method", "reason"}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.duration, m.refusals} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *Metrics) observe(fullMethod string, start time.Time, err error) {
	svc, method := splitMethod(fullMethod)
	m.requests.WithLabelValues(svc, method, status.Code(err).String()).Inc()
	m.duration.WithLabelValues(svc, method).Observe(time.Since(start).Seconds())
}

// Unary is the unary interceptor.
func (m *Metrics) Unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	start := time.Now()
	resp, err := h(ctx, req)
	m.observe(info.FullMethod, start, err)
	return resp, err
}

// Stream is the stream interceptor.
func (m *Metrics) Stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	start := time.Now()
	err := h(srv, ss)
	m.observe(info.FullMethod, start, err)
	return err
}

// splitMethod turns "/virtplane.v1.VirtualMachines/Get" into its parts.
func splitMethod(full string) (string, string) {
	full = strings.TrimPrefix(full, "/")
	svc, method, ok := strings.Cut(full, "/")
	if !ok {
		return "unknown", full
	}
	return strings.TrimPrefix(svc, "virtplane.v1."), method
}
