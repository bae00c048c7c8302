package ceph

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/virtplane/terraform-provider-virtplane/internal/testutil/multinode"
)

// StartTimeout bounds StartForTest's and Shared's start: ~6 s alone,
// several times that on two busy cores.
const StartTimeout = 2 * time.Minute

// StartInHub starts a cluster in a multinode hub (Run.Hub or Node.Hub):
// in its namespace, bound to its address, every node of the hub reaching
// it (and the host's namespace too when the run has a host link). Its
// Dir is the hub's run's "ceph", so a hub holds one cluster, and the
// run's Close or sweep removes whatever Close did not.
func StartInHub(ctx context.Context, hub multinode.Hub, log Logger) (*Cluster, error) {
	dir := filepath.Join(hub.Dir, "ceph")
	if _, err := os.Lstat(dir); err == nil {
		return nil, fmt.Errorf("ceph: hub %s has a cluster already (%s): one per hub", hub.NetNS, dir)
	}
	return Start(ctx, Options{Dir: dir, NetNS: hub.NetNS, Addr: hub.Addr, Log: log})
}

// TestingT is what StartForTest and Shared.Get need of a test: TB and
// a failure that lets the test go on (for cleanups).
type TestingT interface {
	TB
	Error(args ...any)
}

// StartForTest is StartInHub for a test: it gates on Require, bounds the
// start by StartTimeout, fails t on error and closes the cluster when t
// ends (register it after multinode.Start, so that it runs first).
func StartForTest(t TestingT, hub multinode.Hub) *Cluster {
	t.Helper()
	Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
	defer cancel()
	c, err := StartInHub(ctx, hub, t)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
	return c
}

// Shared is one cluster for a whole test package, started by the first
// test that asks for it in a hub of its own (a multinode run of no nodes,
// with a host link so that the host's namespace reaches it too), and
// closed by TestMain. Multi-node tests put their nodes on its hub:
//
//	var sharedCeph ceph.Shared
//
//	func TestMain(m *testing.M) {
//		code := m.Run()
//		if err := sharedCeph.Close(); err != nil {
//			fmt.Fprintln(os.Stderr, err)
//			code = 1
//		}
//		os.Exit(code)
//	}
//
//	func TestOnRBD(t *testing.T) {
//		c, hub := sharedCeph.Get(t)
//		nodes := multinode.Start(t, 2, multinode.Options{Hub: hub})
//		...
//	}
//
// Tests sharing it share its blocklist and pool: name images uniquely,
// and blocklist node addresses (each node of the hub has its own, never
// reused) rather than anything wider.
type Shared struct {
	mu      sync.Mutex
	started bool
	run     *multinode.Run
	c       *Cluster
	err     error
}

// Start starts the shared cluster on the first call, and returns it, or
// the first call's error, on every call.
func (s *Shared) Start(ctx context.Context, log Logger) (*Cluster, *multinode.Run, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return s.c, s.run, s.err
	}
	s.started = true
	s.run, s.err = multinode.Launch(ctx, 0, multinode.Options{NamePrefix: "ceph", HostLink: true}, log)
	if s.err != nil {
		return nil, nil, s.err
	}
	s.c, s.err = StartInHub(ctx, s.run.Hub(), log)
	if s.err != nil {
		s.err = errors.Join(s.err, s.run.Close(log, false))
		s.run = nil
	}
	return s.c, s.run, s.err
}

// Get is Start for a test: it gates on Require (and on what the hub needs,
// multinode.Unavailable), bounds the first start by StartTimeout and
// fails t on error.
func (s *Shared) Get(t TestingT) (*Cluster, *multinode.Run) {
	t.Helper()
	Require(t)
	if reason := multinode.Unavailable(); reason != "" {
		if os.Getenv(EnvRequired) != "" {
			t.Fatal(reason + " (" + EnvRequired + " is set)")
		}
		t.Skip(reason)
	}
	ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
	defer cancel()
	c, run, err := s.Start(ctx, t)
	if err != nil {
		t.Fatal(err)
	}
	return c, run
}

// Close stops the shared cluster and removes its hub, if it was started;
// TestMain calls it once the tests are done. Later calls do nothing.
func (s *Shared) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	if s.c != nil {
		errs = append(errs, s.c.Close())
	}
	if s.run != nil {
		errs = append(errs, s.run.Close(stderrLog{}, false))
	}
	s.c, s.run = nil, nil
	return errors.Join(errs...)
}

// CloseAfter is Close at the end of a TestMain: it returns the exit code
// of the tests (m.Run's), or 1 when the cluster could not be closed
// (said on stderr), so a leaked daemon fails the package:
//
//	os.Exit(shared.CloseAfter(m.Run()))
func (s *Shared) CloseAfter(code int) int {
	if err := s.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "closing the shared Ceph cluster:", err)
		return 1
	}
	return code
}

// stderrLog is the Logger of what runs after the tests (TestMain).
type stderrLog struct{}

func (stderrLog) Logf(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
