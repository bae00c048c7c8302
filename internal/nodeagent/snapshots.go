package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client/remotestore"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller"
	"github.com/virtplane/terraform-provider-virtplane/internal/informer"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/disks"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// The node's part of snapshots (docs/snapshots.md, "Snapshot flow" step
// 3): the snapshot contents labelled with this node are copied here, and
// their data removed when they are deleted or abandoned. The copying is
// in snapshotcopy.go; restores are in restores.go.

// SnapshotContentAPI is the snapshot content service as the node uses it:
// it watches the contents of its node and writes their status.
type SnapshotContentAPI interface {
	remotestore.SnapshotContentWatcher
	UpdateStatus(ctx context.Context, in *apiv1.UpdateSnapshotContentStatusRequest, opts ...grpc.CallOption) (*apiv1.VirtualMachineSnapshotContent, error)
}

// VolumeCopier copies and merges the qcow2 files of snapshots and
// restores (disks.QemuImg).
type VolumeCopier interface {
	Info(ctx context.Context, path string) (disks.ImageInfo, error)
	Convert(ctx context.Context, src, dst string, shared bool) error
	Commit(ctx context.Context, overlay string) error
}

var _ VolumeCopier = disks.QemuImg{}

// snapshotWork is the agent's part of snapshot contents: the informer,
// the queue, the copies under way and the results not yet written.
type snapshotWork struct {
	api   SnapshotContentAPI
	inf   *informer.Informer[*apiv1.VirtualMachineSnapshotContent]
	queue controller.Queue

	// underWay cancels the copy under way, by content key: a content
	// deleted or abandoned meanwhile stops it.
	underWay

	mu sync.Mutex // guards results
	// results are the statuses of finished copies whose write failed, by
	// content uid: the next pass writes them instead of copying again.
	results map[string]*apiv1.VirtualMachineSnapshotContentStatus
	// written keeps passes over a cached copy older than the node's own
	// last write from redoing a finished copy.
	written ownWrites
}

// snapshotWorkers: one copy at a time, copies are heavy on the disk.
const snapshotWorkers = 1

func (a *Agent) newSnapshotWork() {
	api := a.opts.API.SnapshotContents
	if api == nil {
		return
	}
	w := &snapshotWork{
		api: api,
		inf: informer.New[*apiv1.VirtualMachineSnapshotContent](remotestore.NewSnapshotContents(api),
			store.ListOptions{LabelSelector: apiv1.LabelNodeName + "=" + a.opts.NodeName}, a.log.With("informer", "snapshot-content")),
		queue:   controller.NewQueue("snapshot-content"),
		results: map[string]*apiv1.VirtualMachineSnapshotContentStatus{},
	}
	enqueue := func(c *apiv1.VirtualMachineSnapshotContent) {
		key := informer.Key(c)
		if contentStops(c) {
			w.cancel(key)
		}
		w.queue.Add(key)
	}
	w.inf.AddHandler(informer.Handler[*apiv1.VirtualMachineSnapshotContent]{
		OnAdd:    enqueue,
		OnUpdate: func(_, c *apiv1.VirtualMachineSnapshotContent) { enqueue(c) },
		OnDelete: func(c *apiv1.VirtualMachineSnapshotContent) { w.cancel(informer.Key(c)); w.queue.Add(informer.Key(c)) },
	})
	a.snaps = w
}

// contentStops: the node must stop copying c and keep nothing.
func contentStops(c *apiv1.VirtualMachineSnapshotContent) bool {
	return c.GetMetadata().GetDeletionTimestamp() != nil || c.GetSpec().GetAbandoned()
}

// runSnapshots runs the informer, and once it has synced, collects the
// data of contents that are gone and runs the worker, in the
// background; the returned func stops them.
func (a *Agent) runSnapshots(ctx context.Context) (stop func()) {
	w := a.snaps
	if w == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { w.inf.Run(ctx) })
	wg.Go(func() {
		select {
		case <-w.inf.Synced():
		case <-ctx.Done():
			return
		}
		var loops sync.WaitGroup
		loops.Go(func() {
			a.gcSnapshotDirs(ctx)
			a.every(ctx, a.opts.Timing.VMDirGCPeriod, a.gcSnapshotDirs)
		})
		controller.Run(ctx, "snapshot-content", w.queue, snapshotWorkers, controller.ReconcileFunc(a.reconcileContent), a.log)
		loops.Wait()
	})
	return func() {
		cancel()
		w.queue.ShutDown()
		wg.Wait()
	}
}

// gcSnapshotDirs removes the snapshot directories of contents this node
// no longer has, on the informer's word only: it lists every content of
// this node once synced, and keeps its last listing while the API is
// unreachable.
func (a *Agent) gcSnapshotDirs(context.Context) {
	w := a.snaps
	if w == nil || !w.inf.HasSynced() {
		return
	}
	entries, err := os.ReadDir(a.layout.SnapshotsDir())
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			a.log.Warn("listing snapshot directories", "err", err)
		}
		return
	}
	known := map[string]bool{}
	for _, c := range w.inf.List() {
		known[c.GetMetadata().GetUid()] = true
	}
	for _, e := range entries {
		uid := e.Name()
		if known[uid] {
			continue
		}
		if _, err := a.layout.SnapshotDir(uid); err != nil {
			a.log.Warn("not a snapshot directory; leaving it", "name", uid, "err", err)
			continue
		}
		if err := a.layout.RemoveSnapshotDir(uid); err != nil {
			a.log.Warn("removing the data of a deleted snapshot", "content", uid, "err", err)
			continue
		}
		a.log.Info("data of a deleted snapshot removed", "content", uid)
	}
}

// reconcileContent brings one content of this node forward: copies it,
// or removes its data and releases it.
func (a *Agent) reconcileContent(ctx context.Context, key string) (controller.Result, error) {
	w := a.snaps
	c, ok := w.inf.GetByKey(key)
	if !ok {
		return controller.Result{}, nil // its directory goes with the next collection
	}
	if w.written.stale(c.GetMetadata().GetUid(), c.GetMetadata().GetResourceVersion()) {
		return controller.Result{}, nil // the watch brings the node's own write, and queues it again
	}
	phase := c.GetStatus().GetPhase()
	switch {
	case contentStops(c):
		return controller.Result{}, a.releaseContent(ctx, c)
	case phase == apiv1.SnapshotSucceeded || phase == apiv1.SnapshotFailed:
		return controller.Result{}, nil
	}
	if st := w.takeResult(c.GetMetadata().GetUid()); st != nil {
		if _, err := a.writeContent(ctx, c, func(next *apiv1.VirtualMachineSnapshotContent) { next.Status = st }); err != nil {
			w.keepResult(c.GetMetadata().GetUid(), st)
			return controller.Result{}, err
		}
		return controller.Result{}, nil
	}
	cctx, done := w.start(ctx, key)
	defer done()
	err := a.takeSnapshot(cctx, c)
	if cctx.Err() != nil && ctx.Err() == nil {
		// Deleted or abandoned meanwhile: its update queued it again, and
		// that pass undoes the work.
		return controller.Result{}, nil
	}
	return controller.Result{}, err
}

func (w *snapshotWork) takeResult(uid string) *apiv1.VirtualMachineSnapshotContentStatus {
	w.mu.Lock()
	defer w.mu.Unlock()
	st := w.results[uid]
	delete(w.results, uid)
	return st
}

func (w *snapshotWork) keepResult(uid string, st *apiv1.VirtualMachineSnapshotContentStatus) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.results[uid] = st
}

// releaseContent undoes whatever this node did for a content that is
// deleted or abandoned: an online snapshot's overlays are committed, its
// data removed; then the node's finalizer goes, and an unfinished
// content is marked Failed.
func (a *Agent) releaseContent(ctx context.Context, c *apiv1.VirtualMachineSnapshotContent) error {
	uid := c.GetMetadata().GetUid()
	a.snaps.takeResult(uid)
	if _, err := a.layout.SnapshotDir(uid); err == nil {
		if err := a.undoSnapshot(ctx, c); err != nil {
			return err
		}
	}
	phase := c.GetStatus().GetPhase()
	final := phase == apiv1.SnapshotSucceeded || phase == apiv1.SnapshotFailed
	has := slices.Contains(c.GetMetadata().GetFinalizers(), apiv1.FinalizerSnapshotData)
	if final && !has {
		return nil
	}
	_, err := a.writeContent(ctx, c, func(next *apiv1.VirtualMachineSnapshotContent) {
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
		a.snaps.written.forget(uid) // the content is gone, or goes with the controller's delete
		a.log.Info("snapshot data released", "content", informer.Key(c), "uid", uid)
	}
	return err
}

// writeContent writes c's status as mutate changes it (mutate gets a
// copy with a non-nil status). A conflict is retried once on the
// informer's newer copy; otherwise the queue retries.
func (a *Agent) writeContent(ctx context.Context, c *apiv1.VirtualMachineSnapshotContent, mutate func(*apiv1.VirtualMachineSnapshotContent)) (*apiv1.VirtualMachineSnapshotContent, error) {
	for attempt := 0; ; attempt++ {
		next := proto.Clone(c).(*apiv1.VirtualMachineSnapshotContent)
		if next.Status == nil {
			next.Status = &apiv1.VirtualMachineSnapshotContentStatus{}
		}
		mutate(next)
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.opts.Timing.CallTimeout)
		out, err := a.snaps.api.UpdateStatus(cctx, &apiv1.UpdateSnapshotContentStatusRequest{Content: next})
		cancel()
		if err == nil {
			a.snaps.written.wrote(out.GetMetadata().GetUid(), out.GetMetadata().GetResourceVersion())
			return out, nil
		}
		if status.Code(err) != codes.Aborted || attempt > 0 {
			return nil, fmt.Errorf("writing the status of snapshot content %s: %w", informer.Key(c), err)
		}
		fresh, ok := a.snaps.inf.GetByKey(informer.Key(c))
		if !ok || fresh.GetMetadata().GetResourceVersion() <= c.GetMetadata().GetResourceVersion() || fresh.GetMetadata().GetUid() != c.GetMetadata().GetUid() {
			return nil, fmt.Errorf("writing the status of snapshot content %s: %w", informer.Key(c), err)
		}
		c = fresh
	}
}
