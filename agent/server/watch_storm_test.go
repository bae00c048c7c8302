package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
	"github.com/virtplane/terraform-provider-virtplane/internal/fakenode"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// The storm: this many API watches, over stormConns connections (so that
// a per-connection stream cap does not hold them back), opened at once
// and cancelled at once.
const (
	stormWatches = 2000
	stormConns   = 10
)

// After 2,000 API watches are opened and cancelled at once, the agent
// still works: a VM reaches Running through the controllers and a node,
// and Shutdown returns within its timeout. With the embedded etcd's
// in-process client (v3client) about 150 cancelled watches deadlocked it:
// controllers stopped for good and SIGTERM no longer stopped the agent.
// Watches beyond a per-caller cap may be refused (ResourceExhausted); the
// storm is whatever the API lets through.
func TestWatchStormThenVMRuns(t *testing.T) {
	dir := testutil.ShortTempDir(t)
	socket := filepath.Join(dir, "agent.sock")
	a, err := Start(t.Context(), Options{
		DataDir: filepath.Join(dir, "data"), Socket: socket, LeaderElect: true,
		NodeLease: 3 * time.Second, HeartbeatInterval: time.Second,
		ControllerOptions: ControllerOptions{FenceMargin: time.Second},
		Logger:            slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	shutDown := false
	t.Cleanup(func() {
		if !shutDown {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			a.Shutdown(ctx)
		}
	})
	// Bounds the whole test: a deadlock fails it instead of hanging it.
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cfg := client.Config{Endpoint: "unix://" + socket}
	c, err := client.Dial(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	node, err := fakenode.Start(ctx, c, fakenode.Options{Name: "node-1", StartDelay: 100 * time.Millisecond,
		ShutdownDelay: 100 * time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer node.Stop()

	opened, refused := storm(ctx, t, cfg)
	t.Logf("%d watches opened and cancelled at once, %d refused", opened, refused)

	vm := &apiv1.VirtualMachine{
		Metadata: &apiv1.ObjectMeta{Name: "after-storm"},
		Spec: &apiv1.VirtualMachineSpec{
			RunStrategy: apiv1.RunStrategyAlways,
			Template: &apiv1.VirtualMachineInstanceTemplateSpec{Spec: &apiv1.VirtualMachineInstanceSpec{
				Domain: &apiv1.DomainSpec{Memory: &apiv1.Memory{Guest: "256Mi"}},
			}},
		},
	}
	if _, err := c.VMs.Create(ctx, &apiv1.CreateVirtualMachineRequest{Vm: vm}); err != nil {
		t.Fatal(err)
	}
	key := &apiv1.ObjectKey{Namespace: "default", Name: "after-storm"}
	testutil.EventuallyNoError(t, time.Minute, "the VM running after the storm", func() error {
		got, err := c.VMs.Get(ctx, &apiv1.GetVirtualMachineRequest{Key: key})
		if err != nil {
			return err
		}
		if s := got.GetStatus().GetPrintableStatus(); s != apiv1.PrintableRunning || !got.GetStatus().GetReady() {
			return fmt.Errorf("status %q, ready %v", s, got.GetStatus().GetReady())
		}
		return nil
	})

	const timeout = 10 * time.Second
	sctx, scancel := context.WithTimeout(context.Background(), timeout)
	defer scancel()
	shutDown = true
	t0 := time.Now()
	done := make(chan struct{})
	go func() { a.Shutdown(sctx); close(done) }()
	select {
	case <-done:
		t.Logf("Shutdown returned after %v", time.Since(t0).Round(time.Millisecond))
	case <-time.After(timeout + 5*time.Second):
		t.Fatalf("Shutdown(%v) still running after %v", timeout, time.Since(t0).Round(time.Millisecond))
	}
}

// storm opens stormWatches VM watches at once, waits until each has its
// first event (or was refused), then cancels them all at once and waits
// until every stream has ended.
func storm(ctx context.Context, t *testing.T, cfg client.Config) (opened, refused int32) {
	t.Helper()
	wctx, cancelWatches := context.WithCancel(ctx)
	defer cancelWatches()
	var (
		started, ended sync.WaitGroup
		nOpened, nRefu atomic.Int32
		errMu          sync.Mutex
		firstErr       error
	)
	for range stormConns {
		wc, err := client.Dial(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer wc.Close()
		for range stormWatches / stormConns {
			started.Add(1)
			ended.Add(1)
			go func() {
				defer ended.Done()
				w, err := wc.VMs.Watch(wctx, &apiv1.WatchVirtualMachinesRequest{})
				if err == nil {
					_, err = w.Recv() // SYNCED: the store's watch is open
				}
				switch {
				case err == nil:
					nOpened.Add(1)
				case status.Code(err) == codes.ResourceExhausted:
					nRefu.Add(1)
				default:
					errMu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					errMu.Unlock()
				}
				started.Done()
				for err == nil {
					_, err = w.Recv()
				}
			}()
		}
	}
	waitCtx(ctx, t, "every watch to open or be refused", started.Wait)
	if firstErr != nil {
		t.Fatalf("opening a watch: %v", firstErr)
	}
	if nOpened.Load() < 200 {
		t.Fatalf("only %d watches opened: the storm is too small to show anything", nOpened.Load())
	}
	cancelWatches()
	waitCtx(ctx, t, "every cancelled watch to end", ended.Wait)
	return nOpened.Load(), nRefu.Load()
}

// waitCtx runs fn and fails the test when ctx ends first.
func waitCtx(ctx context.Context, t *testing.T, what string, fn func()) {
	t.Helper()
	if !waitFor(ctx, fn) {
		t.Fatalf("waiting for %s: %v", what, ctx.Err())
	}
}
