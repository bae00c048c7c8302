package repo

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/virtplane/terraform-provider-virtplane/internal/backup/repo/rbddiff"
	"github.com/virtplane/terraform-provider-virtplane/internal/ceph"
)

// writeRBD backs up image@snap (incrementally from base's snapshot when
// base is given) through `rbd export-diff --whole-object`.
func writeRBD(ctx context.Context, t *testing.T, r *Repo, cn *ceph.Conn, image, snap string, base *Volume) (*Volume, WriteStats) {
	t.Helper()
	from := ""
	if base != nil {
		from = base.Snapshot
	}
	rc, err := cn.ExportDiff(ctx, image, from, snap)
	if err != nil {
		t.Fatal(err)
	}
	v, st, err := r.WriteRBDDiff(ctx, rc, base, nil)
	if cerr := rc.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	return v, st
}

// restoreRBD restores v into a new image through `rbd import-diff`.
func restoreRBD(ctx context.Context, r *Repo, cn *ceph.Conn, v *Volume, image string) error {
	if err := cn.Create(ctx, image, v.SizeBytes); err != nil {
		return err
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(r.RestoreRBDDiff(ctx, v, pw, nil)) }()
	err := cn.ImportDiff(ctx, image, pr)
	// rbd may have stopped reading: unblock the writer.
	pr.CloseWithError(errors.New("import-diff ended"))
	return err
}

// exportSum is the sha256 of `rbd export` of image[@snap].
func exportSum(ctx context.Context, t *testing.T, cn *ceph.Conn, image, snap string) [32]byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), "export.raw")
	if err := cn.Export(ctx, image, snap, out); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(out)
	return fileSum(t, out)
}

// An rbd volume backed up by export-diff, full then incremental from a
// snapshot, and restored by import-diff into new images that `rbd export`
// shows equal to the snapshots.
func TestRBDExportDiffRoundTrip(t *testing.T) {
	cn, _ := rbdConn(t)
	ctx := t.Context()
	image := randomName("vol-")
	const size = 64 << 20
	// 16 MiB of data at 8 MiB, the rest never written (no objects).
	src := filepath.Join(t.TempDir(), "src.raw")
	sparseVolume(t, src, size, []Range{{Offset: 8 << 20, Length: 16 << 20}}, 5)
	if err := cn.ImportRaw(ctx, src, image, image+"-tmp"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		for _, s := range []string{"s1", "s2"} {
			_ = cn.SnapRemove(ctx, image, s)
		}
		_ = cn.Remove(ctx, image)
	})
	if err := cn.SnapCreate(ctx, image, "s1"); err != nil {
		t.Fatal(err)
	}
	r := New(mustDir(t), Options{})

	began := time.Now()
	v1, st1 := writeRBD(ctx, t, r, cn, image, "s1", nil)
	t.Logf("full backup of a %d MiB rbd image (16 MiB written): %+v in %s", size>>20, st1, time.Since(began).Round(time.Millisecond))
	if v1.Snapshot != "s1" || v1.SizeBytes != size || st1.ChunksUploaded != 4 || st1.BytesRead != 16<<20 {
		t.Errorf("full: snapshot %q, size %d, %+v; want s1, 4 chunks of data, 16 MiB read", v1.Snapshot, v1.SizeBytes, st1)
	}

	// 3 MiB changed in the middle of an object, through import-diff
	// onto the live image (what a guest's writes do).
	var b bytes.Buffer
	w := rbddiff.NewWriter(&b)
	w.Size(size)
	data := make([]byte, 3<<20)
	rng := rand.New(rand.NewPCG(6, 6))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	w.Write(40<<20+12345, data)
	if err := w.End(); err != nil {
		t.Fatal(err)
	}
	if err := cn.ImportDiff(ctx, image, &b); err != nil {
		t.Fatal(err)
	}
	if err := cn.SnapCreate(ctx, image, "s2"); err != nil {
		t.Fatal(err)
	}
	began = time.Now()
	v2, st2 := writeRBD(ctx, t, r, cn, image, "s2", v1)
	t.Logf("incremental backup after 3 MiB changed: %+v in %s", st2, time.Since(began).Round(time.Millisecond))
	// --whole-object: the diff is the one 4 MiB object touched.
	if st2.BytesRead != 4<<20 || st2.ChunksUploaded != 1 || st2.BytesWritten > 4<<20 {
		t.Errorf("incremental: %+v; want the one 4 MiB object read and one chunk uploaded", st2)
	}

	for i, c := range []struct {
		v    *Volume
		snap string
	}{{v1, "s1"}, {v2, "s2"}} {
		restored := randomName("restored-")
		if err := restoreRBD(ctx, r, cn, c.v, restored); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cn.Remove(context.Background(), restored) })
		if exportSum(ctx, t, cn, restored, "") != exportSum(ctx, t, cn, image, c.snap) {
			t.Errorf("restore %d: rbd export differs from %s@%s", i+1, image, c.snap)
		}
	}

	// A corrupt chunk fails the import: rbd never gets the end record.
	var ci int
	for ci = range v2.Chunks {
		if v2.Chunks[ci] != "" {
			break
		}
	}
	key := chunkKey(v2.Chunks[ci])
	orig := readObject(t, r.Store(), key)
	if err := r.Store().Put(ctx, key, bytes.NewReader(orig[:len(orig)/3]), int64(len(orig)/3)); err != nil {
		t.Fatal(err)
	}
	bad := randomName("bad-")
	err := restoreRBD(ctx, r, cn, v2, bad)
	_ = cn.Remove(context.Background(), bad)
	if err == nil {
		t.Error("import-diff of a stream cut by a corrupt chunk succeeded")
	}
}
