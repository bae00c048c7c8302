package server

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"google.golang.org/grpc"
)

// Shutdown stops serving: in-flight calls get until ctx ends, then the
// controllers stop and the store closes.
func (a *Agent) Shutdown(ctx context.Context) {
	// The node agent goes first: its last heartbeat needs the API.
	a.stopNodeAgent(ctx)
	var wg sync.WaitGroup
	for _, s := range []*grpc.Server{a.unixSrv, a.tcpSrv} {
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
			case <-ctx.Done():
				s.Stop() // watches never end by themselves
			}
		}()
	}
	wg.Wait()
	if a.httpSrv != nil {
		_ = a.httpSrv.Shutdown(ctx)
	}
	if a.cancel != nil {
		a.cancel()
	}
	a.wg.Wait()
	if a.etcd != nil {
		_ = a.etcd.Close()
	} else if a.client != nil {
		_ = a.client.Close()
	}
	if a.unixSrv != nil {
		_ = os.Remove(a.opts.Socket)
	}
	a.log.Info("agent stopped")
}

// listenUnix listens on path, replacing a stale socket but never one that
// another agent still serves.
func listenUnix(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("creating socket directory: %w", err)
	}
	if _, err := os.Stat(path); err == nil {
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("--socket %s: another agent is serving it", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("removing stale socket: %w", err)
		}
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("--socket: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return nil, fmt.Errorf("restricting socket mode: %w", err)
	}
	return l, nil
}
