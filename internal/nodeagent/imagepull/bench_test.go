package imagepull

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/virtplane/terraform-provider-virtplane/internal/imagestore"
)

// BenchmarkPull pulls a 256 MiB qcow2 (random data, so nothing is
// sparse) from a loopback server: download, checksum read-back, qemu-img
// info and check, rename. b.SetBytes makes the result a throughput.
//
//	go test -run '^$' -bench Pull -benchtime 3x ./internal/nodeagent/imagepull
func BenchmarkPull(b *testing.B) {
	if _, err := exec.LookPath("qemu-img"); err != nil {
		b.Skip("qemu-img not installed")
	}
	dir := b.TempDir()
	raw := filepath.Join(dir, "src.raw")
	data := make([]byte, 256<<20)
	rand.Read(data)
	if err := os.WriteFile(raw, data, 0o644); err != nil {
		b.Fatal(err)
	}
	img := filepath.Join(dir, "img.qcow2")
	if out, err := exec.Command("qemu-img", "convert", "-f", "raw", "-O", "qcow2", raw, img).CombinedOutput(); err != nil {
		b.Fatalf("%v: %s", err, out)
	}
	content, err := os.ReadFile(img)
	if err != nil {
		b.Fatal(err)
	}
	h := sha256.Sum256(content)
	sum := hex.EncodeToString(h[:])
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "img.qcow2", time.Unix(1700000000, 0), bytes.NewReader(content))
	}))
	defer srv.Close()
	b.SetBytes(int64(len(content)))
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		s, err := imagestore.Open(filepath.Join(dir, fmt.Sprintf("images-%d", i)))
		if err != nil {
			b.Fatal(err)
		}
		p, err := New(Options{NodeName: "n1", Store: s, RecordDir: filepath.Join(dir, fmt.Sprintf("pulled-%d", i)), API: &fakeAPI{},
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if err := p.Ensure(b.Context(), image("bench.qcow2", srv.URL+"/img.qcow2", sum), nil); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		p.Close()
		os.RemoveAll(s.Dir())
		b.StartTimer()
	}
}
