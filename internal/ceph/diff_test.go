package ceph_test

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/virtplane/terraform-provider-virtplane/internal/backup/repo/rbddiff"
	"github.com/virtplane/terraform-provider-virtplane/internal/ceph"
)

// ExportDiff streams what ImportDiff takes: an image written by an
// import-diff stream exports (full, and from a snapshot) streams that,
// imported into new images, make images equal to the snapshots.
func TestExportDiffImportDiff(t *testing.T) {
	cn, _ := conn(t)
	ctx := t.Context()
	const size = 16 << 20
	stream := func(recs func(w *rbddiff.Writer)) *bytes.Buffer {
		var b bytes.Buffer
		w := rbddiff.NewWriter(&b)
		w.Size(size)
		recs(w)
		if err := w.End(); err != nil {
			t.Fatal(err)
		}
		return &b
	}
	if err := cn.Create(ctx, "diff-src", size); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, s := range []string{"a", "b"} {
			_ = cn.SnapRemove(t.Context(), "diff-src", s)
		}
		for _, img := range []string{"diff-src", "diff-full", "diff-inc", "diff-bad"} {
			_ = cn.Remove(t.Context(), img)
		}
	})
	if err := cn.ImportDiff(ctx, "diff-src", stream(func(w *rbddiff.Writer) {
		w.Write(1<<20, bytes.Repeat([]byte("abc"), 1<<20))
	})); err != nil {
		t.Fatal(err)
	}
	if err := cn.SnapCreate(ctx, "diff-src", "a"); err != nil {
		t.Fatal(err)
	}
	if err := cn.ImportDiff(ctx, "diff-src", stream(func(w *rbddiff.Writer) {
		w.Write(9<<20+7, []byte("changed"))
		w.Zero(1<<20, 4096)
	})); err != nil {
		t.Fatal(err)
	}
	if err := cn.SnapCreate(ctx, "diff-src", "b"); err != nil {
		t.Fatal(err)
	}

	export := func(from, snap string) []byte {
		rc, err := cn.ExportDiff(ctx, "diff-src", from, snap)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(rc)
		if cerr := rc.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	full, inc := export("", "a"), export("a", "b")
	// --whole-object: the incremental diff covers whole 4 MiB objects.
	d, err := rbddiff.NewReader(bytes.NewReader(inc))
	if err != nil {
		t.Fatal(err)
	}
	for {
		rec, err := d.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if (rec.Tag == rbddiff.TagWrite || rec.Tag == rbddiff.TagZero) && (rec.Offset%(4<<20) != 0 || rec.Length%(4<<20) != 0) {
			t.Errorf("record %q at %d of %d bytes is not whole objects", rec.Tag, rec.Offset, rec.Length)
		}
		if rec.Tag == rbddiff.TagFromSnap && rec.Name != "a" || rec.Tag == rbddiff.TagToSnap && rec.Name != "b" {
			t.Errorf("snapshot record %q %q", rec.Tag, rec.Name)
		}
	}
	for _, c := range []struct {
		image  string
		diffs  [][]byte
		equals string
	}{{"diff-full", [][]byte{full}, "a"}, {"diff-inc", [][]byte{full, inc}, "b"}} {
		if err := cn.Create(ctx, c.image, 1<<20); err != nil {
			t.Fatal(err)
		}
		for _, df := range c.diffs {
			if err := cn.ImportDiff(ctx, c.image, bytes.NewReader(df)); err != nil {
				t.Fatal(err)
			}
		}
		if exportSum(t, cn, c.image, "") != exportSum(t, cn, "diff-src", c.equals) {
			t.Errorf("%s differs from diff-src@%s", c.image, c.equals)
		}
	}

	// A stream cut short fails the import, naming the image.
	if err := cn.Create(ctx, "diff-bad", size); err != nil {
		t.Fatal(err)
	}
	err = cn.ImportDiff(ctx, "diff-bad", bytes.NewReader(full[:len(full)-100]))
	if err == nil || !strings.Contains(err.Error(), "diff-bad") {
		t.Errorf("import of a cut stream: %v, want an error naming the image", err)
	}
	// An export left unread is stopped by Close, which says so.
	rc, err := cn.ExportDiff(ctx, "diff-src", "", "b")
	if err != nil {
		t.Fatal(err)
	}
	if err := rc.Close(); err == nil || !strings.Contains(err.Error(), "before its end") {
		t.Errorf("Close of an unread export: %v", err)
	}
	// A snapshot that is not there: the error says so.
	rc, err = cn.ExportDiff(ctx, "diff-src", "", "nope")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, rc)
	if err := rc.Close(); !errors.Is(err, ceph.ErrNotFound) {
		t.Errorf("export of a missing snapshot: %v, want ErrNotFound", err)
	}
}

func exportSum(t *testing.T, cn *ceph.Conn, image, snap string) [32]byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), "x.raw")
	if err := cn.Export(t.Context(), image, snap, out); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}
