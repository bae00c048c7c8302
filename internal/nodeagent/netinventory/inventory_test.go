package netinventory

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

const testTimeout = 10 * time.Second

// lister is a settable listing: its names, or its error.
type lister struct {
	mu    sync.Mutex
	names []string
	err   error
	calls int
}

func (l *lister) set(err error, names ...string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.names, l.err = names, err
}

func (l *lister) list(context.Context) ([]string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls++
	return slices.Clone(l.names), l.err
}

func (l *lister) called() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.calls
}

func signalled(inv *Inventory) bool {
	select {
	case <-inv.Changed():
		return true
	default:
		return false
	}
}

func names(l *apiv1.NodeNetworkInventory) string {
	return strings.Join(l.GetBridges(), ",") + " | " + strings.Join(l.GetNetworks(), ",")
}

// A listing is pending until sent, and again only once it changes; a half
// that fails keeps what it had; names the server would refuse are left
// out; the lists are sorted and each name is there once.
func TestRefresh(t *testing.T) {
	var bridges, networks lister
	bridges.set(nil, "vpguest0", "br0", "br0")
	networks.set(errors.New("libvirtd is starting"))
	inv := New(Options{Bridges: bridges.list, Networks: networks.list, Logger: slog.New(slog.DiscardHandler)})
	r := refresher{inv: inv, warned: map[string]string{}}
	ctx := context.Background()
	if inv.Pending() != nil || signalled(inv) {
		t.Fatal("pending before any listing")
	}

	r.refresh(ctx)
	l := inv.Pending()
	if got := names(l); got != "br0,vpguest0 | " || !signalled(inv) {
		t.Fatalf("first listing: %q", got)
	}
	inv.MarkSent(l)
	if inv.Pending() != nil {
		t.Fatal("pending once sent")
	}

	networks.set(nil, "lan", "default")
	r.refresh(ctx)
	if got := names(inv.Pending()); got != "br0,vpguest0 | default,lan" || !signalled(inv) {
		t.Fatalf("networks listed: %q", got)
	}
	inv.MarkSent(inv.Pending())

	// Unchanged: nothing pending, nothing signalled.
	r.refresh(ctx)
	if inv.Pending() != nil || signalled(inv) {
		t.Fatalf("an unchanged listing is pending: %v", inv.Pending())
	}

	// Failures keep the previous halves.
	bridges.set(errors.New("netlink: permission denied"))
	networks.set(errors.New("list-networks: exit status 1"))
	r.refresh(ctx)
	if inv.Pending() != nil || signalled(inv) {
		t.Fatalf("a failed listing changed the inventory: %v", inv.Pending())
	}

	// What the server refuses is left out; the rest goes.
	bridges.set(nil, "br0", "a-name-too-long-for-linux", "br\x1b")
	networks.set(nil, "a/b", "lan")
	r.refresh(ctx)
	if got := names(inv.Pending()); got != "br0 | lan" {
		t.Fatalf("with invalid names: %q", got)
	}

	// Everything gone is an empty inventory, sent as such.
	bridges.set(nil)
	networks.set(nil)
	r.refresh(ctx)
	if l := inv.Pending(); l == nil || len(l.Bridges)+len(l.Networks) != 0 {
		t.Fatalf("empty listing: %v", l)
	}
}

// A node with more bridges than the server takes sends the first ones.
func TestRefreshCutsShort(t *testing.T) {
	many := make([]string, validation.MaxNodeBridges+5)
	for i := range many {
		many[i] = "b" + strings.Repeat("x", i%10) + string(rune('a'+i%26)) + string(rune('a'+i/26%26))
	}
	var bridges, networks lister
	bridges.set(nil, many...)
	inv := New(Options{Bridges: bridges.list, Networks: networks.list, Logger: slog.New(slog.DiscardHandler)})
	r := refresher{inv: inv, warned: map[string]string{}}
	r.refresh(context.Background())
	got := inv.Pending().GetBridges()
	if len(got) != validation.MaxNodeBridges || !slices.IsSorted(got) {
		t.Fatalf("%d bridges, sorted %v", len(got), slices.IsSorted(got))
	}
	if errs := validation.ValidateNodeNetworks(got, nil, nil, nil); len(errs) > 0 {
		t.Fatal(errs)
	}
}

// Run lists at once, then once per period on the clock, and registration
// waits for the first listing, at most the wait it is given.
func TestRunAndForRegister(t *testing.T) {
	var bridges, networks lister
	bridges.set(nil, "br0")
	networks.set(nil, "default")
	clk := clocktesting.NewFakeClock(time.Now())
	inv := New(Options{Bridges: bridges.list, Networks: networks.list, RefreshPeriod: time.Minute, Clock: clk,
		Logger: slog.New(slog.DiscardHandler)})

	// Before Run: the wait runs out on the clock.
	got := make(chan *apiv1.NodeNetworkInventory, 1)
	go func() { got <- inv.ForRegister(context.Background(), 5*time.Second) }()
	testutil.Eventually(t, testTimeout, "registration waiting on the clock", clk.HasWaiters)
	clk.Step(5 * time.Second)
	if l := <-got; l != nil {
		t.Fatalf("without a listing: %v", l)
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); inv.Run(ctx) }()
	defer func() { cancel(); <-done }()
	if l := inv.ForRegister(ctx, time.Hour); names(l) != "br0 | default" {
		t.Fatalf("registered with %q", names(l))
	}
	inv.MarkSent(inv.Pending())
	signalled(inv) // the first listing's
	// The first listing is done (ForRegister returned) and the ticker
	// made before it: the next listing is the period's.
	bridges.set(nil, "br0", "br1")
	clk.Step(time.Minute)
	select {
	case <-inv.Changed():
	case <-time.After(testTimeout):
		t.Fatal("a changed listing did not signal")
	}
	if l := inv.Pending(); names(l) != "br0,br1 | default" {
		t.Fatalf("after a period: %q", names(l))
	}
	if n := bridges.called(); n != 2 {
		t.Errorf("%d listings after one period, want 2", n)
	}
}
