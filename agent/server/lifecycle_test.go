package server

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

func quietOptions(t *testing.T, socket string) Options {
	return Options{
		DataDir: filepath.Join(t.TempDir(), "data"),
		Socket:  socket,
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
}

// --socket never removes what is not a socket: a regular file at the path
// is kept, and the agent does not start, naming the flag and the path.
func TestSocketPathRegularFileKept(t *testing.T) {
	path := filepath.Join(testutil.ShortTempDir(t), "agent.sock")
	if err := os.WriteFile(path, []byte("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	a, err := Start(t.Context(), quietOptions(t, path))
	if err == nil {
		a.Shutdown(context.Background())
		t.Fatal("the agent started over a regular file")
	}
	if !strings.Contains(err.Error(), "--socket "+path) || !strings.Contains(err.Error(), "not a socket") {
		t.Errorf("error %q does not name --socket, the path and why", err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "precious" {
		t.Fatalf("the file at --socket: %q %v", b, err)
	}
}

// The socket is 0600 in a 0700 directory the agent creates, and a
// directory others may write to is refused.
func TestSocketModeAndDirectory(t *testing.T) {
	dir := filepath.Join(testutil.ShortTempDir(t), "run", "virtplane")
	path := filepath.Join(dir, "agent.sock")
	a := startAgent(t, quietOptions(t, path))
	for p, want := range map[string]os.FileMode{path: 0o600, dir: 0o700} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", p, st.Mode().Perm(), want)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if err := listVMs(ctx, t, client.Config{Endpoint: "unix://" + a.opts.Socket}); err != nil {
		t.Fatal(err)
	}

	open := filepath.Join(testutil.ShortTempDir(t), "shared")
	if err := os.Mkdir(open, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	b, err := Start(t.Context(), quietOptions(t, filepath.Join(open, "agent.sock")))
	if err == nil {
		b.Shutdown(context.Background())
		t.Fatal("the agent put its socket in a world-writable directory")
	}
	if !strings.Contains(err.Error(), "--socket") || !strings.Contains(err.Error(), "writable by group or others") {
		t.Errorf("world-writable socket directory: %v", err)
	}
}

// An agent that fails to start (the socket is another agent's) leaves the
// other agent's socket alone.
func TestFailedStartKeepsTheLiveAgentsSocket(t *testing.T) {
	a := startAgent(t, Options{})
	b, err := Start(t.Context(), quietOptions(t, a.opts.Socket))
	if err == nil {
		b.Shutdown(context.Background())
		t.Fatal("second agent took over a live socket")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if err := listVMs(ctx, t, client.Config{Endpoint: "unix://" + a.opts.Socket}); err != nil {
		t.Fatalf("the first agent's socket after the second failed: %v", err)
	}
}

// Shutdown returns by its context's deadline even when a component never
// stops, and names what it left behind.
func TestShutdownReturnsByTheDeadline(t *testing.T) {
	stuck := make(chan struct{})
	defer close(stuck) // lets the stuck controller go when the test ends
	started := make(chan struct{})
	var logs testutil.SyncBuffer
	o := quietOptions(t, filepath.Join(testutil.ShortTempDir(t), "agent.sock"))
	o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	o.Controllers = func(context.Context, Deps) {
		close(started)
		<-stuck // deaf to its context
	}
	a, err := Start(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("controllers did not start")
	}
	// A watch stays open, as terraform's or `get -w`'s would.
	c, err := client.Dial(t.Context(), client.Config{Endpoint: "unix://" + o.Socket})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	w, err := c.VMs.Watch(t.Context(), &apiv1.WatchVirtualMachinesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Recv(); err != nil {
		t.Fatal(err)
	}

	const timeout = 2 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	t0 := time.Now()
	done := make(chan struct{})
	go func() { a.Shutdown(ctx); close(done) }()
	// Slack for a loaded machine; the old Shutdown never returned.
	select {
	case <-done:
	case <-time.After(timeout + 5*time.Second):
		t.Fatalf("Shutdown(%v) still running after %v", timeout, time.Since(t0).Round(time.Millisecond))
	}
	t.Logf("Shutdown(%v) returned after %v", timeout, time.Since(t0).Round(time.Millisecond))
	if log := logs.String(); !strings.Contains(log, "agent shutdown gave up waiting") || !strings.Contains(log, "controllers") {
		t.Errorf("the log does not name what was stuck:\n%s", log)
	}
	// The store was closed all the same.
	if err := a.client.Ctx().Err(); err == nil {
		t.Error("the etcd client is still open")
	}
}
