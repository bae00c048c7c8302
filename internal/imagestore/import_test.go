package imagestore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
)

func TestImportQCOW2(t *testing.T) {
	s := newStore(t)
	src := filepath.Join(t.TempDir(), "debian.qcow2")
	makeQCOW2(t, src, 64*mib)
	want := sha256File(t, src)

	img, err := s.Import(context.Background(), "debian/12.qcow2", src, ImportOptions{ExpectedSHA256: strings.ToUpper(want)})
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(src)
	if err != nil {
		t.Fatal(err)
	}
	if img.Name != "debian/12.qcow2" || img.Format != FormatQCOW2 || img.VirtualSize != 64*mib || img.Size != fi.Size() || img.SHA256 != want {
		t.Errorf("Import = %+v", img)
	}
	path := filepath.Join(s.Dir(), "debian", "12.qcow2")
	if got := sha256File(t, path); got != want {
		t.Errorf("stored file hashes to %s, want %s", got, want)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o640 {
		t.Errorf("stored file: %v, %v; want mode 0640", fi.Mode(), err)
	}
	assertStoreFiles(t, s, "debian/.12.qcow2.info.json", "debian/12.qcow2")

	list, err := s.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Name != img.Name || list[0].SHA256 != want || list[0].Format != FormatQCOW2 || list[0].Error != "" {
		t.Errorf("List = %+v", list)
	}
}

func TestImportRaw(t *testing.T) {
	s := newStore(t)
	src := filepath.Join(t.TempDir(), "disk.img")
	makeRaw(t, src, 64*mib, 2*mib+123)

	img, err := s.Import(context.Background(), "disk.img", src, ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if img.Format != FormatRaw || img.VirtualSize != 64*mib || img.Size != 64*mib || img.SHA256 != sha256File(t, src) {
		t.Errorf("Import = %+v", img)
	}
	// The zeros after the data stay holes.
	fi, err := os.Stat(filepath.Join(s.Dir(), "disk.img"))
	if err != nil {
		t.Fatal(err)
	}
	if allocated := fi.Sys().(*syscall.Stat_t).Blocks * 512; allocated > 8*mib {
		t.Errorf("copy allocates %d bytes of a sparse 64 MiB disk", allocated)
	}
}

// Valid qcow2 files may end inside their last cluster: compressed ones
// (cloud images often are) and fresh ones from qemu-img create, whose last
// metadata cluster is written only as far as it is used. They must pass
// the truncation check.
func TestImportQCOW2OffClusterGrid(t *testing.T) {
	for _, tt := range []struct {
		name string
		make func(t *testing.T, path string)
	}{
		{"compressed", func(t *testing.T, path string) { makeQCOW2(t, path, 64*mib, "-c") }},
		{"created", func(t *testing.T, path string) { qemuImg(t, "create", "-f", "qcow2", path, "2G") }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newStore(t)
			src := filepath.Join(t.TempDir(), "disk.qcow2")
			tt.make(t, src)
			img, err := s.Import(context.Background(), "disk.qcow2", src, ImportOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if fi, _ := os.Stat(src); img.Format != FormatQCOW2 || img.Size != fi.Size() || fi.Size()%65536 == 0 {
				t.Errorf("Import = %+v (source %d bytes, want a size off the cluster grid)", img, fi.Size())
			}
		})
	}
}

func TestImportTruncatedQCOW2(t *testing.T) {
	for _, tt := range []struct {
		name    string
		convert []string
		cut     func(size int64) int64
	}{
		{"half", nil, func(size int64) int64 { return size / 2 }},
		{"header only", nil, func(int64) int64 { return 1000 }},
		{"last cluster", nil, func(size int64) int64 { return size - 65536 }},
		{"compressed half", []string{"-c"}, func(size int64) int64 { return size / 2 }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newStore(t)
			src := filepath.Join(t.TempDir(), "cut.qcow2")
			makeQCOW2(t, src, 64*mib, tt.convert...)
			fi, _ := os.Stat(src)
			if err := os.Truncate(src, tt.cut(fi.Size())); err != nil {
				t.Fatal(err)
			}
			_, err := s.Import(context.Background(), "cut.qcow2", src, ImportOptions{})
			if !errors.Is(err, ErrInvalidImage) || !strings.Contains(err.Error(), "truncated") {
				t.Fatalf("err = %v, want ErrInvalidImage naming the truncation", err)
			}
			t.Log(err)
			assertStoreFiles(t, s) // not even a temporary file
		})
	}
}

func TestImportCorruptHeader(t *testing.T) {
	tests := []struct {
		name    string
		offset  int64
		bytes   []byte
		wantErr string
	}{
		{"version", 4, []byte{0, 0, 0, 99}, "Unsupported qcow2 version 99"},
		{"cluster bits", 20, []byte{0, 0, 0, 40}, "Unsupported cluster size"},
		{"l1 table offset", 40, []byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}, "L1 table offset invalid"},
		// Without its magic the file probes as raw; the name says qcow2.
		{"magic", 0, []byte("XXXX"), "content is raw, expected qcow2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStore(t)
			src := filepath.Join(t.TempDir(), "bad.qcow2")
			makeQCOW2(t, src, 64*mib)
			f, err := os.OpenFile(src, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteAt(tt.bytes, tt.offset); err != nil {
				t.Fatal(err)
			}
			f.Close()
			_, err = s.Import(context.Background(), "bad.qcow2", src, ImportOptions{})
			if !errors.Is(err, ErrInvalidImage) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want ErrInvalidImage with %q", err, tt.wantErr)
			}
			// qemu-img's message names the source, not the temporary copy.
			if strings.Contains(err.Error(), tempMarker) {
				t.Errorf("error names the temporary file: %v", err)
			}
			assertStoreFiles(t, s)
		})
	}
}

func TestImportChecksum(t *testing.T) {
	s := newStore(t)
	src := filepath.Join(t.TempDir(), "disk.raw")
	makeRaw(t, src, 4*mib, 4*mib)

	wrong := strings.Repeat("ab", 32)
	_, err := s.Import(context.Background(), "disk.raw", src, ImportOptions{ExpectedSHA256: wrong})
	if !errors.Is(err, ErrChecksumMismatch) || !strings.Contains(err.Error(), wrong) {
		t.Fatalf("err = %v, want ErrChecksumMismatch", err)
	}
	assertStoreFiles(t, s)

	_, err = s.Import(context.Background(), "disk.raw", src, ImportOptions{ExpectedSHA256: "abc"})
	if err == nil || !strings.Contains(err.Error(), "64 hex digits") {
		t.Fatalf("err = %v, want a complaint about the checksum's form", err)
	}
	assertStoreFiles(t, s)
}

func TestImportRejectsNames(t *testing.T) {
	s := newStore(t)
	src := filepath.Join(t.TempDir(), "disk.raw")
	makeRaw(t, src, mib, mib)
	for _, name := range []string{"", "..", "../x.raw", "a/../../x.raw", "a/..", "/abs.raw", s.Dir() + "/x.raw", ".hidden", "a/.b", "./a", "a//b", "a/", "nul\x00"} {
		_, err := s.Import(context.Background(), name, src, ImportOptions{})
		if !errors.Is(err, ErrInvalidName) {
			t.Errorf("Import(%q): err = %v, want ErrInvalidName", name, err)
		}
	}
	assertStoreFiles(t, s)
	if entries, _ := os.ReadDir(s.Dir()); len(entries) != 0 {
		t.Errorf("store directory holds %v", entries)
	}
}

func TestImportRefuses(t *testing.T) {
	dir := t.TempDir()
	base := filepath.Join(dir, "base.qcow2")
	makeQCOW2(t, base, 64*mib)
	overlay := filepath.Join(dir, "overlay.qcow2")
	qemuImg(t, "create", "-f", "qcow2", "-b", base, "-F", "qcow2", overlay)
	vmdk := filepath.Join(dir, "disk.vmdk")
	qemuImg(t, "create", "-f", "vmdk", vmdk, "16M")
	empty := filepath.Join(dir, "empty.raw")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	raw := filepath.Join(dir, "disk.raw")
	makeRaw(t, raw, mib, mib)

	tests := []struct {
		name, src string
		opts      ImportOptions
		wantErr   string
	}{
		{"backing file", overlay, ImportOptions{}, "backing file"},
		{"vmdk", vmdk, ImportOptions{}, `format "vmdk" is not supported`},
		{"empty", empty, ImportOptions{}, "source is empty"},
		{"format mismatch", raw, ImportOptions{Format: FormatQCOW2}, "content is raw, expected qcow2"},
		{"directory", dir, ImportOptions{}, "not a regular file"},
		{"missing", filepath.Join(dir, "nope"), ImportOptions{}, "no such file"},
		{"bad format option", raw, ImportOptions{Format: "vmdk"}, `format "vmdk"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStore(t)
			_, err := s.Import(context.Background(), "img", tt.src, tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
			assertStoreFiles(t, s)
		})
	}
}

func TestImportExistingAndReplace(t *testing.T) {
	s := newStore(t)
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.raw"), filepath.Join(dir, "b.raw")
	makeRaw(t, a, mib, mib)
	makeRaw(t, b, 2*mib, 2*mib)
	ctx := context.Background()
	if _, err := s.Import(ctx, "disk", a, ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Import(ctx, "disk", b, ImportOptions{}); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("second import: err = %v, want fs.ErrExist", err)
	}
	if got := sha256File(t, filepath.Join(s.Dir(), "disk")); got != sha256File(t, a) {
		t.Error("refused import changed the image")
	}
	img, err := s.Import(ctx, "disk", b, ImportOptions{Replace: true})
	if err != nil {
		t.Fatal(err)
	}
	if img.SHA256 != sha256File(t, b) || img.VirtualSize != 2*mib {
		t.Errorf("replaced image = %+v", img)
	}
	list, err := s.List(ctx)
	if err != nil || len(list) != 1 || list[0].SHA256 != img.SHA256 {
		t.Errorf("List after replace = %+v, %v", list, err)
	}
	assertStoreFiles(t, s, ".disk.info.json", "disk")
}

func TestImportCancelled(t *testing.T) {
	s := newStore(t)
	src := filepath.Join(t.TempDir(), "disk.raw")
	makeRaw(t, src, 8*mib, 8*mib)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Import(ctx, "disk.raw", src, ImportOptions{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	assertStoreFiles(t, s)
}

func TestImportConcurrent(t *testing.T) {
	s := newStore(t)
	dir := t.TempDir()
	const n = 8
	srcs := make([]string, n)
	for i := range n {
		srcs[i] = filepath.Join(dir, fmt.Sprintf("src%d", i))
		if i%2 == 0 {
			makeQCOW2(t, srcs[i], int64(16+i)*mib)
		} else {
			makeRaw(t, srcs[i], int64(i)*mib, mib)
		}
	}
	ctx := context.Background()

	// Different names: all succeed.
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			_, errs[i] = s.Import(ctx, fmt.Sprintf("img-%d", i), srcs[i], ImportOptions{})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("import %d: %v", i, err)
		}
	}
	list, err := s.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != n {
		t.Fatalf("List has %d images, want %d", len(list), n)
	}
	for i, img := range list {
		if img.Name != fmt.Sprintf("img-%d", i) || img.SHA256 != sha256File(t, srcs[i]) || img.Error != "" {
			t.Errorf("image %d = %+v", i, img)
		}
	}

	// One name: exactly one wins, the others see fs.ErrExist.
	for i := range n {
		wg.Go(func() {
			_, errs[i] = s.Import(ctx, "contested", srcs[i], ImportOptions{})
		})
	}
	wg.Wait()
	won := 0
	for i, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, fs.ErrExist):
			t.Errorf("contested import %d: %v", i, err)
		}
	}
	if won != 1 {
		t.Errorf("%d imports of one name succeeded, want 1", won)
	}
	for _, f := range storeFiles(t, s) {
		if strings.Contains(f, tempMarker) {
			t.Errorf("temporary file left: %s", f)
		}
	}
}
