package repo

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func qemuImg(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("qemu-img", args...).CombinedOutput(); err != nil {
		t.Fatalf("qemu-img %v: %v: %s", args, err, out)
	}
}

// A qcow2 image backs up without converting it: the bytes restored are
// those of the image (qemu-img convert to raw is the reference), its
// unallocated clusters are holes, and what cannot be read in place
// (compressed clusters, a backing file) is refused when it is opened.
func TestQCOW2Source(t *testing.T) {
	if _, err := exec.LookPath("qemu-img"); err != nil {
		t.Skip("qemu-img not installed")
	}
	ctx := context.Background()
	dir := t.TempDir()
	raw := filepath.Join(dir, "src.raw")
	const cs = MinChunkSize
	sparseVolume(t, raw, 40*cs+512, []Range{{0, 8192}, {7*cs + 100, 3 * cs}, {40 * cs, 512}}, 11)
	img := filepath.Join(dir, "vol.qcow2")
	qemuImg(t, "convert", "-f", "raw", "-O", "qcow2", raw, img)

	q, err := OpenQCOW2(ctx, img)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if q.Size() != 40*cs+512 {
		t.Errorf("size %d", q.Size())
	}
	r := New(mustDir(t), Options{ChunkSize: cs})
	v, st, err := r.WriteRaw(ctx, q, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if st.ZeroChunks < 35 || st.BytesRead > 6*cs+512 {
		t.Errorf("stats %+v: the unallocated clusters should be holes, never read", st)
	}
	out := make(bufAt, v.SizeBytes)
	if err := r.RestoreRaw(ctx, v, out, nil); err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile(raw)
	if !bytes.Equal(out, want) {
		t.Error("the restore differs from the image's bytes")
	}

	compressed := filepath.Join(dir, "c.qcow2")
	qemuImg(t, "convert", "-c", "-f", "raw", "-O", "qcow2", raw, compressed)
	if _, err := OpenQCOW2(ctx, compressed); err == nil || !strings.Contains(err.Error(), "compressed") {
		t.Errorf("a compressed image: %v, want it refused", err)
	}
	overlay := filepath.Join(dir, "overlay.qcow2")
	qemuImg(t, "create", "-f", "qcow2", "-b", img, "-F", "qcow2", overlay)
	if _, err := OpenQCOW2(ctx, overlay); err == nil || !strings.Contains(err.Error(), "backing file") {
		t.Errorf("an overlay: %v, want it refused", err)
	}
	// The format is never probed: a raw file is not read as qcow2.
	if _, err := OpenQCOW2(ctx, raw); err == nil {
		t.Error("a raw file opened as qcow2")
	}
}
