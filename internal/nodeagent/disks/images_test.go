package disks

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/imagestore"
)

func needQemuImg(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("qemu-img"); err != nil {
		t.Skip("qemu-img not installed (Debian package qemu-utils)")
	}
}

func writeImage(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func imageNames(l *apiv1.NodeImageList) string {
	var names []string
	for _, img := range l.GetItems() {
		names = append(names, img.GetName())
	}
	return strings.Join(names, " ")
}

// The refresher lists the directory with imagestore, reports what a VMI
// can use, and lists again only when a file changed.
func TestImageRefresh(t *testing.T) {
	needQemuImg(t)
	dir := t.TempDir()
	kernel := []byte("not really a kernel, but qemu-img calls it raw")
	writeImage(t, filepath.Join(dir, "boot", "vmlinuz"), kernel)
	writeImage(t, filepath.Join(dir, "disk.raw"), make([]byte, 1<<20))
	writeImage(t, filepath.Join(dir, ".hidden"), []byte("x"))
	if out, err := exec.Command("qemu-img", "create", "-q", "-f", "qcow2", filepath.Join(dir, "base.qcow2"), "64M").CombinedOutput(); err != nil {
		t.Fatalf("qemu-img create: %v\n%s", err, out)
	}
	// An overlay dropped in by hand: it needs another file, so no VMI can
	// use it as a base.
	if out, err := exec.Command("qemu-img", "create", "-q", "-f", "qcow2", "-b", filepath.Join(dir, "base.qcow2"), "-F", "qcow2",
		filepath.Join(dir, "overlay.qcow2")).CombinedOutput(); err != nil {
		t.Fatalf("qemu-img create: %v\n%s", err, out)
	}

	inv := NewInventory(InventoryOptions{ImageDir: dir, Logger: slog.New(slog.DiscardHandler)})
	s, err := imagestore.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	lists := 0
	r := refresher{inv: inv, store: s, list: func(ctx context.Context) ([]imagestore.Image, error) {
		lists++
		return s.List(ctx)
	}}
	ctx := context.Background()

	if inv.Pending() != nil {
		t.Fatal("pending before any listing")
	}
	r.refresh(ctx)
	l := inv.Pending()
	if got := imageNames(l); got != "base.qcow2 boot/vmlinuz disk.raw" {
		t.Fatalf("listed %q", got)
	}
	// qemu-img rounds a raw file up to whole 512-byte sectors.
	want := []*apiv1.NodeImage{
		{Name: "boot/vmlinuz", Format: "raw", VirtualSizeBytes: 512, SizeBytes: int64(len(kernel)), Sha256: sha256Hex(kernel)},
		{Name: "disk.raw", Format: "raw", VirtualSizeBytes: 1 << 20, SizeBytes: 1 << 20, Sha256: sha256Hex(make([]byte, 1<<20))},
	}
	for i, w := range want {
		if got := l.Items[i+1]; !proto.Equal(got, w) {
			t.Errorf("image %d = %v, want %v", i+1, got, w)
		}
	}
	if q := l.Items[0]; q.Format != "qcow2" || q.VirtualSizeBytes != 64<<20 || len(q.Sha256) != 64 {
		t.Errorf("qcow2 image = %v", q)
	}
	select {
	case <-inv.listed:
	default:
		t.Error("registration would still wait after the first listing")
	}

	// Sent once: nothing pending until something changes.
	inv.MarkSent(l)
	if p := inv.Pending(); p != nil {
		t.Fatalf("pending after sending: %v", p)
	}
	r.refresh(ctx)
	if lists != 1 {
		t.Fatalf("unchanged directory listed again (%d listings)", lists)
	}

	// A file replaced by rename with one of the same size and
	// modification time is noticed too.
	p := filepath.Join(dir, "disk.raw")
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	changed := make([]byte, 1<<20)
	changed[0] = 1
	writeImage(t, p+".new", changed)
	if err := os.Chtimes(p+".new", fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(p+".new", p); err != nil {
		t.Fatal(err)
	}
	r.refresh(ctx)
	l2 := inv.Pending()
	if lists != 2 || l2 == nil || l2.Items[2].Sha256 != sha256Hex(changed) {
		t.Fatalf("after rewrite: %d listings, pending %v", lists, l2)
	}
	inv.MarkSent(l2)

	// A listing equal to the sent one is not pending.
	writeImage(t, filepath.Join(dir, "new.raw"), make([]byte, 4096))
	r.refresh(ctx)
	if lists != 3 || imageNames(inv.Pending()) != "base.qcow2 boot/vmlinuz disk.raw new.raw" {
		t.Fatalf("after adding: %d listings, pending %q", lists, imageNames(inv.Pending()))
	}
	if err := os.Remove(filepath.Join(dir, "new.raw")); err != nil {
		t.Fatal(err)
	}
	r.refresh(ctx)
	if p := inv.Pending(); lists != 4 || p != nil {
		t.Fatalf("after removing again: %d listings, pending %v", lists, p)
	}
}
