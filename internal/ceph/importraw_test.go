package ceph_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/virtplane/terraform-provider-virtplane/internal/ceph"
)

// An EFI variable store imported from its template: an image of the
// file's size holding its bytes; a second import (another node) keeps
// the first one's content, and no temporary image is left.
func TestImportRaw(t *testing.T) {
	cn, c := conn(t)
	ctx := t.Context()
	dir := t.TempDir()
	first, second := filepath.Join(dir, "vars1.fd"), filepath.Join(dir, "vars2.fd")
	content := bytes.Repeat([]byte("VARS"), 540672/4) // OVMF_VARS_4M.fd's size
	if err := os.WriteFile(first, content, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(second, bytes.Repeat([]byte{0xff}, 540672), 0o644); err != nil {
		t.Fatal(err)
	}
	owner := "6f1c0e1e-4d7b-4d55-9a43-1b2f3c4d5e70"
	image := ceph.NVRAMImage(owner)
	t.Cleanup(func() { _ = cn.Remove(context.Background(), image) })
	if err := cn.ImportRaw(ctx, first, image, image+".tmp-n1"); err != nil {
		t.Fatal(err)
	}
	if err := cn.ImportRaw(ctx, second, image, image+".tmp-n2"); err != nil {
		t.Fatal(err)
	}
	info, err := cn.Info(ctx, image)
	if err != nil || info.Size != int64(len(content)) || info.Parent != nil {
		t.Fatalf("info: %+v %v", info, err)
	}
	got, err := c.Admin(ctx, "rbd", "export", "--no-progress", cn.Pool+"/"+image, "-")
	if err != nil || !bytes.Equal(got, content) {
		t.Fatalf("exported %d bytes (%v), want the first import's %d", len(got), err, len(content))
	}
	names, err := cn.List(ctx)
	if err != nil || slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, image+".tmp-") }) {
		t.Fatalf("images after two imports: %v %v", names, err)
	}
	if ceph.OwnerOf(image) != owner {
		t.Fatalf("OwnerOf(%s) = %q", image, ceph.OwnerOf(image))
	}
	if err := cn.ImportRaw(ctx, filepath.Join(dir, "missing.fd"), image+"x", image+"x.tmp-n1"); err == nil {
		t.Fatal("importing a missing file: no error")
	}
	if names, _ := cn.List(ctx); slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, image+"x") }) {
		t.Fatalf("a failed import left %v", names)
	}
}
