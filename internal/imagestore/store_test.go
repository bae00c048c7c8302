package imagestore

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestListUsesCache(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	src := filepath.Join(t.TempDir(), "disk.raw")
	makeRaw(t, src, 2*mib, 2*mib)
	if _, err := s.Import(ctx, "disk.raw", src, ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(s.Dir(), "disk.raw")

	// Forge the cached checksum, keeping the key: List must report the
	// forgery, proving it did not read the image again.
	b, err := os.ReadFile(sidecarPath(path))
	if err != nil {
		t.Fatal(err)
	}
	var sc sidecar
	if err := json.Unmarshal(b, &sc); err != nil {
		t.Fatal(err)
	}
	real := sc.SHA256
	sc.SHA256 = strings.Repeat("0", 64)
	if err := writeSidecar(path, sc); err != nil {
		t.Fatal(err)
	}
	list, err := s.List(ctx)
	if err != nil || len(list) != 1 || list[0].SHA256 != sc.SHA256 {
		t.Fatalf("List = %+v, %v; want the cached checksum", list, err)
	}

	// An ownership change (libvirt chowns images to QEMU's user on every
	// guest start) is no reason to read the image again.
	if err := os.Chown(path, 1, 1); err == nil {
		if l, err := s.List(ctx); err != nil || len(l) != 1 || l[0].SHA256 != sc.SHA256 {
			t.Fatalf("after chown List = %+v, %v; want the cached checksum", l, err)
		}
	}

	// Same size and modification time, different content, swapped in by
	// rename (as rsync -t leaves it): the new inode gives it away.
	mtime := list[0].ModTime
	data, _ := os.ReadFile(path)
	data[0] ^= 0xff
	if err := os.WriteFile(path+".new", data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path+".new", mtime, mtime); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".new", path); err != nil {
		t.Fatal(err)
	}
	list, err = s.List(ctx)
	if err != nil || len(list) != 1 {
		t.Fatalf("List = %+v, %v", list, err)
	}
	if got := list[0].SHA256; got == sc.SHA256 || got == real || got != sha256File(t, path) {
		t.Errorf("after rewrite List reports %s, want the new content's %s", got, sha256File(t, path))
	}
}

func TestListSkipsAndReports(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	write := func(name string, data []byte) {
		p := filepath.Join(s.Dir(), name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a.raw", make([]byte, 4096))
	if err := os.Mkdir(filepath.Join(s.Dir(), "b"), 0o755); err != nil {
		t.Fatal(err)
	}
	makeQCOW2(t, filepath.Join(s.Dir(), "b", "nested.qcow2"), 32*mib)
	write(".hidden", []byte("x"))
	write(".a.raw.tmp-123", []byte("x"))
	write(".dir/inside.raw", make([]byte, 4096))
	// Dropped in by hand: an overlay with a backing file.
	qemuImg(t, "create", "-f", "qcow2", "-b", filepath.Join(s.Dir(), "b", "nested.qcow2"), "-F", "qcow2", filepath.Join(s.Dir(), "c.qcow2"))

	list, err := s.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, img := range list {
		names = append(names, img.Name)
	}
	if strings.Join(names, " ") != "a.raw b/nested.qcow2 c.qcow2" {
		t.Fatalf("List names = %q", names)
	}
	if list[0].Format != FormatRaw || list[1].Format != FormatQCOW2 || list[1].VirtualSize != 32*mib {
		t.Errorf("List = %+v", list)
	}
	if !strings.Contains(list[2].Error, "backing file") || list[2].SHA256 != "" {
		t.Errorf("image with a backing file = %+v, want an error", list[2])
	}

	img, err := s.Inspect(ctx, "b/nested.qcow2")
	if err != nil || img != list[1] {
		t.Errorf("Inspect = %+v, %v; want %+v", img, err, list[1])
	}
	if _, err := s.Inspect(ctx, "missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Inspect(missing): %v, want fs.ErrNotExist", err)
	}
	if _, err := s.Inspect(ctx, "c.qcow2"); !errors.Is(err, ErrInvalidImage) {
		t.Errorf("Inspect(c.qcow2): %v, want ErrInvalidImage", err)
	}
}

func TestRemove(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	src := filepath.Join(t.TempDir(), "disk.raw")
	makeRaw(t, src, mib, mib)
	if _, err := s.Import(ctx, "os/disk.raw", src, ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove(ctx, "os/disk.raw"); err != nil {
		t.Fatal(err)
	}
	assertStoreFiles(t, s)
	if err := s.Remove(ctx, "os/disk.raw"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("second Remove: %v, want fs.ErrNotExist", err)
	}
	if err := s.Remove(ctx, "os"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Remove(directory): %v, want fs.ErrNotExist", err)
	}
	if err := s.Remove(ctx, "../x"); !errors.Is(err, ErrInvalidName) {
		t.Errorf("Remove(../x): %v, want ErrInvalidName", err)
	}
}

func TestOpenRemovesStaleTemps(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "images")
	newStoreAt(t, dir) // creates dir
	old := filepath.Join(dir, ".disk.tmp-1")
	fresh := filepath.Join(dir, ".disk.tmp-2")
	for _, p := range []string{old, fresh} {
		if err := os.WriteFile(p, []byte("partial"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	long := time.Now().Add(-2 * staleTempAge)
	if err := os.Chtimes(old, long, long); err != nil {
		t.Fatal(err)
	}
	s := newStoreAt(t, dir)
	assertStoreFiles(t, s, ".disk.tmp-2")
}

func newStoreAt(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// An image that a running QEMU holds open (and locked) must still be
// inspectable: that is what -U is for.
func TestInspectLockedImage(t *testing.T) {
	s := newStore(t)
	qemuIO, err := exec.LookPath("qemu-io")
	if err != nil {
		t.Skip("qemu-io not installed (Debian package qemu-utils)")
	}
	path := filepath.Join(s.Dir(), "busy.qcow2")
	makeQCOW2(t, path, 16*mib)

	// qemu-io opens the image read-write, taking QEMU's image locks, and
	// keeps it open until its standard input closes.
	cmd := exec.Command(qemuIO, path)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); cmd.Wait() })
	// Wait until it has the image open: it answers a command.
	stdin.Write([]byte("length\n"))
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || !strings.Contains(line, "MiB") {
		t.Fatalf("qemu-io: %q, %v", line, err)
	}
	if out, err := exec.Command("qemu-img", "info", path).CombinedOutput(); err == nil || !strings.Contains(string(out), "lock") {
		t.Fatalf("without -U qemu-img info should fail on the lock; got %v: %s", err, out)
	}
	img, err := s.Inspect(context.Background(), "busy.qcow2")
	if err != nil || img.Format != FormatQCOW2 {
		t.Errorf("Inspect = %+v, %v", img, err)
	}
}
