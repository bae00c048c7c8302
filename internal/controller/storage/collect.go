package storage

import (
	"context"
	"errors"
	"fmt"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/ceph"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller"
)

// The collection of an rbd class's pool for snapshots and restores: what
// they made there and no object needs any more (docs/snapshots.md,
// "Deleting"). Names say whose each image and snapshot is (package
// ceph), so the pool itself is the record; the caches say what still
// exists. Something unneeded is removed only when a pass a grace later
// still finds it so: an object made a moment ago may not be cached yet.
//
//   - snap-<content uid> on a VM's image: removed once the content is
//     gone. Clones restored from it keep its data (a format-2 clone's
//     parent snapshot waits in Ceph's trash until the last clone goes).
//   - a retired image (replaced by a restore): removed once no snapshot
//     is left on it (and, Ceph sees to that, no clone reads from it).
//   - a staged image: removed unless its restore is staging or committing
//     into its VM.
//   - any image of a VM (volumes, NVRAM store; ceph.ParseImage names its
//     owner) the VM cache does not have: removed once no snapshot is left
//     on it (snapshot contents keep their VM's data; deleting them
//     removes their snapshots).
//
// An image that still has clones, snapshots or a watcher (a QEMU) is
// refused by Ceph (busy) and looked at again by the next pass.

// maxRounds bounds the removal rounds of one pass (a chain of clones
// goes one generation a round).
const maxRounds = 8

// unneeded is one thing a pass found no object needs.
type unneeded struct {
	key         string // class/image[@snap]
	image, snap string
}

// collect looks class's pool over and removes what is unneeded since a
// grace.
func (v *Volumes) collect(ctx context.Context, class string) (controller.Result, error) {
	_, conn, err := v.rbdClass(class)
	if err != nil {
		v.forget(class, nil)
		return controller.Result{}, nil // gone or not rbd: nothing to look at
	}
	entries, err := conn.Entries(ctx)
	if err != nil {
		return controller.Result{}, fmt.Errorf("storage class %s: listing the pool: %w", class, err)
	}
	found := v.unneeded(class, entries)
	now := v.c.opts.Clock()
	due, wait := v.due(class, found, now)
	var errs []error
	// Rounds: removing a clone lets Ceph drop the trashed snapshot it
	// read from, which frees its parent image for the next round.
	for round := 0; len(due) > 0 && round < maxRounds; round++ {
		var busy []unneeded
		removed := 0
		for _, u := range due {
			var err error
			if u.snap != "" {
				err = conn.SnapRemove(ctx, u.image, u.snap)
			} else {
				err = conn.Remove(ctx, u.image)
			}
			switch {
			case errors.Is(err, ceph.ErrBusy):
				// Clones, snapshots or a watcher still need it.
				busy = append(busy, u)
			case err != nil:
				errs = append(errs, fmt.Errorf("removing %s/%s: %w", conn.Pool, u.key[len(class)+1:], err))
			default:
				removed++
				v.log.Info("removed what no object needs", "class", class, "what", u.key[len(class)+1:])
			}
		}
		if removed == 0 {
			break
		}
		due = busy
	}
	next := v.opts.CollectInterval
	if wait > 0 && wait < next {
		next = wait
	}
	return controller.Result{RequeueAfter: next}, errors.Join(errs...)
}

// unneeded lists what of entries (a pool's, by class) no object needs
// now.
func (v *Volumes) unneeded(class string, entries []ceph.Entry) []unneeded {
	contents := map[string]bool{}
	for _, ct := range v.contents.List() {
		contents[ct.GetMetadata().GetUid()] = true
	}
	restores := map[string]*apiv1.VirtualMachineRestore{}
	for _, r := range v.restores.List() {
		restores[r.GetMetadata().GetUid()] = r
	}
	live := map[string]bool{}
	for _, vm := range v.vms.List() {
		live[vm.GetMetadata().GetUid()] = true
	}
	snapped := map[string]bool{} // images with snapshots left
	var out []unneeded
	for _, e := range entries {
		if e.Snapshot == "" || ceph.ParseImage(e.Image).Kind == "" {
			continue
		}
		if uid := ceph.SnapshotContentUID(e.Snapshot); uid != "" && !contents[uid] {
			out = append(out, unneeded{key: class + "/" + e.Image + "@" + e.Snapshot, image: e.Image, snap: e.Snapshot})
			continue
		}
		snapped[e.Image] = true
	}
	for _, e := range entries {
		n := ceph.ParseImage(e.Image)
		if e.Snapshot != "" || snapped[e.Image] || n.Kind == "" {
			continue
		}
		if !live[n.Owner] {
			// Its VM was deleted.
			out = append(out, unneeded{key: class + "/" + e.Image, image: e.Image})
			continue
		}
		switch n.Kind {
		case ceph.KindRetired:
			out = append(out, unneeded{key: class + "/" + e.Image, image: e.Image})
		case ceph.KindStaged:
			r := restores[n.Restore]
			phase := r.GetStatus().GetPhase()
			if r == nil || r.GetStatus().GetTargetUid() != n.Owner || phase != apiv1.RestoreStaging && phase != apiv1.RestoreCommitting {
				out = append(out, unneeded{key: class + "/" + e.Image, image: e.Image})
			}
		}
	}
	return out
}

// due records found as class's unneeded things and returns those found
// unneeded for a grace already, and how long until the next is due.
func (v *Volumes) due(class string, found []unneeded, now time.Time) ([]unneeded, time.Duration) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.forgetLocked(class, found)
	var due []unneeded
	var wait time.Duration
	for _, u := range found {
		since, ok := v.orphans[u.key]
		if !ok {
			v.orphans[u.key] = now
			since = now
		}
		if left := since.Add(v.opts.Grace).Sub(now); left > 0 {
			if wait == 0 || left < wait {
				wait = left
			}
			continue
		}
		due = append(due, u)
	}
	return due, wait
}

// forget drops class's recorded orphans but those in keep.
func (v *Volumes) forget(class string, keep []unneeded) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.forgetLocked(class, keep)
}

func (v *Volumes) forgetLocked(class string, keep []unneeded) {
	kept := map[string]bool{}
	for _, u := range keep {
		kept[u.key] = true
	}
	prefix := class + "/"
	for k := range v.orphans {
		if len(k) > len(prefix) && k[:len(prefix)] == prefix && !kept[k] {
			delete(v.orphans, k)
		}
	}
}
