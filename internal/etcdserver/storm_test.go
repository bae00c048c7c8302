package etcdserver

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// stormWatches is how many watches TestWatchStorm opens and cancels at
// once: the issue saw the in-process client deadlock from about 150.
const stormWatches = 2000

// Opening and cancelling thousands of watches at once must leave the
// member serving: a write is seen by a new watch, and Close returns.
// Through etcd's in-process client (v3client) this hung for good.
func TestWatchStorm(t *testing.T) {
	s := start(t, t.TempDir())
	cli := s.Client()
	// A bound for the whole test, so a deadlock fails it instead of
	// hanging the package until go test's own timeout.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	wctx, cancelWatches := context.WithCancel(ctx)
	var created, ended sync.WaitGroup
	for i := range stormWatches {
		created.Add(1)
		ended.Add(1)
		go func() {
			defer ended.Done()
			// Each on its own context, as every API watch has.
			c, stop := context.WithCancel(wctx)
			defer stop()
			ch := cli.Watch(clientv3.WithRequireLeader(c), fmt.Sprintf("/storm/%d", i),
				clientv3.WithPrefix(), clientv3.WithCreatedNotify())
			<-ch // created (or closed)
			created.Done()
			for range ch { // until the cancel closes it
			}
		}()
	}
	waitOrFail(ctx, t, "the watches to be created", created.Wait)
	cancelWatches()
	waitOrFail(ctx, t, "the cancelled watches to end", ended.Wait)

	// A new watch sees a new write.
	nctx, ncancel := context.WithCancel(ctx)
	defer ncancel()
	ch := cli.Watch(nctx, "/after", clientv3.WithPrefix())
	put, err := cli.Put(ctx, "/after/k", "v")
	if err != nil {
		t.Fatalf("put after the storm: %v", err)
	}
	select {
	case resp := <-ch:
		if err := resp.Err(); err != nil || len(resp.Events) != 1 || resp.Events[0].Kv.ModRevision != put.Header.Revision {
			t.Fatalf("watch after the storm: %+v %v", resp.Events, err)
		}
	case <-ctx.Done():
		t.Fatal("a watch opened after the storm never saw the write")
	}
	ncancel()
	waitOrFail(ctx, t, "Close", func() { s.Close() })
}

// waitOrFail runs fn and fails the test when ctx ends first; fn keeps
// running in the background then (a hung call cannot be stopped).
func waitOrFail(ctx context.Context, t *testing.T, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { fn(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatalf("%s did not return: %v", what, ctx.Err())
	}
}
