package ceph

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// Snapshots, restores and clones of volumes (docs/snapshots.md): a
// snapshot of a volume is the RBD snapshot SnapshotName(content uid) of
// its image, a restore clones it (clone format 2, O(1) whatever the
// size) beside the target's image and swaps the clone in by renames. The
// image a snapshot was taken of is found again by the VM's uid and the
// volume's name alone (FindSnapshot): no object records an image name a
// node could forge.

// cloneFormat2 makes a clone of format 2 whatever the cluster's
// require_min_compat_client (Pacific's "auto" picks format 1 below
// mimic): its parent snapshot needs no protection and can be removed
// while clones depend on it (Ceph keeps it in the trash namespace until
// the last one is gone), so a snapshot content is deleted at once and a
// restored volume keeps its data.
var cloneFormat2 = []string{"--rbd-default-clone-format", "2"}

// CloneV2 makes child a format-2 copy-on-write clone of image@snap (no
// protection needed): O(1) whatever the parent's size.
func (c *Conn) CloneV2(ctx context.Context, image, snap, child string) error {
	args := append(append([]string{"clone"}, cloneFormat2...), c.snapSpec(image, snap), c.spec(child))
	_, err := c.run(ctx, "rbd", args...)
	return err
}

// Entry is one line of `rbd ls -l`: an image, or one of its user
// snapshots (Snapshot set).
type Entry struct {
	Image    string `json:"image"`
	ID       string `json:"id"`
	Snapshot string `json:"snapshot"`
	Size     int64  `json:"size"`
	Parent   *struct {
		Image    string `json:"image"`
		Snapshot string `json:"snapshot"`
	} `json:"parent"`
}

// Entries lists the pool's images and their user snapshots in one call
// (each image is opened: O(images)).
func (c *Conn) Entries(ctx context.Context) ([]Entry, error) {
	out, err := c.run(ctx, "rbd", "ls", "-l", "--pool", c.Pool, "--format", "json")
	if err != nil {
		return nil, err
	}
	var entries []Entry
	if err := json.Unmarshal(out, &entries); err != nil {
		return nil, fmt.Errorf("rbd ls -l %s: %w", c.Pool, err)
	}
	return entries, nil
}

// VolumeSnapshot is the RBD snapshot of one volume.
type VolumeSnapshot struct {
	Image, Snap string
	// Size is the volume's size at the snapshot.
	Size int64
}

// Spec is pool/image@snap, for people.
func (s *VolumeSnapshot) Spec(pool string) string { return pool + "/" + s.Image + "@" + s.Snap }

// SnapshotVolume takes the RBD snapshot of volume vol of VM owner for
// snapshot content contentUID; one taken already (a repeated pass) is
// kept. ErrNotFound when the volume has no image (never provisioned).
// While a QEMU holds the image's exclusive lock, librbd asks it to
// take the snapshot, which makes it crash-consistent.
func (c *Conn) SnapshotVolume(ctx context.Context, owner, vol, contentUID string) (*VolumeSnapshot, error) {
	image, snap := VolumeImage(owner, vol), SnapshotName(contentUID)
	if err := c.SnapCreate(ctx, image, snap); err != nil && !errors.Is(err, ErrExists) {
		return nil, fmt.Errorf("rbd snapshot %s: %w", c.snapSpec(image, snap), err)
	}
	snaps, err := c.Snaps(ctx, image)
	if err != nil {
		return nil, err
	}
	for _, s := range snaps {
		if s.Name == snap {
			return &VolumeSnapshot{Image: image, Snap: snap, Size: s.Size}, nil
		}
	}
	return nil, fmt.Errorf("rbd snapshot %s: %w: made, then not listed", c.snapSpec(image, snap), ErrNotFound)
}

// FindSnapshot finds the RBD snapshot of snapshot content contentUID of
// volume vol of VM owner: on the volume's live image or, after a restore
// replaced that, on a retired one. ErrNotFound when there is none.
func (c *Conn) FindSnapshot(ctx context.Context, owner, vol, contentUID string) (*VolumeSnapshot, error) {
	entries, err := c.Entries(ctx)
	if err != nil {
		return nil, err
	}
	return findSnapshot(entries, owner, vol, contentUID)
}

// findSnapshot is FindSnapshot's choice among a pool's entries.
func findSnapshot(entries []Entry, owner, vol, contentUID string) (*VolumeSnapshot, error) {
	snap := SnapshotName(contentUID)
	for _, e := range entries {
		if e.Snapshot != snap {
			continue
		}
		n := ParseImage(e.Image)
		if n.Owner == owner && n.Volume == vol && (n.Kind == KindVolume || n.Kind == KindRetired) {
			return &VolumeSnapshot{Image: e.Image, Snap: snap, Size: e.Size}, nil
		}
	}
	return nil, fmt.Errorf("the RBD snapshot %s of volume %q of VM %s: %w", snap, vol, owner, ErrNotFound)
}

// StageRestore clones the RBD snapshot of content contentUID of volume
// vol of VM srcOwner into the staged image of restore restoreUID beside
// volume vol of VM dstOwner (StagedImage). A staged image made already
// (a repeated pass) is kept.
func (c *Conn) StageRestore(ctx context.Context, srcOwner, vol, contentUID, dstOwner, restoreUID string) error {
	staged := StagedImage(dstOwner, vol, restoreUID)
	if _, err := c.Info(ctx, staged); err == nil {
		return nil
	} else if !errors.Is(err, ErrNotFound) {
		return err
	}
	src, err := c.FindSnapshot(ctx, srcOwner, vol, contentUID)
	if err != nil {
		return err
	}
	if err := c.CloneV2(ctx, src.Image, src.Snap, staged); err != nil && !errors.Is(err, ErrExists) {
		return fmt.Errorf("cloning %s into %s: %w", src.Spec(c.Pool), c.spec(staged), err)
	}
	return nil
}

// SwapRestore puts restore restoreUID's staged image of volume vol of VM
// owner in place of the live one, which is retired (RetiredImage) and
// removed unless snapshots keep it. Each step is a rename that a repeated
// call finds done: a pass killed between the two renames is completed by
// the next.
func (c *Conn) SwapRestore(ctx context.Context, owner, vol, restoreUID string) error {
	live, staged := VolumeImage(owner, vol), StagedImage(owner, vol, restoreUID)
	_, err := c.Info(ctx, staged)
	switch {
	case err == nil:
		if err := c.Retire(ctx, owner, vol, restoreUID); err != nil {
			return err
		}
		if err := c.Rename(ctx, staged, live); err != nil {
			return fmt.Errorf("renaming %s to %s: %w", c.spec(staged), live, err)
		}
	case !errors.Is(err, ErrNotFound):
		return err
	default:
		// Swapped by an earlier pass; the live image must be there.
		if _, err := c.Info(ctx, live); err != nil {
			return fmt.Errorf("volume %q has neither a staged image nor a live one: %w", vol, err)
		}
	}
	c.RemoveRetired(ctx, owner, vol, restoreUID)
	return nil
}

// Retire renames the live image of volume vol of VM owner aside for
// restore restoreUID (RetiredImage); a volume with no live image is no
// error. The caller removes it (RemoveRetired) once nothing replaces it.
func (c *Conn) Retire(ctx context.Context, owner, vol, restoreUID string) error {
	live, retired := VolumeImage(owner, vol), RetiredImage(owner, vol, restoreUID)
	if err := c.Rename(ctx, live, retired); err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("renaming %s to %s: %w", c.spec(live), retired, err)
	}
	return nil
}

// RemoveRetired removes a retired image unless it has snapshots (other
// contents need them) or clones: then the collection of the storage
// controller removes it once they are gone. It reports whether the image
// is gone.
func (c *Conn) RemoveRetired(ctx context.Context, owner, vol, restoreUID string) bool {
	return c.Remove(ctx, RetiredImage(owner, vol, restoreUID)) == nil
}

// DropStaged removes restore restoreUID's staged image of volume vol of
// VM owner (the restore failed before its commit point).
func (c *Conn) DropStaged(ctx context.Context, owner, vol, restoreUID string) error {
	return c.Remove(ctx, StagedImage(owner, vol, restoreUID))
}
