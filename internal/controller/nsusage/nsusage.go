// Package nsusage keeps namespaces' recorded usage true to their
// objects. The store charges every write in its own transaction
// (internal/store, accounting.go), so usage drifts only from writes that
// bypassed it: objects stored before namespaces were objects (an
// upgraded cluster), a store without accounting, a hand edit of etcd.
// The Reconciler repairs that: it makes the Namespace of every namespace
// that holds objects but has none, and recomputes status.used from the
// stored objects, writing only what differs.
//
// It never loses a concurrent charge: it reads each Namespace before the
// objects, and writes it back with a compare on that read's version.
// Every charged write moves its namespace's version, so a charge that
// landed after the read (and that the objects read may or may not show)
// fails the write, which waits for the next pass.
package nsusage

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"k8s.io/utils/clock"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/nsquota"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// DefaultInterval is how often the leader recomputes usage.
const DefaultInterval = 10 * time.Minute

// Lister lists the stored objects of one kind.
type Lister[T store.Object] interface {
	List(ctx context.Context, opts store.ListOptions) ([]T, int64, error)
}

// NamespaceStore is what the reconciler reads and writes of Namespaces.
type NamespaceStore interface {
	Lister[*apiv1.Namespace]
	Create(ctx context.Context, ns *apiv1.Namespace) (*apiv1.Namespace, error)
	// Update is a compare-and-swap on the resource version.
	Update(ctx context.Context, ns *apiv1.Namespace) (*apiv1.Namespace, error)
}

// Sources are the objects the reconciler reads.
type Sources struct {
	Namespaces NamespaceStore
	// The charged kinds (store.Charge).
	VMs    Lister[*apiv1.VirtualMachine]
	VMIs   Lister[*apiv1.VirtualMachineInstance]
	Images Lister[*apiv1.Image]
	// Occupied list the namespaces holding objects of the other
	// namespaced kinds (NamespacesOf), whose namespaces need an object
	// too.
	Occupied []func(ctx context.Context) ([]string, error)
}

// NamespacesOf lists the namespaces that hold objects of l; a nil l (a
// kind the server does not serve) holds none.
func NamespacesOf[T store.Object](l Lister[T]) func(ctx context.Context) ([]string, error) {
	return func(ctx context.Context) ([]string, error) {
		if l == nil {
			return nil, nil
		}
		objs, _, err := l.List(ctx, store.ListOptions{})
		if err != nil {
			return nil, err
		}
		var out []string
		for _, o := range objs {
			out = append(out, o.GetMetadata().GetNamespace())
		}
		return out, nil
	}
}

// Options tune a Reconciler.
type Options struct {
	// Interval between passes; DefaultInterval when zero.
	Interval time.Duration
	Clock    clock.Clock // clock.RealClock when nil
	Logger   *slog.Logger
}

// Reconciler recomputes namespaces' usage (see the package doc).
type Reconciler struct {
	src  Sources
	opts Options
	// afterRead, when set (tests), runs between reading the Namespaces and
	// reading the objects: where a concurrent charge would land.
	afterRead func()
}

// New returns a reconciler over src.
func New(src Sources, opts Options) *Reconciler {
	if opts.Interval <= 0 {
		opts.Interval = DefaultInterval
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Reconciler{src: src, opts: opts}
}

// Run makes a pass at once (a new leader backfills an upgraded cluster)
// and then every Interval, until ctx ends. A failed pass is logged and
// tried again at the next tick.
func (r *Reconciler) Run(ctx context.Context) {
	for {
		if err := r.Reconcile(ctx); err != nil && ctx.Err() == nil {
			r.opts.Logger.Warn("namespace usage: pass failed", "err", err)
		}
		t := r.opts.Clock.NewTimer(r.opts.Interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
	}
}

// Reconcile makes one pass: Namespaces for occupied namespaces that have
// none, and usage recomputed where it differs. A namespace charged during
// the pass is left for the next one.
func (r *Reconciler) Reconcile(ctx context.Context) error {
	nss, _, err := r.src.Namespaces.List(ctx, store.ListOptions{})
	if err != nil {
		return fmt.Errorf("namespace usage: list namespaces: %w", err)
	}
	if r.afterRead != nil {
		r.afterRead()
	}
	usage, err := r.usage(ctx)
	if err != nil {
		return err
	}
	occupied := map[string]bool{}
	for ns := range usage {
		occupied[ns] = true
	}
	for _, list := range r.src.Occupied {
		names, err := list(ctx)
		if err != nil {
			return fmt.Errorf("namespace usage: %w", err)
		}
		for _, n := range names {
			occupied[n] = true
		}
	}
	known := map[string]bool{}
	var errs []error
	for _, ns := range nss {
		name := ns.GetMetadata().GetName()
		known[name] = true
		want := usage[name]
		if nsquota.FromAPI(ns.GetStatus().GetUsed()).Equal(want) {
			continue
		}
		was := nsquota.FromAPI(ns.GetStatus().GetUsed())
		if ns.Status == nil {
			ns.Status = &apiv1.NamespaceStatus{}
		}
		ns.Status.Used = want.ToAPI()
		// ns carries the version read before the objects: the compare
		// that fails on any charge since.
		_, err := r.src.Namespaces.Update(ctx, ns)
		switch {
		case errors.Is(err, store.ErrConflict), errors.Is(err, store.ErrNotFound):
			r.opts.Logger.Info("namespace usage: changed during the pass, left for the next", "namespace", name)
		case err != nil:
			errs = append(errs, fmt.Errorf("namespace %s: %w", name, err))
		default:
			r.opts.Logger.Info("namespace usage repaired", "namespace", name, "was", was.String(), "now", want.String())
		}
	}
	for _, name := range slices.Sorted(maps.Keys(occupied)) {
		if known[name] || name == "" {
			continue
		}
		obj := &apiv1.Namespace{Metadata: &apiv1.ObjectMeta{Name: name}, Spec: &apiv1.NamespaceSpec{},
			Status: &apiv1.NamespaceStatus{Used: usage[name].ToAPI()}}
		_, err := r.src.Namespaces.Create(ctx, obj)
		switch {
		case errors.Is(err, store.ErrAlreadyExists):
			// Made by a write meanwhile, which charged it.
		case err != nil:
			errs = append(errs, fmt.Errorf("namespace %s: create: %w", name, err))
		default:
			r.opts.Logger.Info("namespace object made for existing objects", "namespace", name, "used", usage[name].String())
		}
	}
	return errors.Join(errs...)
}

// usage sums what the stored objects ask, by namespace.
func (r *Reconciler) usage(ctx context.Context) (map[string]nsquota.Usage, error) {
	out := map[string]nsquota.Usage{}
	add := func(obj store.Object) {
		if ns, u, _ := store.Charge(obj); ns != "" && !u.IsZero() {
			out[ns] = out[ns].Add(u)
		}
	}
	vms, _, err := r.src.VMs.List(ctx, store.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("namespace usage: list vms: %w", err)
	}
	for _, o := range vms {
		add(o)
	}
	vmis, _, err := r.src.VMIs.List(ctx, store.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("namespace usage: list instances: %w", err)
	}
	for _, o := range vmis {
		add(o)
	}
	imgs, _, err := r.src.Images.List(ctx, store.ListOptions{LabelSelector: apiv1.LabelOwnerNamespace})
	if err != nil {
		return nil, fmt.Errorf("namespace usage: list images: %w", err)
	}
	for _, o := range imgs {
		add(o)
	}
	return out, nil
}
