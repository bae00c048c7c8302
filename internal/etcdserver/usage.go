package etcdserver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Usage is how full an etcd backend is. etcd compares DBSize, not InUse,
// with its quota: compaction frees pages for reuse but only
// defragmentation gives them back.
type Usage struct {
	// DBSize is the backend's allocated size.
	DBSize int64
	// InUse is the part of DBSize holding live data and history.
	InUse int64
	// Quota is the size at which etcd refuses writes.
	Quota int64
}

// Fraction is DBSize over Quota.
func (u Usage) Fraction() float64 {
	if u.Quota <= 0 {
		return 0
	}
	return float64(u.DBSize) / float64(u.Quota)
}

// UsageReader reads the backend usage of the members a client talks to,
// for the API's write guard and for /metrics. An embedded member knows its
// quota; for an external cluster it is the operator's word (the cluster's
// --quota-backend-bytes, etcd's default 2 GiB), since etcd does not
// report it.
type UsageReader struct {
	client *clientv3.Client
	quota  int64
	// timeout bounds one read of every endpoint.
	timeout time.Duration
}

// NewUsageReader reads through client against quota (DefaultQuotaBytes
// when 0).
func NewUsageReader(client *clientv3.Client, quota int64) *UsageReader {
	if quota <= 0 {
		quota = DefaultQuotaBytes
	}
	return &UsageReader{client: client, quota: quota, timeout: 5 * time.Second}
}

// MemberUsage is one endpoint's reading.
type MemberUsage struct {
	Endpoint      string
	DBSize, InUse int64
}

// Members reads every endpoint's status at once. Endpoints that fail are
// left out; the error is set only when none answered.
func (r *UsageReader) Members(ctx context.Context) ([]MemberUsage, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	eps := r.client.Endpoints()
	type result struct {
		m   MemberUsage
		err error
	}
	results := make(chan result, len(eps))
	for _, ep := range eps {
		go func() {
			st, err := r.client.Status(ctx, ep)
			if err != nil {
				results <- result{err: fmt.Errorf("etcd %s: %w", ep, err)}
				return
			}
			results <- result{m: MemberUsage{Endpoint: ep, DBSize: st.DbSize, InUse: st.DbSizeInUse}}
		}()
	}
	var (
		out  []MemberUsage
		errs []error
	)
	for range eps {
		res := <-results
		if res.err != nil {
			errs = append(errs, res.err)
			continue
		}
		out = append(out, res.m)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("reading etcd storage usage: %w", errors.Join(errs...))
	}
	return out, nil
}

// Usage is the fullest member's usage: each member has its own backend
// and quota, and the first one full stops the cluster's writes.
func (r *UsageReader) Usage(ctx context.Context) (Usage, error) {
	ms, err := r.Members(ctx)
	if err != nil {
		return Usage{}, err
	}
	u := Usage{Quota: r.quota}
	for _, m := range ms {
		if m.DBSize > u.DBSize {
			u.DBSize, u.InUse = m.DBSize, m.InUse
		}
	}
	return u, nil
}

// StorageUsage is Usage as the API's quota guard reads it.
func (r *UsageReader) StorageUsage(ctx context.Context) (size, quota int64, err error) {
	u, err := r.Usage(ctx)
	return u.DBSize, u.Quota, err
}

var (
	descDBSize = prometheus.NewDesc("virtplane_etcd_db_size_bytes",
		"Allocated size of the etcd backend, what etcd compares with its quota (shrinks only by defragmentation).",
		[]string{"endpoint"}, nil)
	descInUse = prometheus.NewDesc("virtplane_etcd_db_size_in_use_bytes",
		"Part of the etcd backend holding live data and history.", []string{"endpoint"}, nil)
	descQuota = prometheus.NewDesc("virtplane_etcd_quota_bytes",
		"Storage quota of each etcd member: at it etcd refuses every write.", nil, nil)
	descUp = prometheus.NewDesc("virtplane_etcd_usage_read_ok",
		"1 when the last scrape read the storage usage of at least one etcd member, else 0.", nil, nil)
)

// Describe implements prometheus.Collector.
func (r *UsageReader) Describe(ch chan<- *prometheus.Desc) {
	ch <- descDBSize
	ch <- descInUse
	ch <- descQuota
	ch <- descUp
}

// Collect implements prometheus.Collector: it reads the members' status
// at scrape time, each scrape one Status call per endpoint.
func (r *UsageReader) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(descQuota, prometheus.GaugeValue, float64(r.quota))
	ms, err := r.Members(context.Background())
	if err != nil {
		ch <- prometheus.MustNewConstMetric(descUp, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(descUp, prometheus.GaugeValue, 1)
	for _, m := range ms {
		ch <- prometheus.MustNewConstMetric(descDBSize, prometheus.GaugeValue, float64(m.DBSize), m.Endpoint)
		ch <- prometheus.MustNewConstMetric(descInUse, prometheus.GaugeValue, float64(m.InUse), m.Endpoint)
	}
}
