// Package snapshot is the node's part of snapshots (docs/snapshots.md,
// "Snapshot flow" step 3): the snapshot contents labelled with this node
// are copied here, and their data removed when they are deleted or
// abandoned. The copying is in copy.go; restores are package restore.
package snapshot

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/utils/clock"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client/remotestore"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller"
	"github.com/virtplane/terraform-provider-virtplane/internal/informer"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/disks"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/nodedir"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/nodework"
)

// API is the snapshot content service as the node uses it: it watches
// the contents of its node and writes their status.
type API interface {
	remotestore.SnapshotContentWatcher
	UpdateStatus(ctx context.Context, in *apiv1.UpdateSnapshotContentStatusRequest, opts ...grpc.CallOption) (*apiv1.VirtualMachineSnapshotContent, error)
}

// Copier copies and merges the qcow2 files of snapshots (disks.QemuImg).
type Copier interface {
	Info(ctx context.Context, path string) (disks.ImageInfo, error)
	Convert(ctx context.Context, src, dst string, shared bool) error
	Commit(ctx context.Context, overlay string) error
}

// Domains finds the running domain of a VM on this node.
type Domains interface {
	// RunningDomain returns the launcher of VM vmUID's running (or
	// paused) domain here and its instance as cached, or a nil launcher
	// when none runs. A launcher that cannot be reached yet is an error:
	// whether the guest writes to the volumes is unknown.
	RunningDomain(ctx context.Context, vmUID string) (launcher.Snapshots, *apiv1.VirtualMachineInstance, error)
}

// Options configure Contents.
type Options struct {
	NodeName string
	API      API
	Layout   nodedir.Layout
	Copier   Copier
	Domains  Domains
	// Classes are the storage classes the node uses (volumes on them);
	// nil when the node has none.
	Classes Classes
	// CallTimeout bounds a status write; GCPeriod is how often the data
	// of contents that are gone is looked for.
	CallTimeout, GCPeriod time.Duration
	Clock                 clock.WithTicker
	Logger                *slog.Logger
}

// Contents is the node's part of snapshot contents: the informer, the
// queue, the copies under way and the results not yet written.
type Contents struct {
	opts Options
	log  *slog.Logger
	work *nodework.Worker[*apiv1.VirtualMachineSnapshotContent]

	mu sync.Mutex // guards results
	// results are the statuses of finished copies whose write failed, by
	// content uid: the next pass writes them instead of copying again.
	results map[string]*apiv1.VirtualMachineSnapshotContentStatus
}

// workers: one copy at a time, copies are heavy on the disk.
const workers = 1

// New returns the node's snapshot content worker; Run starts it.
func New(opts Options) *Contents {
	c := &Contents{opts: opts, log: opts.Logger, results: map[string]*apiv1.VirtualMachineSnapshotContentStatus{}}
	c.work = nodework.New(nodework.Options[*apiv1.VirtualMachineSnapshotContent]{
		Name: "snapshot-content", Kind: "snapshot content",
		Watch:    remotestore.NewSnapshotContents(opts.API),
		Selector: apiv1.LabelNodeName + "=" + opts.NodeName,
		Stops:    stops,
		UpdateStatus: func(ctx context.Context, sc *apiv1.VirtualMachineSnapshotContent) (*apiv1.VirtualMachineSnapshotContent, error) {
			return opts.API.UpdateStatus(ctx, &apiv1.UpdateSnapshotContentStatusRequest{Content: sc})
		},
		InitStatus: func(sc *apiv1.VirtualMachineSnapshotContent) {
			if sc.Status == nil {
				sc.Status = &apiv1.VirtualMachineSnapshotContentStatus{}
			}
		},
		CallTimeout: opts.CallTimeout, Logger: opts.Logger,
	})
	c.work.Inf.AddIndex(uidIndex, func(sc *apiv1.VirtualMachineSnapshotContent) []string {
		return []string{sc.GetMetadata().GetUid()}
	})
	return c
}

const uidIndex = "uid"

// Owner returns the namespace of this node's snapshot content uid, which
// a restore's source path names: a restore reads only the snapshots of
// its own namespace. synced is false until the first listing is in,
// when no answer can be given yet.
func (c *Contents) Owner(uid string) (namespace string, ok, synced bool) {
	if !c.work.Inf.HasSynced() {
		return "", false, false
	}
	for _, sc := range c.work.Inf.ByIndex(uidIndex, uid) {
		return sc.GetMetadata().GetNamespace(), true, true
	}
	return "", false, true
}

// Cache is the informer of this node's contents.
func (c *Contents) Cache() *informer.Informer[*apiv1.VirtualMachineSnapshotContent] {
	return c.work.Inf
}

// stops: the node must stop copying sc and keep nothing.
func stops(sc *apiv1.VirtualMachineSnapshotContent) bool {
	return sc.GetMetadata().GetDeletionTimestamp() != nil || sc.GetSpec().GetAbandoned()
}

// Run runs the informer, and once it has synced, collects the data of
// contents that are gone and runs the worker, in the background; the
// returned func stops them.
func (c *Contents) Run(ctx context.Context) (stop func()) {
	return c.work.Run(ctx, workers, controller.ReconcileFunc(c.Reconcile), c.gcLoop)
}

func (c *Contents) gcLoop(ctx context.Context) {
	c.CollectDirs(ctx)
	t := c.opts.Clock.NewTicker(c.opts.GCPeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			c.CollectDirs(ctx)
		}
	}
}

// CollectDirs removes the snapshot directories of contents this node no
// longer has, on the informer's word only: it lists every content of
// this node once synced, and keeps its last listing while the API is
// unreachable.
func (c *Contents) CollectDirs(context.Context) {
	if !c.work.Inf.HasSynced() {
		return
	}
	layout := c.opts.Layout
	entries, err := os.ReadDir(layout.SnapshotsDir())
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			c.log.Warn("listing snapshot directories", "err", err)
		}
		return
	}
	known := map[string]bool{}
	for _, sc := range c.work.Inf.List() {
		known[sc.GetMetadata().GetUid()] = true
	}
	for _, e := range entries {
		uid := e.Name()
		if known[uid] {
			continue
		}
		if _, err := layout.SnapshotDir(uid); err != nil {
			c.log.Warn("not a snapshot directory; leaving it", "name", uid, "err", err)
			continue
		}
		if err := layout.RemoveSnapshotDir(uid); err != nil {
			c.log.Warn("removing the data of a deleted snapshot", "content", uid, "err", err)
			continue
		}
		c.log.Info("data of a deleted snapshot removed", "content", uid)
	}
}

// Reconcile brings one content of this node forward: copies it, or
// removes its data and releases it.
func (c *Contents) Reconcile(ctx context.Context, key string) (controller.Result, error) {
	sc, ok := c.work.Inf.GetByKey(key)
	if !ok {
		return controller.Result{}, nil // its directory goes with the next collection
	}
	if c.work.Stale(sc) {
		return controller.Result{}, nil // the watch brings the node's own write, and queues it again
	}
	phase := sc.GetStatus().GetPhase()
	switch {
	case stops(sc):
		return controller.Result{}, c.release(ctx, sc)
	case phase == apiv1.SnapshotSucceeded || phase == apiv1.SnapshotFailed:
		return controller.Result{}, nil
	}
	if st := c.takeResult(sc.GetMetadata().GetUid()); st != nil {
		if _, err := c.work.WriteStatus(ctx, sc, func(next *apiv1.VirtualMachineSnapshotContent) { next.Status = st }); err != nil {
			c.keepResult(sc.GetMetadata().GetUid(), st)
			return controller.Result{}, err
		}
		return controller.Result{}, nil
	}
	cctx, done := c.work.Start(ctx, key)
	defer done()
	err := c.take(cctx, sc)
	if cctx.Err() != nil && ctx.Err() == nil {
		// Deleted or abandoned meanwhile: its update queued it again, and
		// that pass undoes the work.
		return controller.Result{}, nil
	}
	return controller.Result{}, err
}

func (c *Contents) takeResult(uid string) *apiv1.VirtualMachineSnapshotContentStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.results[uid]
	delete(c.results, uid)
	return st
}

func (c *Contents) keepResult(uid string, st *apiv1.VirtualMachineSnapshotContentStatus) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.results[uid] = st
}

// release undoes whatever this node did for a content that is deleted or
// abandoned: an online snapshot's overlays are committed, its data
// removed; then the node's finalizer goes, and an unfinished content is
// marked Failed.
func (c *Contents) release(ctx context.Context, sc *apiv1.VirtualMachineSnapshotContent) error {
	uid := sc.GetMetadata().GetUid()
	c.takeResult(uid)
	if _, err := c.opts.Layout.SnapshotDir(uid); err == nil {
		if err := c.undo(ctx, sc); err != nil {
			return err
		}
	}
	phase := sc.GetStatus().GetPhase()
	final := phase == apiv1.SnapshotSucceeded || phase == apiv1.SnapshotFailed
	has := slices.Contains(sc.GetMetadata().GetFinalizers(), apiv1.FinalizerSnapshotData)
	if final && !has {
		return nil
	}
	_, err := c.work.WriteStatus(ctx, sc, func(next *apiv1.VirtualMachineSnapshotContent) {
		next.Metadata.Finalizers = slices.DeleteFunc(next.Metadata.Finalizers, func(f string) bool { return f == apiv1.FinalizerSnapshotData })
		if !final {
			next.Status.Phase, next.Status.Error, next.Status.Message = apiv1.SnapshotFailed, "abandoned", ""
			next.Status.ReadyToUse = false
		}
	})
	if status.Code(err) == codes.NotFound {
		return nil
	}
	if err == nil {
		c.work.Forget(uid) // the content is gone, or goes with the controller's delete
		c.log.Info("snapshot data released", "content", informer.Key(sc), "uid", uid)
	}
	return err
}
