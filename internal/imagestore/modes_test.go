package imagestore

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func owner(t *testing.T, path string) (mode os.FileMode, uid, gid int) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return fi.Mode().Perm(), int(st.Uid), int(st.Gid)
}

// TestImagesReadableByOwnerAndGroupOnly: an imported and a committed
// image are 0640 with the image directory's group; ShareWith makes that
// group QEMU's and takes what others could read from the images already
// there, and the next image gets the new group.
func TestImagesReadableByOwnerAndGroupOnly(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("changing groups needs root")
	}
	s := newStore(t)
	src := filepath.Join(t.TempDir(), "disk.raw")
	makeRaw(t, src, 4*mib, mib)
	if _, err := s.Import(context.Background(), "a.raw", src, ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	if mode, _, gid := owner(t, filepath.Join(s.Dir(), "a.raw")); mode != imageMode || gid != 0 {
		t.Fatalf("imported image: mode %v group %d, want %v and the directory's group 0", mode, gid, imageMode)
	}
	// One placed by hand, world-readable, as images were before.
	old := filepath.Join(s.Dir(), "old.raw")
	makeRaw(t, old, 4*mib, mib)
	if err := os.Chmod(old, 0o644); err != nil {
		t.Fatal(err)
	}

	const qemuGroup = 64055
	if err := s.ShareWith(qemuGroup); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a.raw", "old.raw"} {
		if mode, _, gid := owner(t, filepath.Join(s.Dir(), name)); mode != 0o640 || gid != qemuGroup {
			t.Errorf("%s after ShareWith: mode %v group %d, want 0640 and %d", name, mode, gid, qemuGroup)
		}
	}
	dl, err := s.DownloadPath("b.raw")
	if err != nil {
		t.Fatal(err)
	}
	makeRaw(t, dl, 4*mib, mib)
	if _, err := s.Commit(context.Background(), "b.raw", ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	if mode, _, gid := owner(t, filepath.Join(s.Dir(), "b.raw")); mode != imageMode || gid != qemuGroup {
		t.Fatalf("committed image: mode %v group %d, want %v and %d", mode, gid, imageMode, qemuGroup)
	}
}

// TestVirtualSizeCap: a 7 MiB qcow2 claiming 64 PiB is refused by Commit
// and Import with a cap, before qemu-img check reads it, and nothing is
// left; under the cap it passes.
func TestVirtualSizeCap(t *testing.T) {
	s := newStore(t)
	huge := filepath.Join(t.TempDir(), "huge.qcow2")
	qemuImg(t, "create", "-q", "-f", "qcow2", "-o", "cluster_size=2M", huge, "64P")
	if fi, err := os.Stat(huge); err != nil || fi.Size() > 8*mib {
		t.Fatalf("the test image: %v, %v", fi, err)
	}
	const capBytes = 2 << 40
	_, err := s.Import(context.Background(), "huge.qcow2", huge, ImportOptions{MaxVirtualSize: capBytes})
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "virtual size is 64Pi") || !strings.Contains(err.Error(), "2Ti") {
		t.Fatalf("Import = %v, want ErrTooLarge naming 64Pi and 2Ti", err)
	}
	dl, err := s.DownloadPath("huge.qcow2")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(huge)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dl, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit(context.Background(), "huge.qcow2", ImportOptions{MaxVirtualSize: capBytes}); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Commit = %v, want ErrTooLarge", err)
	}
	assertStoreFiles(t, s)
	if _, err := s.Import(context.Background(), "huge.qcow2", huge, ImportOptions{MaxVirtualSize: 64 << 50}); err != nil {
		t.Fatalf("at the cap: %v", err)
	}
}
