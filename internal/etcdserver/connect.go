package etcdserver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// ConnectTimeout bounds dialing and the health check in Connect, so a wrong
// endpoint fails at startup instead of on the first request.
const ConnectTimeout = 5 * time.Second

// Connect returns a client of an external etcd cluster after checking that
// at least one endpoint answers and the cluster has a leader. tlsCfg may be
// nil for plain http:// or unix:// endpoints.
func Connect(ctx context.Context, endpoints []string, tlsCfg *tls.Config) (*clientv3.Client, error) {
	if len(endpoints) == 0 {
		return nil, errors.New("etcd: no endpoints")
	}
	cli, err := newClient(endpoints, tlsCfg, slog.Default(), new(atomic.Bool))
	if err != nil {
		return nil, fmt.Errorf("etcd %s: %w", strings.Join(endpoints, ","), err)
	}
	if err := checkHealth(ctx, cli, endpoints); err != nil {
		cli.Close()
		return nil, err
	}
	return cli, nil
}

// checkHealth asks all endpoints at once: one healthy member is enough, and
// a dead one must not use up the time the others need.
func checkHealth(ctx context.Context, cli *clientv3.Client, endpoints []string) error {
	ctx, cancel := context.WithTimeout(ctx, ConnectTimeout)
	defer cancel()
	results := make(chan error, len(endpoints))
	for _, ep := range endpoints {
		go func() {
			st, err := cli.Status(ctx, ep)
			switch {
			case err != nil:
				results <- fmt.Errorf("etcd %s: %w", ep, err)
			case st.Leader == 0:
				results <- fmt.Errorf("etcd %s: cluster has no leader", ep)
			case len(st.Errors) > 0:
				results <- fmt.Errorf("etcd %s: %s", ep, strings.Join(st.Errors, "; "))
			default:
				results <- nil
			}
		}()
	}
	var errs []error
	for range endpoints {
		err := <-results
		if err == nil {
			return nil
		}
		errs = append(errs, err)
	}
	return fmt.Errorf("etcd unreachable: %w", errors.Join(errs...))
}

// newClient is a client of endpoints that logs through lg; stopping
// demotes its errors to debug once its server is shutting down.
func newClient(endpoints []string, tlsCfg *tls.Config, lg *slog.Logger, stopping *atomic.Bool) (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: ConnectTimeout,
		TLS:         tlsCfg,
		// The client warns on every retried request; only errors are news.
		Logger: zap.New(newSlogCore(lg.With("component", "etcd-client").Handler(), zap.ErrorLevel, stopping)),
	})
}
