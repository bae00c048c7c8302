package leader

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/url"
	"path/filepath"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/pkg/v3/proxy"
	"go.uber.org/zap"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
	"github.com/virtplane/terraform-provider-virtplane/internal/store/storetest"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// freezer puts etcd's test proxy between a client and etcd: paused, it
// forwards nothing, as if the process behind it were stopped (SIGSTOP, a
// long GC pause) or cut off; what was sent meanwhile arrives after the
// thaw, as a resumed process's requests would.
type freezer struct{ proxy.Server }

func newFreezer(t *testing.T, socket string) *freezer {
	t.Helper()
	dir := testutil.ShortTempDir(t)
	p := proxy.NewServer(proxy.ServerConfig{
		Logger: zap.NewNop(),
		From:   url.URL{Scheme: "unix", Host: filepath.Join(dir, "proxy.sock")},
		To:     url.URL{Scheme: "unix", Host: socket},
	})
	t.Cleanup(func() { p.Close() })
	select {
	case <-p.Ready():
	case err := <-p.Error():
		t.Fatal(err)
	}
	return &freezer{p}
}

func (p *freezer) freeze() { p.PauseTx(); p.PauseRx() }
func (p *freezer) thaw()   { p.UnpauseTx(); p.UnpauseRx() }

type won struct {
	id   string
	term store.LeaderTerm
}

// A leader paused past its session TTL: another elector takes over, and
// the first one's late controller write through its fenced store is
// refused, though the same write unfenced would pass; the new leader's
// fenced writes pass.
func TestPausedLeaderWriteIsFenced(t *testing.T) {
	srv := storetest.NewServer(t)
	proxy := newFreezer(t, srv.SocketPath())
	// a reaches etcd only through the proxy; b directly.
	clientA, err := clientv3.New(clientv3.Config{Endpoints: []string{proxy.From()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { clientA.Close() })
	clientB := srv.Client()

	const prefix = "/test/leader"
	terms := make(chan won, 4)
	var running sync.WaitGroup
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); running.Wait() })
	elect := func(id string, c *clientv3.Client) {
		el := &Elector{
			Client: c, Key: prefix, Identity: id, TTL: 2 * time.Second,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		}
		running.Go(func() {
			_ = el.Run(ctx, func(lctx context.Context, term store.LeaderTerm) {
				terms <- won{id, term}
				<-lctx.Done()
			})
		})
	}
	nextTerm := func(want string) store.LeaderTerm {
		t.Helper()
		select {
		case w := <-terms:
			if w.id != want {
				t.Fatalf("%s leads, want %s", w.id, want)
			}
			return w.term
		case <-time.After(30 * time.Second):
			t.Fatalf("%s did not lead within 30s", want)
		}
		panic("unreachable")
	}
	stores := func(c *clientv3.Client, term *store.LeaderTerm) store.Store[*apiv1.VirtualMachine] {
		opts := store.Options{Prefix: "/test/registry"}
		if term != nil {
			opts.LeaderTerm = term
		}
		return store.New(c, store.VirtualMachines, opts)
	}

	elect("a", clientA)
	termA := nextTerm("a")
	fencedA, unfencedA := stores(clientA, &termA), stores(clientA, nil)
	vm := storetest.MustCreate(t, fencedA, storetest.NewVM("ns", "web", nil)) // in its term a writes
	elect("b", clientB)
	waitCandidates(t, clientB, prefix, 2)

	// a stops: its keepalives no longer reach etcd, its lease runs out.
	proxy.freeze()
	termB := nextTerm("b")
	proxy.thaw()

	// a resumes and makes the write it was about to make.
	vm.Spec.RunStrategy = apiv1.RunStrategyAlways
	wctx, wcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer wcancel()
	if _, err := fencedA.Update(wctx, vm); !errors.Is(err, store.ErrNotLeader) {
		t.Fatalf("a's late fenced write: %v, want ErrNotLeader", err)
	}
	// Only the fence refused it: the same write unfenced goes through.
	if _, err := unfencedA.Update(wctx, vm); err != nil {
		t.Fatalf("a's late unfenced write: %v", err)
	}
	// b, leading, writes through its own fenced store.
	if _, err := stores(clientB, &termB).GuaranteedUpdate(wctx, "ns", "web", func(vm *apiv1.VirtualMachine) (*apiv1.VirtualMachine, error) {
		vm.Spec.RunStrategy = apiv1.RunStrategyHalted
		return vm, nil
	}); err != nil {
		t.Fatalf("b's fenced write: %v", err)
	}
}
