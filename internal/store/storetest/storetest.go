// Package storetest runs real embedded etcd servers for tests of code that
// uses the store, and holds the conformance suite every store backend
// passes (RunConformance).
package storetest

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/virtplane/terraform-provider-virtplane/internal/etcdserver"
)

// NewServer starts an embedded etcd in a temporary directory and stops it
// when the test ends. Use it when a test needs a server of its own, e.g.
// to compact; otherwise Client is cheaper.
func NewServer(tb testing.TB) *etcdserver.Server {
	tb.Helper()
	srv, err := etcdserver.Start(context.Background(), etcdserver.Config{
		DataDir: tb.TempDir(),
		Logger:  slog.New(slog.NewTextHandler(tb.Output(), nil)),
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { srv.Close() })
	return srv
}

var shared struct {
	sync.Mutex
	enabled bool // Main runs, and will stop srv
	srv     *etcdserver.Server
	dir     string
}

// Main runs m with a server that Client shares among the package's tests,
// which saves a server start per test. Call it from TestMain:
//
//	func TestMain(m *testing.M) { storetest.Main(m) }
func Main(m *testing.M) {
	shared.Lock()
	shared.enabled = true
	shared.Unlock()
	code := m.Run()
	shared.Lock()
	if shared.srv != nil {
		shared.srv.Close()
		os.RemoveAll(shared.dir)
	}
	shared.Unlock()
	os.Exit(code)
}

// Client returns a client of the package's shared server (started on first
// use; see Main) or, without Main, of a server of the test's own. Tests
// sharing a server must keep to their own keys: see Prefix.
func Client(tb testing.TB) *clientv3.Client {
	tb.Helper()
	shared.Lock()
	defer shared.Unlock()
	if !shared.enabled {
		shared.Unlock()
		defer shared.Lock() // for the deferred Unlock
		return NewServer(tb).Client()
	}
	if shared.srv == nil {
		dir, err := os.MkdirTemp("", "storetest-")
		if err != nil {
			tb.Fatal(err)
		}
		srv, err := etcdserver.Start(context.Background(), etcdserver.Config{
			DataDir: dir,
			Logger:  slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		})
		if err != nil {
			os.RemoveAll(dir)
			tb.Fatal(err)
		}
		shared.srv, shared.dir = srv, dir
	}
	return shared.srv.Client()
}

// Prefix is a key prefix unique to the test, for tests sharing a server.
func Prefix(tb testing.TB) string {
	name := strings.NewReplacer("/", "_", " ", "_").Replace(tb.Name())
	return fmt.Sprintf("/test/%s-%d", name, time.Now().UnixNano())
}
