package store

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

var (
	requestDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "virtplane",
		Subsystem: "store",
		Name:      "request_duration_seconds",
		Help:      "Duration of store requests, including retries of GuaranteedUpdate and Delete.",
		// 0.5ms (in-process etcd) to ~4s (slow disk or remote cluster).
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
	}, []string{"kind", "op"})

	writesTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "virtplane",
		Subsystem: "store",
		Name:      "writes_total",
		Help: "Successful etcd write transactions by what they did to the key: " +
			"create, update (including setting a deletion timestamp) or delete.",
	}, []string{"kind", "op"})
)

// RegisterMetrics registers the store's collectors. Registering them again
// on the same registry is not an error.
func RegisterMetrics(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{requestDuration, writesTotal} {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) && are.ExistingCollector == c {
				continue
			}
			return err
		}
	}
	return nil
}

// Operation labels.
const (
	opCreate           = "create"
	opGet              = "get"
	opList             = "list"
	opUpdate           = "update"
	opGuaranteedUpdate = "guaranteed_update"
	opDelete           = "delete"
)

// storeMetrics holds one store's label-resolved collectors, so requests
// don't look up label values.
type storeMetrics struct {
	durations map[string]prometheus.Observer
	writes    map[string]prometheus.Counter
}

func newStoreMetrics(kind string) storeMetrics {
	m := storeMetrics{
		durations: map[string]prometheus.Observer{},
		writes:    map[string]prometheus.Counter{},
	}
	for _, op := range []string{opCreate, opGet, opList, opUpdate, opGuaranteedUpdate, opDelete} {
		m.durations[op] = requestDuration.WithLabelValues(kind, op)
	}
	for _, op := range []string{opCreate, opUpdate, opDelete} {
		m.writes[op] = writesTotal.WithLabelValues(kind, op)
	}
	return m
}

// observe is deferred as observe(op, time.Now()).
func (m storeMetrics) observe(op string, start time.Time) {
	m.durations[op].Observe(time.Since(start).Seconds())
}

func (m storeMetrics) wrote(op string) { m.writes[op].Inc() }
