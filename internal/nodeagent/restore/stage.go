package restore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/fsutil"
	"github.com/virtplane/terraform-provider-virtplane/internal/informer"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/nodedir"
)

// volume is one volume of a restore: the snapshot's copy, the
// staged copy beside the live volume, and the live volume.
type volume struct {
	name, source, staged, live string
	// content is the uid of the snapshot content source belongs to.
	content string
	// shared: the volume is on a shared filesystem class (its files are
	// under the class's path, laid out as layout), not in the node's VM
	// directory.
	shared bool
	layout nodedir.Layout
}

// volumes checks a restore's paths: the target's directory from its
// uid, each source a snapshot volume of this node (or of a shared
// filesystem class it uses), each volume a file name. Volumes restored
// from RBD snapshots are the server's storage controller's, not listed.
func (w *Restores) volumes(ctx context.Context, r *apiv1.VirtualMachineRestore) (volumesDir string, out []volume, err error) {
	vmDir, err := w.opts.Layout.VMDir(r.GetStatus().GetTargetUid())
	if err != nil {
		return "", nil, fmt.Errorf("status.target_uid: %w", err)
	}
	volumesDir = nodedir.VolumesDir(vmDir)
	uid := r.GetMetadata().GetUid()
	if err := checkUIDElement(uid); err != nil {
		return "", nil, fmt.Errorf("metadata.uid: %w", err)
	}
	if err := nodedir.CheckVMDirOwner(vmDir, r.GetMetadata().GetNamespace(), r.GetSpec().GetTarget()); err != nil {
		return "", nil, fmt.Errorf("status.target_uid: %w", err)
	}
	for i, vr := range r.GetStatus().GetRestores() {
		if vr.OnRBD() {
			continue
		}
		layout, dir, shared := w.opts.Layout, volumesDir, false
		if class := vr.GetStorageClass(); class != "" {
			lay, err := w.sharedLayout(ctx, class)
			if err != nil {
				return "", nil, fmt.Errorf("status.restores[%d].storage_class: %w", i, err)
			}
			target, err := lay.VMDir(r.GetStatus().GetTargetUid())
			if err != nil {
				return "", nil, fmt.Errorf("status.target_uid: %w", err)
			}
			if err := nodedir.CheckVMDirOwner(target, r.GetMetadata().GetNamespace(), r.GetSpec().GetTarget()); err != nil {
				return "", nil, fmt.Errorf("status.target_uid: %w", err)
			}
			layout, dir, shared = lay, nodedir.VolumesDir(target), true
		}
		content, _, err := layout.CheckSnapshotVolumePath(vr.GetSourcePath())
		if err != nil {
			return "", nil, fmt.Errorf("status.restores[%d].source_path: %w", i, err)
		}
		live, err := nodedir.FileIn(dir, vr.GetVolumeName()+".qcow2")
		if err != nil {
			return "", nil, fmt.Errorf("status.restores[%d].volume_name: %w", i, err)
		}
		out = append(out, volume{name: vr.GetVolumeName(), content: content, source: vr.GetSourcePath(), staged: live + stagedSuffix(uid), live: live,
			shared: shared, layout: layout})
	}
	return volumesDir, out, nil
}

// sharedLayout is the tree of shared filesystem class name, which this
// node must use and reach.
func (w *Restores) sharedLayout(ctx context.Context, name string) (nodedir.Layout, error) {
	if w.opts.Classes == nil {
		return nodedir.Layout{}, fmt.Errorf("storage class %s: this node has no storage classes", name)
	}
	class, err := w.opts.Classes.Lookup(ctx, name)
	if err != nil {
		return nodedir.Layout{}, err
	}
	if class.SharedPath() == "" {
		return nodedir.Layout{}, fmt.Errorf("storage class %s is not a shared filesystem", name)
	}
	return class.SharedLayout(), nil
}

// targetIsItsOwn checks that status.target_uid is the uid of the
// restore's target VM in the restore's namespace. The owner check of a
// VM directory (volumes) has nothing to compare while the directory has
// no vm.json yet, and staging would then write one claiming another VM's
// uid for this namespace: that VM could no longer start here.
func (w *Restores) targetIsItsOwn(ctx context.Context, r *apiv1.VirtualMachineRestore) error {
	ns, target, uid := r.GetMetadata().GetNamespace(), r.GetSpec().GetTarget(), r.GetStatus().GetTargetUid()
	if w.opts.VMs == nil {
		return fmt.Errorf("status.target_uid: this node cannot look restore targets up: %w", nodedir.ErrForeign)
	}
	cctx, cancel := context.WithTimeout(ctx, w.opts.CallTimeout)
	defer cancel()
	vm, err := w.opts.VMs.Get(cctx, &apiv1.GetVirtualMachineRequest{Key: &apiv1.ObjectKey{Namespace: ns, Name: target}})
	switch {
	case status.Code(err) == codes.NotFound:
		return fmt.Errorf("status.target_uid: restore target %s/%s does not exist: %w", ns, target, nodedir.ErrForeign)
	case err != nil:
		return fmt.Errorf("looking up restore target %s/%s: %w", ns, target, err)
	case vm.GetMetadata().GetUid() != uid:
		return fmt.Errorf("status.target_uid: %s is not VM %s/%s (uid %s): %w", uid, ns, target, vm.GetMetadata().GetUid(), nodedir.ErrForeign)
	}
	return nil
}

// errContentsUnknown: this node's snapshot contents are not listed yet,
// so a source path cannot be judged; the restore waits.
var errContentsUnknown = errors.New("this node's snapshot contents are not listed yet")

// sameNamespace checks that snapshot content contentUID of this node is
// in namespace ns.
func (w *Restores) sameNamespace(ns, contentUID string) error {
	if w.opts.Contents == nil {
		return fmt.Errorf("snapshot content %s: this node takes no snapshots: %w", contentUID, nodedir.ErrForeign)
	}
	owner, ok, synced := w.opts.Contents.Owner(contentUID)
	switch {
	case !synced:
		return errContentsUnknown
	case !ok:
		return fmt.Errorf("snapshot content %s is no snapshot content of this node: %w", contentUID, nodedir.ErrForeign)
	case owner != ns:
		return fmt.Errorf("snapshot content %s is in namespace %s, not %s: %w", contentUID, owner, ns, nodedir.ErrForeign)
	}
	return nil
}

func stagedSuffix(restoreUID string) string { return ".restore-" + restoreUID }

// checkUIDElement admits a restore uid into file names only as a UUID.
func checkUIDElement(uid string) error { return validation.CheckUID(uid) }

// stage copies each snapshot volume beside the target's volume, written
// aside and renamed when complete; a copy an earlier attempt left is made
// again.
func (w *Restores) stage(ctx context.Context, r *apiv1.VirtualMachineRestore) error {
	ref := &restoreRef{r: r}
	volumesDir, vols, err := w.volumes(ctx, r)
	if err != nil {
		return w.fail(ctx, ref, err)
	}
	// Only staging reads the snapshot's data, so only staging asks whose
	// it is (the swap renames copies already made, also after the
	// snapshot is gone).
	for i, v := range vols {
		err := w.sameNamespace(r.GetMetadata().GetNamespace(), v.content)
		if errors.Is(err, errContentsUnknown) {
			return err // again, with backoff, once the listing is in
		}
		if err != nil {
			return w.fail(ctx, ref, fmt.Errorf("status.restores[%d].source_path: %w", i, err))
		}
	}
	if err := w.targetIsItsOwn(ctx, r); err != nil {
		if errors.Is(err, nodedir.ErrForeign) {
			return w.fail(ctx, ref, err)
		}
		return err
	}
	target := r.GetSpec().GetTarget()
	if err := w.opts.Layout.EnsureVMDir(r.GetStatus().GetTargetUid(), r.GetMetadata().GetNamespace(), target); err != nil {
		return err
	}
	if err := nodedir.MkdirTraversable(volumesDir); err != nil {
		return err
	}
	for _, v := range vols {
		if v.shared {
			// The target's directory on the class, owned (vm.json) as the
			// disk room makes it.
			if err := v.layout.EnsureVMDir(r.GetStatus().GetTargetUid(), r.GetMetadata().GetNamespace(), target); err != nil {
				return err
			}
			if err := nodedir.MkdirTraversable(filepath.Dir(v.live)); err != nil {
				return err
			}
		}
	}
	for i, v := range vols {
		msg := fmt.Sprintf("copying volume %s (%d/%d)", v.name, i+1, len(vols))
		// Progress only: a failed write does not stop the copy.
		_ = w.update(ctx, ref, func(next *apiv1.VirtualMachineRestore) { next.Status.Message = msg })
		tmp := v.staged + ".tmp"
		_ = os.Remove(tmp)
		// Without -U: a snapshot's copy is no guest's disk, and the lock
		// keeps it so.
		if err := w.opts.Copier.Convert(ctx, v.source, tmp, false); err != nil {
			_ = os.Remove(tmp)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return w.fail(ctx, ref, fmt.Errorf("copying volume %s: %w", v.name, err))
		}
		if err := fsutil.Commit(tmp, v.staged); err != nil {
			return err
		}
	}
	err = w.update(ctx, ref, func(next *apiv1.VirtualMachineRestore) {
		next.Status.Staged, next.Status.Message = true, fmt.Sprintf("%d volumes staged", len(vols))
	})
	if err == nil {
		w.log.Info("restore staged", "restore", informer.Key(r), "volumes", len(vols))
	}
	return err
}

// fail reports a failure the restore controller fails the
// restore for.
func (w *Restores) fail(ctx context.Context, ref *restoreRef, cause error) error {
	w.log.Warn("restore failed on the node", "restore", informer.Key(ref.r), "err", cause)
	return w.update(ctx, ref, func(next *apiv1.VirtualMachineRestore) { next.Status.Error = cause.Error() })
}

// swap renames each staged copy over the target's live volume and
// removes the volumes the snapshot does not have, then sets swapped. A
// rename already done (a pass that stopped halfway) is skipped, so it
// can be repeated. It is refused while a domain of the target runs here.
func (w *Restores) swap(ctx context.Context, r *apiv1.VirtualMachineRestore) error {
	volumesDir, vols, err := w.volumes(ctx, r)
	if err != nil {
		// Past the commit point: the controller cannot go back, so this
		// waits for a person to look.
		return err
	}
	e, _, err := w.opts.Domains.RunningDomain(ctx, r.GetStatus().GetTargetUid())
	if err != nil {
		return err
	}
	if e != nil {
		return fmt.Errorf("restore %s: the target VM runs on this node; its volumes are swapped once it stopped", informer.Key(r))
	}
	keep := map[string]bool{}
	for _, v := range vols {
		if !v.shared {
			keep[filepath.Base(v.live)] = true
		}
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
	for _, v := range vols {
		if v.shared {
			if err := fsutil.SyncDir(filepath.Dir(v.live)); err != nil {
				return err
			}
		}
	}
	ref := &restoreRef{r: r}
	err = w.update(ctx, ref, func(next *apiv1.VirtualMachineRestore) {
		next.Status.Swapped, next.Status.Message = true, "volumes restored"
	})
	if err == nil {
		w.log.Info("restore swapped the volumes", "restore", informer.Key(r), "target_uid", r.GetStatus().GetTargetUid())
	}
	return err
}

// dropStaged removes this restore's staged copies (and copies being
// written) from the target's volumes, in its VM directory and beside its
// volumes on shared filesystem classes.
func (w *Restores) dropStaged(ctx context.Context, r *apiv1.VirtualMachineRestore) error {
	vmDir, err := w.opts.Layout.VMDir(r.GetStatus().GetTargetUid())
	if err != nil {
		return nil // no target known: nothing was staged
	}
	uid := r.GetMetadata().GetUid()
	if checkUIDElement(uid) != nil {
		return nil
	}
	dirs := []string{nodedir.VolumesDir(vmDir)}
	for _, vr := range r.GetStatus().GetRestores() {
		if class := vr.GetStorageClass(); class != "" && !vr.OnRBD() {
			lay, err := w.sharedLayout(ctx, class)
			if err != nil {
				return err // staged copies may be there: again later
			}
			if d, err := lay.VMDir(r.GetStatus().GetTargetUid()); err == nil && !slices.Contains(dirs, nodedir.VolumesDir(d)) {
				dirs = append(dirs, nodedir.VolumesDir(d))
			}
		}
	}
	suffix := ".qcow2" + stagedSuffix(uid)
	for _, dir := range dirs {
		entries, err := os.ReadDir(dir)
		if errors.Is(err, os.ErrNotExist) {
			continue
		} else if err != nil {
			return err
		}
		for _, e := range entries {
			if n := e.Name(); strings.HasSuffix(n, suffix) || strings.HasSuffix(n, suffix+".tmp") {
				if err := os.Remove(filepath.Join(dir, n)); err != nil && !errors.Is(err, os.ErrNotExist) {
					return err
				}
			}
		}
	}
	return nil
}

// release drops the node's finalizer.
func (w *Restores) release(ctx context.Context, r *apiv1.VirtualMachineRestore) error {
	if !slices.Contains(r.GetMetadata().GetFinalizers(), apiv1.FinalizerRestoreData) {
		return nil
	}
	err := w.update(ctx, &restoreRef{r: r}, func(next *apiv1.VirtualMachineRestore) {
		next.Metadata.Finalizers = slices.DeleteFunc(next.Metadata.Finalizers, func(f string) bool { return f == apiv1.FinalizerRestoreData })
	})
	if err == nil || status.Code(err) == codes.NotFound {
		w.work.Forget(r.GetMetadata().GetUid()) // nothing more to do for it
		return nil
	}
	return err
}

// restoreRef is the latest copy of a restore this pass wrote.
type restoreRef struct{ r *apiv1.VirtualMachineRestore }

// update writes the restore's status as mutate changes it
// (nodework.Worker.WriteStatus) and keeps the copy written in ref.
func (w *Restores) update(ctx context.Context, ref *restoreRef, mutate func(*apiv1.VirtualMachineRestore)) error {
	out, err := w.work.WriteStatus(ctx, ref.r, mutate)
	if err == nil {
		ref.r = out
	}
	return err
}
