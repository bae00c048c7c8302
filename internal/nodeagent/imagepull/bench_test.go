package imagepull

import (
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/virtplane/terraform-provider-virtplane/internal/imagepolicy"
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
	content, sum := qcow2(b, 256<<20)
	srv, _ := server(b, content)
	b.SetBytes(int64(len(content)))
	var pol imagepolicy.Current
	p0 := imagepolicy.Default()
	p0.SourceCIDRs = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	pol.Set(p0)
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		s, err := imagestore.Open(filepath.Join(dir, fmt.Sprintf("images-%d", i)))
		if err != nil {
			b.Fatal(err)
		}
		p, err := New(Options{NodeName: "n1", Store: s, RecordDir: filepath.Join(dir, fmt.Sprintf("pulled-%d", i)), API: &fakeAPI{},
			Policy: &pol, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
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
