// Package storage is the storage controller: what the server does on the
// storage classes' backends (the part of a CSI controller plugin), with
// the Ceph CLIs of package ceph. It says whether each rbd class is
// reachable (status Ready), fences a failed node's access before its
// RestartElsewhere instances with volumes there run elsewhere (Fence,
// which the node controller calls), and lifts each fence once its node
// registered again or was deleted. Shared filesystems need nothing here:
// their nodes fence themselves at lease expiry, and QEMU's image locks
// keep a second writer out (docs/storage.md).
package storage

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/ceph"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller"
	"github.com/virtplane/terraform-provider-virtplane/internal/fsutil"
	"github.com/virtplane/terraform-provider-virtplane/internal/informer"
)

// Reasons of the Ready condition of a class.
const (
	ReasonReachable   = "Reachable"
	ReasonUnreachable = "Unreachable"
	ReasonDenied      = "KeyRefused"
	ReasonNoPool      = "PoolNotFound"
	ReasonSharedPath  = "CheckedByNodes"
)

// Options tune the controller. Zero values get the defaults.
type Options struct {
	// Dir holds the server's copy of each rbd class's key (a 0600 file
	// per class), which the CLIs read.
	Dir string
	// Interval is how often each class is probed again (default 1m).
	Interval time.Duration
	// FenceExpiry is how long a blocklist entry lasts unless lifted
	// (default a year: a fence is lifted by the controller, never by
	// time, or an isolated node's QEMU could write again).
	FenceExpiry time.Duration
	// Runner runs the Ceph CLIs; nil execs them.
	Runner ceph.Runner
	Clock  func() time.Time
}

func (o *Options) complete() {
	if o.Interval <= 0 {
		o.Interval = time.Minute
	}
	if o.FenceExpiry <= 0 {
		o.FenceExpiry = 365 * 24 * time.Hour
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
}

// ClassStore is how the controller writes classes' status.
type ClassStore interface {
	GuaranteedUpdate(ctx context.Context, namespace, name string, fn func(*apiv1.StorageClass) (*apiv1.StorageClass, error)) (*apiv1.StorageClass, error)
}

// Controller reconciles storage classes.
type Controller struct {
	opts    Options
	classes *informer.Informer[*apiv1.StorageClass]
	nodes   *informer.Informer[*apiv1.Node]
	store   ClassStore
	log     *slog.Logger
	queue   controller.Queue

	mu sync.Mutex // serialises fences and lifts of one class's entries
}

// New registers the controller's handlers; call it before the informers
// run.
func New(opts Options, classes *informer.Informer[*apiv1.StorageClass], nodes *informer.Informer[*apiv1.Node], st ClassStore, log *slog.Logger) *Controller {
	opts.complete()
	if log == nil {
		log = slog.Default()
	}
	c := &Controller{opts: opts, classes: classes, nodes: nodes, store: st, log: log.With("controller", "storage"), queue: controller.NewQueue("storage")}
	classes.AddHandler(informer.Handler[*apiv1.StorageClass]{
		OnAdd: func(sc *apiv1.StorageClass) { c.queue.Add(informer.Key(sc)) },
		OnUpdate: func(old, sc *apiv1.StorageClass) {
			if !proto.Equal(old.GetSpec(), sc.GetSpec()) {
				c.queue.Add(informer.Key(sc))
			}
		},
		OnDelete: func(sc *apiv1.StorageClass) { _ = os.RemoveAll(filepath.Join(c.opts.Dir, sc.GetMetadata().GetName())) },
	})
	// A node that registered again or was deleted may have a fence to
	// lift.
	nodeChanged := func(n *apiv1.Node) {
		for _, sc := range classes.List() {
			if sc.FenceOf(n.GetMetadata().GetName()) != nil {
				c.queue.Add(informer.Key(sc))
			}
		}
	}
	nodes.AddHandler(informer.Handler[*apiv1.Node]{
		OnUpdate: func(old, n *apiv1.Node) {
			if old.GetStatus().GetRegistrations() != n.GetStatus().GetRegistrations() {
				nodeChanged(n)
			}
		},
		OnDelete: nodeChanged,
	})
	return c
}

// Run waits for the caches and reconciles classes until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	if !controller.WaitForSynced(ctx, c.queue, c.classes.Synced(), c.nodes.Synced()) {
		return
	}
	c.log.Info("starting", "workers", workers)
	controller.Run(ctx, "storage", c.queue, workers, c, c.log)
}

// conn is how the server reaches rbd class sc: its key written to the
// class's file (0600, in a 0700 dir), the CLIs in the server's own
// network namespace.
func (c *Controller) conn(sc *apiv1.StorageClass) (*ceph.Conn, error) {
	r := sc.GetSpec().GetRbd()
	dir := filepath.Join(c.opts.Dir, sc.GetMetadata().GetName())
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	key := filepath.Join(dir, "key")
	if err := fsutil.WriteFileAtomic(key, []byte(r.GetKey()), 0o600); err != nil {
		return nil, fmt.Errorf("writing the key file: %w", err)
	}
	return &ceph.Conn{Monitors: r.GetMonitors(), Pool: r.GetPool(), User: r.GetUser(), KeyFile: key, Runner: c.opts.Runner}, nil
}

// Reconcile probes one class and lifts the fences it may lift.
func (c *Controller) Reconcile(ctx context.Context, key string) (controller.Result, error) {
	sc, ok := c.classes.GetByKey(key)
	if !ok {
		return controller.Result{}, nil
	}
	name := sc.GetMetadata().GetName()
	now := c.opts.Clock()
	ready := &apiv1.Condition{Type: apiv1.ConditionReady, Status: apiv1.ConditionTrue, Reason: ReasonReachable, Message: "the server reached the monitors and the pool"}
	var lifted []string
	var liftErrs map[string]string
	if sc.GetSpec().GetRbd() == nil {
		ready = &apiv1.Condition{Type: apiv1.ConditionReady, Status: apiv1.ConditionTrue, Reason: ReasonSharedPath,
			Message: "a shared filesystem is checked by each node it selects (Node status.storage)"}
	} else {
		conn, err := c.conn(sc)
		if err == nil {
			err = conn.Probe(ctx)
		}
		if err != nil {
			ready.Status, ready.Reason, ready.Message = apiv1.ConditionFalse, reasonOf(err), ceph.ProbeMessage(err)
		}
		if err == nil {
			lifted, liftErrs = c.lift(ctx, conn, sc)
		}
	}
	if old := apiv1.FindCondition(sc.GetStatus().GetConditions(), apiv1.ConditionReady); old.GetStatus() != ready.Status || old.GetReason() != ready.Reason {
		c.log.Info("storage class", "class", name, "ready", ready.Status, "reason", ready.Reason, "message", ready.Message, "probe_took", c.opts.Clock().Sub(now))
	}
	_, err := c.store.GuaranteedUpdate(ctx, "", name, func(cur *apiv1.StorageClass) (*apiv1.StorageClass, error) {
		if cur.Status == nil {
			cur.Status = &apiv1.StorageClassStatus{}
		}
		cur.Status.Conditions = apiv1.SetCondition(cur.Status.Conditions, ready, now)
		cur.Status.Fences = slices.DeleteFunc(cur.Status.Fences, func(f *apiv1.StorageFence) bool {
			return slices.Contains(lifted, f.GetNode()+"/"+f.GetAddress())
		})
		for _, f := range cur.Status.Fences {
			if msg, ok := liftErrs[f.GetNode()+"/"+f.GetAddress()]; ok {
				f.Message = msg
			}
		}
		return cur, nil
	})
	if err != nil {
		return controller.Result{}, fmt.Errorf("storage class %s: %w", name, err)
	}
	return controller.Result{RequeueAfter: c.opts.Interval}, nil
}

// lift removes the blocklist entries of the fences whose node registered
// again or is gone, returning them (node/address) and why others failed.
func (c *Controller) lift(ctx context.Context, conn *ceph.Conn, sc *apiv1.StorageClass) (lifted []string, errs map[string]string) {
	errs = map[string]string{}
	for _, f := range sc.GetStatus().GetFences() {
		n, ok := c.nodes.Get("", f.GetNode())
		if ok && n.GetStatus().GetRegistrations() <= f.GetRegistrations() {
			continue // not back yet
		}
		id := f.GetNode() + "/" + f.GetAddress()
		ip, err := netip.ParseAddr(f.GetAddress())
		if err == nil {
			err = conn.BlocklistRemove(ctx, ip)
		}
		if err != nil {
			errs[id] = "lifting the fence: " + err.Error()
			c.log.Warn("cannot lift a storage fence", "class", sc.GetMetadata().GetName(), "node", f.GetNode(), "address", f.GetAddress(), "err", err)
			continue
		}
		why := "registered again"
		if !ok {
			why = "was deleted"
		}
		c.log.Info("storage fence lifted", "class", sc.GetMetadata().GetName(), "node", f.GetNode(), "address", f.GetAddress(), "because_the_node", why)
		lifted = append(lifted, id)
	}
	return lifted, errs
}

func reasonOf(err error) string {
	switch {
	case errors.Is(err, ceph.ErrDenied):
		return ReasonDenied
	case errors.Is(err, ceph.ErrNotFound):
		return ReasonNoPool
	}
	return ReasonUnreachable
}
