package disks

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// ConvertRaw makes a qcow2 of a raw sparse file (a restored backup's
// volume) with the same size and bytes, allocating only where the raw
// file has data.
func TestConvertRawKeepsSizeAndBytes(t *testing.T) {
	if _, err := exec.LookPath("qemu-img"); err != nil {
		t.Skip("qemu-img not installed")
	}
	ctx := t.Context()
	dir := t.TempDir()
	raw, dst := filepath.Join(dir, "v.raw"), filepath.Join(dir, "v.qcow2")
	const size = 64 << 20
	data := bytes.Repeat([]byte("virtplane"), 1000)
	f, err := os.Create(raw)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(data, 32<<20); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	q := QemuImg{}
	if err := q.ConvertRaw(ctx, raw, dst); err != nil {
		t.Fatal(err)
	}
	info, err := q.Info(ctx, dst)
	if err != nil {
		t.Fatal(err)
	}
	if info.Format != "qcow2" || info.VirtualSize != size {
		t.Fatalf("info = %+v, want a qcow2 of %d bytes", info, size)
	}
	if out, err := exec.CommandContext(ctx, "qemu-img", "compare", "-q", "-f", "raw", "-F", "qcow2", raw, dst).CombinedOutput(); err != nil {
		t.Fatalf("qemu-img compare: %v: %s", err, out)
	}
	if fi, err := os.Stat(dst); err != nil {
		t.Fatal(err)
	} else if fi.Size() > 8<<20 {
		t.Fatalf("the qcow2 takes %d bytes for %d bytes of data: not sparse", fi.Size(), len(data))
	}
}
