package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/virtplane/terraform-provider-virtplane/internal/etcdserver"
)

// Writes are the agent's successful store writes by object kind
// (VirtualMachine, VirtualMachineInstance, Node), summed over create,
// update and delete: virtplane_store_writes_total on its /metrics.
type Writes map[string]float64

// Sub returns w - o per kind.
func (w Writes) Sub(o Writes) Writes {
	out := Writes{}
	for k, v := range w {
		out[k] = v - o[k]
	}
	return out
}

// VMAndVMI is the writes to VMs and VMIs: what a VM start costs, without
// node heartbeats.
func (w Writes) VMAndVMI() float64 { return w["VirtualMachine"] + w["VirtualMachineInstance"] }

// ScrapeWrites reads the store write counters from the agent's metrics
// listener.
func ScrapeWrites(ctx context.Context, addr string) (Writes, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scraping metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scraping metrics: %s", resp.Status)
	}
	return parseWrites(resp.Body)
}

// parseWrites picks virtplane_store_writes_total{kind="K",op="O"} V lines
// out of the Prometheus text format.
func parseWrites(r io.Reader) (Writes, error) {
	const name = "virtplane_store_writes_total{"
	out := Writes{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) {
			continue
		}
		labels, value, ok := strings.Cut(line[len(name):], "} ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			return nil, fmt.Errorf("metrics line %q: %w", line, err)
		}
		for _, l := range strings.Split(labels, ",") {
			if k, val, ok := strings.Cut(l, "="); ok && k == "kind" {
				out[strings.Trim(val, `"`)] += v
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading metrics: %w", err)
	}
	return out, nil
}

// Etcd is a client of an agent's embedded etcd, through its unix socket.
type Etcd struct{ c *clientv3.Client }

// DialEtcd connects to the embedded etcd's socket.
func DialEtcd(ctx context.Context, socket string) (*Etcd, error) {
	c, err := etcdserver.Connect(ctx, []string{"unix://" + socket}, nil)
	if err != nil {
		return nil, fmt.Errorf("connecting to the embedded etcd: %w", err)
	}
	return &Etcd{c: c}, nil
}

// Revision is etcd's current revision: one more for every write
// transaction, whoever made it (API, controllers, heartbeats).
func (e *Etcd) Revision(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := e.c.Get(ctx, "/", clientv3.WithCountOnly())
	if err != nil {
		return 0, fmt.Errorf("reading the etcd revision: %w", err)
	}
	return resp.Header.Revision, nil
}

// DBSize is the maintenance Status of the member: the backend database's
// size on disk (dbSize) and the part of it in use (dbSizeInUse; the rest
// is free pages a defragmentation would give back).
func (e *Etcd) DBSize(ctx context.Context) (size, inUse int64, err error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	st, err := e.c.Status(ctx, e.c.Endpoints()[0])
	if err != nil {
		return 0, 0, fmt.Errorf("etcd status: %w", err)
	}
	return st.DbSize, st.DbSizeInUse, nil
}

// Compact discards the history before the current revision and waits until
// the backend has applied it, as the agent's periodic compaction
// (--etcd-compaction) would once the run's writes are older than its
// retention.
func (e *Etcd) Compact(ctx context.Context) error {
	rev, err := e.Revision(ctx)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if _, err := e.c.Compact(ctx, rev, clientv3.WithCompactPhysical()); err != nil {
		return fmt.Errorf("etcd compact at %d: %w", rev, err)
	}
	return nil
}

// Close closes the client.
func (e *Etcd) Close() error { return e.c.Close() }

// StoreCounts are the two write counts of a run.
type StoreCounts struct {
	Revision int64
	Writes   Writes
}

// ReadStoreCounts reads the etcd revision and the write counters of a.
func ReadStoreCounts(ctx context.Context, a *Agent, e *Etcd) (StoreCounts, error) {
	rev, err := e.Revision(ctx)
	if err != nil {
		return StoreCounts{}, err
	}
	w, err := ScrapeWrites(ctx, a.MetricsAddr)
	if err != nil {
		return StoreCounts{}, err
	}
	return StoreCounts{Revision: rev, Writes: w}, nil
}
