package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/client/remotestore"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller"
	"github.com/virtplane/terraform-provider-virtplane/internal/fsutil"
	"github.com/virtplane/terraform-provider-virtplane/internal/informer"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/nodedir"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// The node's part of restores (docs/snapshots.md, "Restore flow" steps 2
// and 3): in Staging it copies each snapshot volume beside the target's
// volumes (<volume>.qcow2.restore-<restore uid>); in Committing it
// renames the copies over the live volumes and deletes the volumes the
// snapshot does not have. Before the swap a failed or deleted restore
// has its copies removed; the node's finalizer goes last.

// RestoreAPI is the restore service as the node uses it: it watches the
// restores of its node and writes their status.
type RestoreAPI interface {
	remotestore.RestoreWatcher
	UpdateStatus(ctx context.Context, in *apiv1.UpdateRestoreStatusRequest, opts ...grpc.CallOption) (*apiv1.VirtualMachineRestore, error)
}

type restoreWork struct {
	api   RestoreAPI
	inf   *informer.Informer[*apiv1.VirtualMachineRestore]
	queue controller.Queue

	underWay // the staging under way, by key
	// written keeps passes over a cached copy older than the node's own
	// last write from staging or swapping again.
	written ownWrites
}

func (a *Agent) newRestoreWork() {
	api := a.opts.API.Restores
	if api == nil {
		return
	}
	w := &restoreWork{
		api: api,
		inf: informer.New[*apiv1.VirtualMachineRestore](remotestore.NewRestores(api),
			store.ListOptions{LabelSelector: apiv1.LabelNodeName + "=" + a.opts.NodeName}, a.log.With("informer", "restore")),
		queue: controller.NewQueue("restore"),
	}
	enqueue := func(r *apiv1.VirtualMachineRestore) {
		key := informer.Key(r)
		if restoreStops(r) {
			w.cancel(key)
		}
		w.queue.Add(key)
	}
	w.inf.AddHandler(informer.Handler[*apiv1.VirtualMachineRestore]{
		OnAdd:    enqueue,
		OnUpdate: func(_, r *apiv1.VirtualMachineRestore) { enqueue(r) },
		OnDelete: func(r *apiv1.VirtualMachineRestore) { w.cancel(informer.Key(r)); w.queue.Add(informer.Key(r)) },
	})
	a.restores = w
}

// restoreStops: staging must stop (the copies are dropped next).
func restoreStops(r *apiv1.VirtualMachineRestore) bool {
	return r.GetMetadata().GetDeletionTimestamp() != nil || r.GetStatus().GetPhase() == apiv1.RestoreFailed
}

// runRestores runs the informer and, once it has synced, the worker in
// the background; the returned func stops them.
func (a *Agent) runRestores(ctx context.Context) (stop func()) {
	w := a.restores
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
		controller.Run(ctx, "restore", w.queue, 1, controller.ReconcileFunc(a.reconcileRestore), a.log)
	})
	return func() {
		cancel()
		w.queue.ShutDown()
		wg.Wait()
	}
}

// reconcileRestore does the node's step of one restore of this node.
func (a *Agent) reconcileRestore(ctx context.Context, key string) (controller.Result, error) {
	r, ok := a.restores.inf.GetByKey(key)
	if !ok {
		return controller.Result{}, nil
	}
	if a.restores.written.stale(r.GetMetadata().GetUid(), r.GetMetadata().GetResourceVersion()) {
		return controller.Result{}, nil // the watch brings the node's own write, and queues it again
	}
	st := r.GetStatus()
	deleting := r.GetMetadata().GetDeletionTimestamp() != nil
	switch {
	case st.GetPhase() == apiv1.RestoreFailed || deleting && !st.GetSwapped():
		if err := a.dropStaged(r); err != nil {
			return controller.Result{}, err
		}
		return controller.Result{}, a.releaseRestore(ctx, r)
	case st.GetPhase() == apiv1.RestoreSucceeded || deleting:
		return controller.Result{}, a.releaseRestore(ctx, r)
	case st.GetPhase() == apiv1.RestoreStaging && !st.GetStaged() && st.GetError() == "":
		cctx, done := a.restores.start(ctx, key)
		defer done()
		err := a.stage(cctx, r)
		if cctx.Err() != nil && ctx.Err() == nil {
			return controller.Result{}, nil // failed or deleted meanwhile: queued again
		}
		return controller.Result{}, err
	case st.GetPhase() == apiv1.RestoreCommitting && !st.GetSwapped():
		return controller.Result{}, a.swap(ctx, r)
	}
	return controller.Result{}, nil
}

// restoreVolume is one volume of a restore: the snapshot's copy, the
// staged copy beside the live volume, and the live volume.
type restoreVolume struct {
	name, source, staged, live string
}

// restoreVolumes checks a restore's paths: the target's directory from
// its uid, each source a snapshot volume of this node, each volume a
// file name.
func (a *Agent) restoreVolumes(r *apiv1.VirtualMachineRestore) (volumesDir string, out []restoreVolume, err error) {
	vmDir, err := a.layout.VMDir(r.GetStatus().GetTargetUid())
	if err != nil {
		return "", nil, fmt.Errorf("status.target_uid: %w", err)
	}
	volumesDir = nodedir.VolumesDir(vmDir)
	uid := r.GetMetadata().GetUid()
	if err := checkUIDElement(uid); err != nil {
		return "", nil, fmt.Errorf("metadata.uid: %w", err)
	}
	for i, vr := range r.GetStatus().GetRestores() {
		if _, _, err := a.layout.CheckSnapshotVolumePath(vr.GetSourcePath()); err != nil {
			return "", nil, fmt.Errorf("status.restores[%d].source_path: %w", i, err)
		}
		live, err := nodedir.FileIn(volumesDir, vr.GetVolumeName()+".qcow2")
		if err != nil {
			return "", nil, fmt.Errorf("status.restores[%d].volume_name: %w", i, err)
		}
		out = append(out, restoreVolume{name: vr.GetVolumeName(), source: vr.GetSourcePath(), staged: live + stagedSuffix(uid), live: live})
	}
	return volumesDir, out, nil
}

func stagedSuffix(restoreUID string) string { return ".restore-" + restoreUID }

// checkUIDElement admits a restore uid into file names only as a UUID.
func checkUIDElement(uid string) error { return validation.CheckUID(uid) }

// stage copies each snapshot volume beside the target's volume, written
// aside and renamed when complete; a copy an earlier attempt left is made
// again.
func (a *Agent) stage(ctx context.Context, r *apiv1.VirtualMachineRestore) error {
	ref := &restoreRef{r: r}
	volumesDir, vols, err := a.restoreVolumes(r)
	if err != nil {
		return a.restoreError(ctx, ref, err)
	}
	target := r.GetSpec().GetTarget()
	if err := a.layout.EnsureVMDir(r.GetStatus().GetTargetUid(), r.GetMetadata().GetNamespace(), target); err != nil {
		return err
	}
	if err := nodedir.MkdirTraversable(volumesDir); err != nil {
		return err
	}
	for i, v := range vols {
		msg := fmt.Sprintf("copying volume %s (%d/%d)", v.name, i+1, len(vols))
		// Progress only: a failed write does not stop the copy.
		_ = a.updateRestore(ctx, ref, func(next *apiv1.VirtualMachineRestore) { next.Status.Message = msg })
		tmp := v.staged + ".tmp"
		_ = os.Remove(tmp)
		// Without -U: a snapshot's copy is no guest's disk, and the lock
		// keeps it so.
		if err := a.copier.Convert(ctx, v.source, tmp, false); err != nil {
			_ = os.Remove(tmp)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return a.restoreError(ctx, ref, fmt.Errorf("copying volume %s: %w", v.name, err))
		}
		if err := fsutil.Commit(tmp, v.staged); err != nil {
			return err
		}
	}
	err = a.updateRestore(ctx, ref, func(next *apiv1.VirtualMachineRestore) {
		next.Status.Staged, next.Status.Message = true, fmt.Sprintf("%d volumes staged", len(vols))
	})
	if err == nil {
		a.log.Info("restore staged", "restore", informer.Key(r), "volumes", len(vols))
	}
	return err
}

// restoreError reports a failure the restore controller fails the
// restore for.
func (a *Agent) restoreError(ctx context.Context, ref *restoreRef, cause error) error {
	a.log.Warn("restore failed on the node", "restore", informer.Key(ref.r), "err", cause)
	return a.updateRestore(ctx, ref, func(next *apiv1.VirtualMachineRestore) { next.Status.Error = cause.Error() })
}

// swap renames each staged copy over the target's live volume and
// removes the volumes the snapshot does not have, then sets swapped. A
// rename already done (a pass that stopped halfway) is skipped, so it
// can be repeated. It is refused while a domain of the target runs here.
func (a *Agent) swap(ctx context.Context, r *apiv1.VirtualMachineRestore) error {
	volumesDir, vols, err := a.restoreVolumes(r)
	if err != nil {
		// Past the commit point: the controller cannot go back, so this
		// waits for a person to look.
		return err
	}
	e, _, err := a.runningDomain(ctx, r.GetStatus().GetTargetUid())
	if err != nil {
		return err
	}
	if e != nil {
		return fmt.Errorf("restore %s: the target VM runs on this node; its volumes are swapped once it stopped", informer.Key(r))
	}
	keep := map[string]bool{}
	for _, v := range vols {
		keep[filepath.Base(v.live)] = true
		if _, err := os.Stat(v.staged); err == nil {
			if err := fsutil.Commit(v.staged, v.live); err != nil {
				return err
			}
		} else if !errors.Is(err, os.ErrNotExist) {
			return err
		} else if _, err := os.Stat(v.live); err != nil {
			return fmt.Errorf("restore %s: volume %s has neither a staged copy nor a live file: %w", informer.Key(r), v.name, err)
		}
	}
	entries, err := os.ReadDir(volumesDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	suffix := stagedSuffix(r.GetMetadata().GetUid())
	for _, e := range entries {
		n := e.Name()
		if !e.Type().IsRegular() || keep[n] {
			continue
		}
		if strings.HasSuffix(n, ".qcow2") || strings.Contains(n, ".qcow2"+suffix) {
			if err := os.Remove(filepath.Join(volumesDir, n)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
		}
	}
	if err := fsutil.SyncDir(volumesDir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	ref := &restoreRef{r: r}
	err = a.updateRestore(ctx, ref, func(next *apiv1.VirtualMachineRestore) {
		next.Status.Swapped, next.Status.Message = true, "volumes restored"
	})
	if err == nil {
		a.log.Info("restore swapped the volumes", "restore", informer.Key(r), "target_uid", r.GetStatus().GetTargetUid())
	}
	return err
}

// dropStaged removes this restore's staged copies (and copies being
// written) from the target's volumes.
func (a *Agent) dropStaged(r *apiv1.VirtualMachineRestore) error {
	vmDir, err := a.layout.VMDir(r.GetStatus().GetTargetUid())
	if err != nil {
		return nil // no target known: nothing was staged
	}
	uid := r.GetMetadata().GetUid()
	if checkUIDElement(uid) != nil {
		return nil
	}
	volumesDir := nodedir.VolumesDir(vmDir)
	entries, err := os.ReadDir(volumesDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	suffix := ".qcow2" + stagedSuffix(uid)
	for _, e := range entries {
		if n := e.Name(); strings.HasSuffix(n, suffix) || strings.HasSuffix(n, suffix+".tmp") {
			if err := os.Remove(filepath.Join(volumesDir, n)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
		}
	}
	return nil
}

// releaseRestore drops the node's finalizer.
func (a *Agent) releaseRestore(ctx context.Context, r *apiv1.VirtualMachineRestore) error {
	if !slices.Contains(r.GetMetadata().GetFinalizers(), apiv1.FinalizerRestoreData) {
		return nil
	}
	err := a.updateRestore(ctx, &restoreRef{r: r}, func(next *apiv1.VirtualMachineRestore) {
		next.Metadata.Finalizers = slices.DeleteFunc(next.Metadata.Finalizers, func(f string) bool { return f == apiv1.FinalizerRestoreData })
	})
	if err == nil || status.Code(err) == codes.NotFound {
		a.restores.written.forget(r.GetMetadata().GetUid()) // nothing more to do for it
		return nil
	}
	return err
}

// restoreRef is the latest copy of a restore this pass wrote.
type restoreRef struct{ r *apiv1.VirtualMachineRestore }

// updateRestore writes the restore's status as mutate changes it (on a
// copy with a non-nil status). A conflict is retried once on the
// informer's newer copy; otherwise the queue retries.
func (a *Agent) updateRestore(ctx context.Context, ref *restoreRef, mutate func(*apiv1.VirtualMachineRestore)) error {
	r := ref.r
	for attempt := 0; ; attempt++ {
		next := proto.Clone(r).(*apiv1.VirtualMachineRestore)
		if next.Status == nil {
			next.Status = &apiv1.VirtualMachineRestoreStatus{}
		}
		mutate(next)
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.opts.Timing.CallTimeout)
		out, err := a.restores.api.UpdateStatus(cctx, &apiv1.UpdateRestoreStatusRequest{Restore: next})
		cancel()
		if err == nil {
			a.restores.written.wrote(out.GetMetadata().GetUid(), out.GetMetadata().GetResourceVersion())
			ref.r = out
			return nil
		}
		if status.Code(err) != codes.Aborted || attempt > 0 {
			return fmt.Errorf("writing the status of restore %s: %w", informer.Key(r), err)
		}
		fresh, ok := a.restores.inf.GetByKey(informer.Key(r))
		if !ok || fresh.GetMetadata().GetResourceVersion() <= r.GetMetadata().GetResourceVersion() || fresh.GetMetadata().GetUid() != r.GetMetadata().GetUid() {
			return fmt.Errorf("writing the status of restore %s: %w", informer.Key(r), err)
		}
		r = fresh
	}
}
