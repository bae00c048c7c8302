// Package netinventory keeps a node's network inventory: the Linux
// bridges in its network namespace and the active libvirt networks of its
// libvirtd (NodeStatus.bridges and networks), which placement matches
// instances' bridge and libvirt networks against.
//
// Listing runs in a goroutine of its own, every refresh period, never on
// the heartbeat path: libvirt's networks take a launcher process
// (list-networks) to list, and a hung libvirtd must not hold up the
// node's lease. Heartbeats carry the latest inventory only when it
// differs from what the server has, as they do the image list.
package netinventory

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/clock"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/reported"
)

// DefaultRefreshPeriod is how often the inventory is listed: the image
// list's period, so that a bridge or network added for a waiting instance
// lets it in about as soon as an imported image would.
const DefaultRefreshPeriod = 15 * time.Second

// listTimeout bounds one listing: a hung libvirtd delays the inventory,
// not forever.
const listTimeout = 30 * time.Second

// Options configure an Inventory.
type Options struct {
	// Bridges lists the node's Linux bridges (ListBridges); required.
	Bridges func(ctx context.Context) ([]string, error)
	// Networks lists the names of the libvirt networks guests can be
	// attached to (the active ones); required.
	Networks func(ctx context.Context) ([]string, error)
	// RefreshPeriod is how often both are listed; default
	// DefaultRefreshPeriod.
	RefreshPeriod time.Duration
	// Clock times the refreshes; the real clock when nil.
	Clock  clock.WithTicker
	Logger *slog.Logger
}

// Inventory is the node's network inventory as last listed and as last
// sent (reported.Latest: Changed, Pending, MarkSent).
type Inventory struct {
	*reported.Latest[*apiv1.NodeNetworkInventory]
	opts Options
	log  *slog.Logger
}

// New returns an Inventory; Run keeps it fresh.
func New(opts Options) *Inventory {
	if opts.RefreshPeriod <= 0 {
		opts.RefreshPeriod = DefaultRefreshPeriod
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Inventory{Latest: reported.New[*apiv1.NodeNetworkInventory](), opts: opts, log: opts.Logger}
}

// ForRegister waits up to wait for the first listing and returns the
// inventory to register with; nil when there is none yet.
func (inv *Inventory) ForRegister(ctx context.Context, wait time.Duration) *apiv1.NodeNetworkInventory {
	return inv.Latest.ForRegister(ctx, inv.opts.Clock, wait)
}

// Run lists the inventory now and then every refresh period until ctx
// ends.
func (inv *Inventory) Run(ctx context.Context) {
	r := refresher{inv: inv, warned: map[string]string{}}
	t := inv.opts.Clock.NewTicker(inv.opts.RefreshPeriod)
	defer t.Stop()
	for {
		r.refresh(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

// refresher is the state of Run.
type refresher struct {
	inv *Inventory
	// warned is the last warning per cause ("bridges", "networks",
	// "bad bridges"...), so that a lasting problem is logged once, not
	// every period.
	warned map[string]string
}

// refresh lists both halves. A half that cannot be listed keeps what it
// had (nothing, the first time): a libvirtd restarting is no reason to
// stop placing instances on the node's networks.
func (r *refresher) refresh(ctx context.Context) {
	inv := r.inv
	lctx, cancel := context.WithTimeout(ctx, listTimeout)
	defer cancel()
	bridges, errB := inv.opts.Bridges(lctx)
	networks, errN := inv.opts.Networks(lctx)
	if ctx.Err() != nil {
		return // stopping: whatever failed failed because of it
	}
	prev, _ := inv.Current()
	next := &apiv1.NodeNetworkInventory{Bridges: prev.GetBridges(), Networks: prev.GetNetworks()}
	if r.ok("bridges", "listing bridges failed; keeping the previous list", errB) {
		next.Bridges = r.clean("bridges", bridges, validation.MaxNodeBridges, validation.ValidateNodeBridgeName)
	}
	if r.ok("networks", "listing libvirt networks failed; keeping the previous list", errN) {
		next.Networks = r.clean("networks", networks, validation.MaxNodeNetworks, validation.ValidateNodeNetworkName)
	}
	if inv.Set(next) {
		inv.log.Info("node networks listed", "bridges", next.Bridges, "networks", next.Networks)
	}
}

// ok reports whether err is nil, warning about it once per cause if not.
func (r *refresher) ok(cause, msg string, err error) bool {
	s := ""
	if err != nil {
		s = err.Error()
	}
	if s != "" && s != r.warned[cause] {
		r.inv.log.Warn(msg, "err", err)
	}
	r.warned[cause] = s
	return err == nil
}

// clean returns names sorted, each once, without those the server would
// refuse (better one bridge missing than a node whose inventory is never
// stored), and cut short at limit.
func (r *refresher) clean(cause string, names []string, limit int, valid func(string, *field.Path) field.ErrorList) []string {
	out := make([]string, 0, len(names))
	var bad []string
	for _, n := range names {
		if errs := valid(n, field.NewPath(cause)); len(errs) > 0 {
			bad = append(bad, fmt.Sprintf("%q: %v", n, errs.ToAggregate()))
			continue
		}
		out = append(out, n)
	}
	slices.Sort(out)
	out = slices.Compact(out)
	if len(out) > limit {
		bad = append(bad, fmt.Sprintf("%d more than the %d a node may list", len(out)-limit, limit))
		out = out[:limit]
	}
	if s := strings.Join(bad, "; "); s != "" && s != r.warned["bad "+cause] {
		r.inv.log.Warn("left out of the node's "+cause, "names", s)
		r.warned["bad "+cause] = s
	} else if s == "" {
		delete(r.warned, "bad "+cause)
	}
	if len(out) == 0 {
		return nil // as the server stores an empty list
	}
	return out
}
