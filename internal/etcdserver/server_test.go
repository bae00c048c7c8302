package etcdserver

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), nil))
}

func start(t *testing.T, dir string) *Server {
	t.Helper()
	s, err := Start(t.Context(), Config{DataDir: dir, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestRestartKeepsData(t *testing.T) {
	dir := t.TempDir()
	s := start(t, dir)
	if _, err := s.Client().Put(t.Context(), "k", "v1"); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = start(t, dir)
	resp, err := s.Client().Get(t.Context(), "k")
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v1" {
		t.Fatalf("after restart got %v, want k=v1", resp.Kvs)
	}
}

func TestParallelServers(t *testing.T) {
	t.Parallel()
	a := start(t, t.TempDir())
	b := start(t, t.TempDir())
	if _, err := a.Client().Put(t.Context(), "k", "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Client().Put(t.Context(), "k", "b"); err != nil {
		t.Fatal(err)
	}
	for s, want := range map[*Server]string{a: "a", b: "b"} {
		resp, err := s.Client().Get(t.Context(), "k")
		if err != nil {
			t.Fatal(err)
		}
		if got := string(resp.Kvs[0].Value); got != want {
			t.Errorf("k = %q, want %q", got, want)
		}
	}
}

// The socket is what etcdctl uses for backups, so an external client must
// reach it; Connect goes through the network path.
func TestConnectToSocket(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := start(t, dir)
	if want := filepath.Join(dir, SocketName); s.SocketPath() != want {
		t.Errorf("SocketPath() = %q, want %q", s.SocketPath(), want)
	}
	if _, err := s.Client().Put(t.Context(), "k", "v"); err != nil {
		t.Fatal(err)
	}
	ep := "unix://" + s.SocketPath()
	cli, err := Connect(t.Context(), []string{ep}, nil)
	if err != nil {
		t.Fatalf("Connect(%s): %v", ep, err)
	}
	resp, err := cli.Get(t.Context(), "k")
	cli.Close()
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v" {
		t.Fatalf("%s: got %v", ep, resp.Kvs)
	}
}

func TestConnectWrongEndpointFailsFast(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	ep := "unix://" + filepath.Join(t.TempDir(), "nothing.sock")
	t0 := time.Now()
	cli, err := Connect(ctx, []string{ep}, nil)
	if err == nil {
		cli.Close()
		t.Fatal("Connect to a missing socket succeeded")
	}
	t.Log(err)
	if !strings.Contains(err.Error(), ep) {
		t.Errorf("error %q does not name the endpoint", err)
	}
	if d := time.Since(t0); d > 3*time.Second {
		t.Errorf("Connect took %s", d)
	}
}

func TestStartNeedsDataDir(t *testing.T) {
	if _, err := Start(t.Context(), Config{}); err == nil {
		t.Fatal("Start without DataDir succeeded")
	}
}

func TestStartCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	s, err := Start(ctx, Config{DataDir: t.TempDir(), Logger: testLogger(t)})
	if err == nil {
		s.Close()
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Start with canceled context: %v, want context.Canceled", err)
	}
}

func TestStartRejectsLongSocketPath(t *testing.T) {
	dir := filepath.Join(t.TempDir(), strings.Repeat("d", 120))
	_, err := Start(t.Context(), Config{DataDir: dir, Logger: testLogger(t)})
	if err == nil || !strings.Contains(err.Error(), "shorter data dir") {
		t.Fatalf("Start in a deep dir: %v", err)
	}
}

func TestAutoCompaction(t *testing.T) {
	t.Parallel()
	s, err := Start(t.Context(), Config{DataDir: t.TempDir(), AutoCompactionRetention: time.Second, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	first, err := s.Client().Put(t.Context(), "k", "1")
	if err != nil {
		t.Fatal(err)
	}
	// The compactor compacts once the retention passed and the revision
	// moved on, so each check writes again.
	testutil.Eventually(t, 30*time.Second, "the first revision compacted", func() bool {
		if _, err := s.Client().Put(t.Context(), "k", "2"); err != nil {
			t.Fatal(err)
		}
		_, err := s.Client().Get(t.Context(), "k", clientv3.WithRev(first.Header.Revision))
		return errors.Is(err, rpctypes.ErrCompacted)
	})
}
