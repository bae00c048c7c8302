package ceph_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/virtplane/terraform-provider-virtplane/internal/ceph"
	cephtest "github.com/virtplane/terraform-provider-virtplane/internal/testutil/ceph"
)

// fill writes byte b over the first 4 KiB of image, as client.admin with
// QEMU's rbd driver (a guest's write).
func fill(t *testing.T, c *cephtest.Cluster, image string, b byte) {
	t.Helper()
	target := "rbd:" + c.Pool() + "/" + image + ":conf=" + c.Conf()
	if out, err := c.Exec(t.Context(), "qemu-io", "-f", "raw", "-c", fmt.Sprintf("write -P %#x 0 4k", b), target); err != nil {
		t.Fatalf("qemu-io write to %s: %v %s", image, err, out)
	}
}

// firstByte reads the first byte of image (rbd export).
func firstByte(t *testing.T, c *cephtest.Cluster, image string) byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), "export")
	if _, err := c.Admin(t.Context(), "rbd", "export", "--no-progress", c.Pool()+"/"+image, out); err != nil {
		t.Fatalf("rbd export %s: %v", image, err)
	}
	b, err := os.ReadFile(out)
	if err != nil || len(b) == 0 {
		t.Fatalf("reading the export of %s: %v", image, err)
	}
	return b[0]
}

func images(t *testing.T, cn *ceph.Conn) []string {
	t.Helper()
	names, err := cn.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// TestSnapshotRestoreClone is a volume's life through snapshots on a real
// cluster, as the restricted user the server and the nodes use: two
// snapshots, a restore in place (the live image retired, keeping both
// snapshots), a restore of the second snapshot, now on the retired
// image, into another VM (a clone), passes repeated as a killed process
// would, and the retired image removed only once no snapshot and no
// clone needs it.
func TestSnapshotRestoreClone(t *testing.T) {
	cn, c := conn(t)
	ctx := t.Context()
	const (
		a, b   = "0a0a0a0a-0000-4000-8000-00000000000a", "0b0b0b0b-0000-4000-8000-00000000000b"
		c1, c2 = "c1c1c1c1-0000-4000-8000-0000000000c1", "c2c2c2c2-0000-4000-8000-0000000000c2"
		r1, r2 = "e1e1e1e1-0000-4000-8000-0000000000e1", "e2e2e2e2-0000-4000-8000-0000000000e2"
	)
	live, liveB := ceph.VolumeImage(a, "root"), ceph.VolumeImage(b, "root")
	retired := ceph.RetiredImage(a, "root", r1)
	t.Cleanup(func() {
		ctx := context.Background()
		for _, img := range []string{liveB, live, ceph.StagedImage(b, "root", r2), ceph.StagedImage(a, "root", r1), retired} {
			for _, s := range []string{ceph.SnapshotName(c1), ceph.SnapshotName(c2)} {
				_ = cn.SnapRemove(ctx, img, s)
			}
			_ = cn.Remove(ctx, img)
		}
	})
	if _, err := cn.SnapshotVolume(ctx, a, "root", c1); !errors.Is(err, ceph.ErrNotFound) {
		t.Fatalf("snapshot of a volume never made: %v, want ErrNotFound", err)
	}
	if err := cn.Create(ctx, live, 8<<20); err != nil {
		t.Fatal(err)
	}
	fill(t, c, live, 0x11)
	s1, err := cn.SnapshotVolume(ctx, a, "root", c1)
	if err != nil || s1.Image != live || s1.Size != 8<<20 {
		t.Fatalf("first snapshot: %+v %v", s1, err)
	}
	if again, err := cn.SnapshotVolume(ctx, a, "root", c1); err != nil || *again != *s1 {
		t.Fatalf("repeated snapshot: %+v %v", again, err)
	}
	fill(t, c, live, 0x22)
	if _, err := cn.SnapshotVolume(ctx, a, "root", c2); err != nil {
		t.Fatal(err)
	}
	fill(t, c, live, 0x33)

	// Restore c1 in place.
	began := time.Now()
	if err := cn.StageRestore(ctx, a, "root", c1, a, r1); err != nil {
		t.Fatal(err)
	}
	staged := time.Since(began)
	if err := cn.StageRestore(ctx, a, "root", c1, a, r1); err != nil {
		t.Fatalf("staging again: %v", err)
	}
	if got := firstByte(t, c, live); got != 0x33 {
		t.Fatalf("live volume before the swap reads %#x, want 0x33 (staging must not touch it)", got)
	}
	began = time.Now()
	if err := cn.Retire(ctx, a, "root", r1); err != nil { // a pass killed after the first rename
		t.Fatal(err)
	}
	if err := cn.SwapRestore(ctx, a, "root", r1); err != nil {
		t.Fatal(err)
	}
	swapped := time.Since(began)
	if err := cn.SwapRestore(ctx, a, "root", r1); err != nil {
		t.Fatalf("swapping again: %v", err)
	}
	t.Logf("restore of a snapshot: staged (clone) in %v, swapped (renames) in %v", staged.Round(time.Millisecond), swapped.Round(time.Millisecond))
	if got := firstByte(t, c, live); got != 0x11 {
		t.Fatalf("restored volume reads %#x, want 0x11 (snapshot c1)", got)
	}
	names := images(t, cn)
	if !slices.Contains(names, retired) || slices.Contains(names, ceph.StagedImage(a, "root", r1)) {
		t.Fatalf("images after the swap: %v: want the retired image kept (it holds both snapshots) and no staged one", names)
	}

	// Snapshot c2 is on the retired image now: a clone into VM b.
	s2, err := cn.FindSnapshot(ctx, a, "root", c2)
	if err != nil || s2.Image != retired {
		t.Fatalf("finding c2: %+v %v, want it on %s", s2, err, retired)
	}
	if _, err := cn.FindSnapshot(ctx, b, "root", c2); !errors.Is(err, ceph.ErrNotFound) {
		t.Fatalf("c2 found as a snapshot of another VM: %v", err)
	}
	if err := cn.StageRestore(ctx, a, "root", c2, b, r2); err != nil {
		t.Fatal(err)
	}
	if err := cn.SwapRestore(ctx, b, "root", r2); err != nil {
		t.Fatal(err)
	}
	if got := firstByte(t, c, liveB); got != 0x22 {
		t.Fatalf("clone reads %#x, want 0x22 (snapshot c2)", got)
	}
	fill(t, c, liveB, 0x44)
	if got := firstByte(t, c, live); got != 0x11 {
		t.Fatalf("the clone's write reached the restored volume: %#x", got)
	}

	// The contents go: their snapshots are trashed while clones need
	// them, and the retired image goes with the last clone.
	for _, s := range []string{ceph.SnapshotName(c1), ceph.SnapshotName(c2)} {
		if err := cn.SnapRemove(ctx, retired, s); err != nil {
			t.Fatalf("removing %s, which a clone needs: %v", s, err)
		}
	}
	if cn.RemoveRetired(ctx, a, "root", r1) {
		t.Fatal("the retired image was removed while clones read from it")
	}
	if got := firstByte(t, c, liveB); got != 0x44 {
		t.Fatalf("the clone reads %#x after its parent snapshot was removed", got)
	}
	for _, img := range []string{live, liveB} {
		if err := cn.Remove(ctx, img); err != nil {
			t.Fatal(err)
		}
	}
	if !cn.RemoveRetired(ctx, a, "root", r1) {
		t.Fatalf("the retired image stayed after its clones were removed: %v", images(t, cn))
	}
	if names := images(t, cn); slices.ContainsFunc(names, func(n string) bool { return ceph.OwnerOf(n) == a || ceph.OwnerOf(n) == b }) {
		t.Fatalf("images left: %v", names)
	}
}

// TestSnapshotOf1GiB measures a snapshot and a restore of a volume with
// 1 GiB written: both O(1).
func TestSnapshotOf1GiB(t *testing.T) {
	cn, c := conn(t)
	ctx := t.Context()
	const a, c1, r1 = "0a0a0a0a-0000-4000-8000-0000000001aa", "c1c1c1c1-0000-4000-8000-0000000001c1", "e1e1e1e1-0000-4000-8000-0000000001e1"
	live := ceph.VolumeImage(a, "data")
	t.Cleanup(func() {
		ctx := context.Background()
		_ = cn.SnapRemove(ctx, ceph.RetiredImage(a, "data", r1), ceph.SnapshotName(c1))
		for _, img := range []string{live, ceph.RetiredImage(a, "data", r1), ceph.StagedImage(a, "data", r1)} {
			_ = cn.Remove(ctx, img)
		}
	})
	if err := cn.Create(ctx, live, 1<<30); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Admin(ctx, "rbd", "bench", "--io-type", "write", "--io-size", "4M", "--io-total", "1G", "--io-pattern", "seq", c.Pool()+"/"+live); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	if _, err := cn.SnapshotVolume(ctx, a, "data", c1); err != nil {
		t.Fatal(err)
	}
	snap := time.Since(began)
	began = time.Now()
	if err := cn.StageRestore(ctx, a, "data", c1, a, r1); err != nil {
		t.Fatal(err)
	}
	if err := cn.SwapRestore(ctx, a, "data", r1); err != nil {
		t.Fatal(err)
	}
	restore := time.Since(began)
	t.Logf("1 GiB written: snapshot %v, restore (find, clone, two renames) %v", snap.Round(time.Millisecond), restore.Round(time.Millisecond))
	if snap > 10*time.Second || restore > 10*time.Second {
		t.Errorf("snapshot %v, restore %v: want O(1), seconds at most", snap, restore)
	}
	if info, err := cn.Info(ctx, live); err != nil || info.Parent == nil || info.Parent.Image != ceph.RetiredImage(a, "data", r1) {
		t.Fatalf("restored image: %+v %v: want a clone of the retired image's snapshot", info, err)
	}
}
