package leader

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/virtplane/terraform-provider-virtplane/internal/etcdserver"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// Two electors on one etcd: exactly one leads at any time, and the other
// takes over when the leader stops.
func TestOneLeaderAndHandover(t *testing.T) {
	srv, err := etcdserver.Start(context.Background(), etcdserver.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()

	var active, maxActive atomic.Int32
	var mu sync.Mutex
	leaders := []string{}
	newElector := func(id string) *Elector {
		return &Elector{
			// A TTL far above any handover bound below: only
			// resigning can hand over in time.
			Client: srv.Client(), Key: "/test/leader", Identity: id, TTL: time.Minute,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		}
	}
	lead := func(id string) func(ctx context.Context, _ store.LeaderTerm) {
		return func(ctx context.Context, _ store.LeaderTerm) {
			n := active.Add(1)
			for {
				m := maxActive.Load()
				if n <= m || maxActive.CompareAndSwap(m, n) {
					break
				}
			}
			mu.Lock()
			leaders = append(leaders, id)
			mu.Unlock()
			<-ctx.Done()
			active.Add(-1)
		}
	}
	waitLeaders := func(n int) {
		t.Helper()
		testutil.Eventually(t, 15*time.Second, fmt.Sprintf("leader #%d", n), func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(leaders) >= n
		})
	}

	ctxA, stopA := context.WithCancel(context.Background())
	ctxB, stopB := context.WithCancel(context.Background())
	defer stopB()
	doneA := make(chan struct{})
	go func() { _ = newElector("a").Run(ctxA, lead("a")); close(doneA) }()
	waitLeaders(1)
	go func() { _ = newElector("b").Run(ctxB, lead("b")) }()
	// b campaigns (its key is under the prefix, behind a's) but must not
	// lead.
	waitCandidates(t, srv.Client(), "/test/leader", 2)
	mu.Lock()
	if len(leaders) != 1 || leaders[0] != "a" {
		t.Fatalf("leaders %v", leaders)
	}
	mu.Unlock()

	stopA()
	<-doneA
	// Resigning hands over at once; without it b would wait out a's
	// one-minute lease, beyond waitLeaders' bound.
	waitLeaders(2)
	mu.Lock()
	defer mu.Unlock()
	if leaders[1] != "b" {
		t.Fatalf("leaders %v", leaders)
	}
	if m := maxActive.Load(); m != 1 {
		t.Fatalf("%d leaders at once", m)
	}
}

// A leader whose session expires (etcd unreachable, lease revoked) stops
// its work.
func TestLeadershipLostWhenSessionExpires(t *testing.T) {
	srv, err := etcdserver.Start(context.Background(), etcdserver.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	var changes []bool
	var mu sync.Mutex
	el := &Elector{
		Client: srv.Client(), Key: "/test/leader", Identity: "a", TTL: 5 * time.Second,
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
		OnChange: func(l bool) { mu.Lock(); changes = append(changes, l); mu.Unlock() },
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	leadCtxs := make(chan context.Context, 4)
	go func() {
		_ = el.Run(ctx, func(lctx context.Context, _ store.LeaderTerm) { leadCtxs <- lctx; <-lctx.Done() })
	}()
	first := <-leadCtxs
	// Revoke every lease: the session is gone as if etcd had expired it.
	leases, err := srv.Client().Leases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range leases.Leases {
		if _, err := srv.Client().Revoke(ctx, l.ID); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-first.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("work not stopped after the session expired")
	}
	// It campaigns again with a fresh session and leads again.
	select {
	case <-leadCtxs:
	case <-time.After(15 * time.Second):
		t.Fatal("did not lead again")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(changes) < 3 || !changes[0] || changes[1] {
		t.Fatalf("leadership changes %v", changes)
	}
}

// waitCandidates waits until n electors campaign under prefix: each has
// its key there, the leader's with the lowest create revision.
func waitCandidates(t *testing.T, c *clientv3.Client, prefix string, n int) {
	t.Helper()
	testutil.EventuallyNoError(t, 15*time.Second, fmt.Sprintf("%d campaign keys under %s", n, prefix), func() error {
		resp, err := c.Get(t.Context(), prefix+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			return err
		}
		if resp.Count != int64(n) {
			return fmt.Errorf("%d keys", resp.Count)
		}
		return nil
	})
}
