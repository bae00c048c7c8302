package imagefill_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/virtplane/terraform-provider-virtplane/internal/testutil/imagefill"
)

// TestWrittenPartIsData: the written part takes disk blocks and reads as
// data to qemu-img, the rest is a hole, and no two 4 KiB blocks are the
// same.
func TestWrittenPartIsData(t *testing.T) {
	path := filepath.Join(t.TempDir(), "img.raw")
	const size, data = 64 << 20, 8<<20 + 100
	if err := imagefill.Write(path, size, data); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() != size {
		t.Fatalf("size %d, want %d", fi.Size(), size)
	}
	if used := fi.Sys().(*syscall.Stat_t).Blocks * 512; used < 8<<20 || used > 9<<20 {
		t.Errorf("%d bytes allocated, want the 8 MiB written and the rest a hole", used)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for off := 0; off < 8<<20; off += 4096 {
		blk := b[off : off+4096]
		if bytes.Count(blk, []byte{0}) > 8 {
			t.Fatalf("block at %d is mostly zeros", off)
		}
		if seen[string(blk)] {
			t.Fatalf("block at %d repeats an earlier one", off)
		}
		seen[string(blk)] = true
	}
	if !bytes.Equal(b[8<<20:], make([]byte, size-8<<20)) {
		t.Error("the part after the data is not zeros")
	}
	if _, err := exec.LookPath("qemu-img"); err != nil {
		t.Skip("qemu-img not installed")
	}
	out, err := exec.Command("qemu-img", "map", "--output=json", "-f", "raw", path).Output()
	if err != nil {
		t.Fatal(err)
	}
	var m []struct {
		Start, Length int64
		Data, Zero    bool
	}
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatal(err)
	}
	var dataBytes int64
	for _, e := range m {
		if e.Data && !e.Zero {
			dataBytes += e.Length
		}
	}
	if dataBytes != 8<<20 {
		t.Errorf("qemu-img map finds %d bytes of data, want %d: %s", dataBytes, 8<<20, out)
	}
}

func TestRefusesAnExistingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "img.raw")
	if err := os.WriteFile(path, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := imagefill.Write(path, 1<<20, 1<<20); err == nil {
		t.Fatal("overwrote an existing file")
	}
	if b, _ := os.ReadFile(path); string(b) != "keep" {
		t.Errorf("the existing file now holds %q", b)
	}
}
