package etcdserver

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// The quota is the member's, not etcd's 2 GiB default: a member with a
// 4 MiB quota refuses writes once its backend reaches it, and the usage
// reader reports the backend's growth against it.
func TestQuotaAndUsage(t *testing.T) {
	t.Parallel()
	const quota = 4 << 20
	s, err := Start(t.Context(), Config{DataDir: t.TempDir(), QuotaBackendBytes: quota, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Quota() != quota {
		t.Fatalf("Quota() = %d", s.Quota())
	}
	r := NewUsageReader(s.Client(), s.Quota())
	before, err := r.Usage(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if before.Quota != quota || before.DBSize <= 0 || before.InUse <= 0 || before.InUse > before.DBSize {
		t.Fatalf("usage of a fresh member: %+v", before)
	}

	value := strings.Repeat("x", 64<<10)
	var putErr error
	for i := 0; i < 4*quota/len(value) && putErr == nil; i++ {
		_, putErr = s.Client().Put(t.Context(), fmt.Sprintf("/fill/%04d", i), value)
	}
	if !errors.Is(putErr, rpctypes.ErrNoSpace) {
		t.Fatalf("filling a %d-byte quota ended with %v, want %v", quota, putErr, rpctypes.ErrNoSpace)
	}
	full, err := r.Usage(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if full.Fraction() < 0.9 {
		t.Fatalf("usage when etcd refused writes: %+v (%.0f%%)", full, 100*full.Fraction())
	}
	t.Logf("fresh %+v, full %+v", before, full)

	// /metrics: sizes per endpoint and the quota.
	reg := prometheus.NewRegistry()
	reg.MustRegister(r)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			got[mf.GetName()] = m.GetGauge().GetValue()
		}
	}
	if got["virtplane_etcd_quota_bytes"] != quota || got["virtplane_etcd_db_size_bytes"] != float64(full.DBSize) ||
		got["virtplane_etcd_db_size_in_use_bytes"] <= 0 || got["virtplane_etcd_usage_read_ok"] != 1 {
		t.Fatalf("metrics %v, usage %+v", got, full)
	}
}
