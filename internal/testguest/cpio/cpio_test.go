package cpio

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

type entry struct {
	hdr  Header
	ino  uint32
	data string
}

// readAll is an independent newc parser, so the test checks the layout
// rather than the writer against itself.
func readAll(t *testing.T, b []byte) []entry {
	t.Helper()
	var out []entry
	off := 0
	field := func(i int) uint32 {
		v, err := strconv.ParseUint(string(b[off+6+8*i:off+6+8*i+8]), 16, 32)
		if err != nil {
			t.Fatalf("field %d at %d: %v", i, off, err)
		}
		return uint32(v)
	}
	align := func(n int) int { return (n + 3) &^ 3 }
	for {
		if off%4 != 0 {
			t.Fatalf("entry at unaligned offset %d", off)
		}
		if string(b[off:off+6]) != "070701" {
			t.Fatalf("bad magic at %d: %q", off, b[off:off+6])
		}
		namesize := int(field(11))
		size := int(field(6))
		name := string(b[off+110 : off+110+namesize-1])
		if b[off+110+namesize-1] != 0 {
			t.Fatalf("%s: name not NUL-terminated", name)
		}
		dataOff := align(off + 110 + namesize)
		e := entry{
			hdr: Header{Name: name, Mode: field(1), UID: field(2), GID: field(3), Mtime: field(5),
				Size: int64(size), RDevMajor: field(9), RDevMinor: field(10)},
			ino:  field(0),
			data: string(b[dataOff : dataOff+size]),
		}
		off = align(dataOff + size)
		if name == "TRAILER!!!" {
			if off != len(b) {
				t.Fatalf("%d bytes after trailer", len(b)-off)
			}
			return out
		}
		out = append(out, e)
	}
}

func build(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := NewWriter(&buf)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(w.WriteHeader(&Header{Name: "bin", Mode: TypeDir | 0o755, Mtime: 7}))
	content := "hello, initramfs\n" // 17 bytes: needs padding
	must(w.WriteHeader(&Header{Name: "/bin/hello", Mode: TypeReg | 0o644, Size: int64(len(content))}))
	_, err := io.WriteString(w, content)
	must(err)
	must(w.WriteSymlink("bin/sh", "busybox", 0))
	must(w.WriteHeader(&Header{Name: "dev", Mode: TypeDir | 0o755}))
	must(w.WriteHeader(&Header{Name: "dev/console", Mode: TypeChar | 0o600, RDevMajor: 5, RDevMinor: 1}))
	must(w.WriteHeader(&Header{Name: "empty", Mode: TypeReg | 0o600}))
	must(w.Close())
	return buf.Bytes()
}

func TestRoundTrip(t *testing.T) {
	got := readAll(t, build(t))
	want := []struct {
		name, data string
		mode       uint32
		maj, min   uint32
	}{
		{"bin", "", TypeDir | 0o755, 0, 0},
		{"bin/hello", "hello, initramfs\n", TypeReg | 0o644, 0, 0},
		{"bin/sh", "busybox", TypeSymlink | 0o777, 0, 0},
		{"dev", "", TypeDir | 0o755, 0, 0},
		{"dev/console", "", TypeChar | 0o600, 5, 1},
		{"empty", "", TypeReg | 0o600, 0, 0},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d entries, want %d", len(got), len(want))
	}
	inos := map[uint32]bool{}
	for i, w := range want {
		g := got[i]
		if g.hdr.Name != w.name || g.data != w.data || g.hdr.Mode != w.mode || g.hdr.RDevMajor != w.maj || g.hdr.RDevMinor != w.min {
			t.Errorf("entry %d = %+v %q, want %+v", i, g.hdr, g.data, w)
		}
		if inos[g.ino] {
			t.Errorf("entry %d reuses inode %d", i, g.ino)
		}
		inos[g.ino] = true
	}
	if got[0].hdr.Mtime != 7 {
		t.Errorf("mtime = %d, want 7", got[0].hdr.Mtime)
	}
}

func TestDeterministic(t *testing.T) {
	if !bytes.Equal(build(t), build(t)) {
		t.Fatal("two identical builds differ")
	}
}

func TestErrors(t *testing.T) {
	w := NewWriter(io.Discard)
	if err := w.WriteHeader(&Header{Name: "f", Mode: 0o644}); err == nil {
		t.Error("mode without file type accepted")
	}
	if err := w.WriteHeader(&Header{Name: "d", Mode: TypeDir | 0o755, Size: 3}); err == nil {
		t.Error("directory with data accepted")
	}
	if err := w.WriteHeader(&Header{Name: "", Mode: TypeReg}); err == nil {
		t.Error("empty name accepted")
	}
	if err := w.WriteHeader(&Header{Name: "f", Mode: TypeReg | 0o644, Size: 4}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("12345")); err == nil {
		t.Error("overlong write accepted")
	}
	if _, err := w.Write([]byte("12")); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err == nil || !strings.Contains(err.Error(), "short") {
		t.Errorf("Close with a short entry: %v", err)
	}
}

// TestExternalCpio lists and unpacks the archive with the system's cpio,
// when there is one, as a check against a second implementation.
func TestExternalCpio(t *testing.T) {
	bin, err := exec.LookPath("cpio")
	if err != nil {
		t.Skip("cpio not installed")
	}
	dir := t.TempDir()
	cmd := exec.Command(bin, "-i", "-d", "--quiet", "--no-absolute-filenames")
	cmd.Dir = dir
	cmd.Stdin = bytes.NewReader(build(t))
	if out, err := cmd.CombinedOutput(); err != nil {
		// Creating dev/console needs root; everything before it must
		// still have been unpacked, which is checked below.
		t.Logf("cpio -i: %v: %s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "bin/hello"))
	if err != nil || string(b) != "hello, initramfs\n" {
		t.Fatalf("bin/hello = %q, %v", b, err)
	}
	target, err := os.Readlink(filepath.Join(dir, "bin/sh"))
	if err != nil || target != "busybox" {
		t.Fatalf("bin/sh -> %q, %v", target, err)
	}
	fi, err := os.Stat(filepath.Join(dir, "empty"))
	if err != nil || fi.Size() != 0 {
		t.Fatal(fmt.Errorf("empty: %v %w", fi, err))
	}
}
