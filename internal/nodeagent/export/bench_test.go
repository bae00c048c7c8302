package export

import (
	"crypto/rand"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// BenchmarkExportDownload serves a 256 MiB qcow2 volume holding 128 MiB
// of random data and 64 MiB of zeros (the rest never written), over
// HTTPS on loopback, in each format, beside `qemu-img convert` of the
// same volume to the same format (what the first download of a format
// pays). ns/op and MB/s are one whole download (MB/s of the raw image
// for gzip), the served file made before the timer starts; convert-s is
// the conversion alone.
//
//	go test -run '^$' -bench BenchmarkExportDownload -benchtime 3x ./internal/nodeagent/export/
func BenchmarkExportDownload(b *testing.B) {
	r := newRigOf(b, "256M", "write -z 0 4k")
	// The volume made again from a raw file: random data, a stretch of
	// written zeros, and a hole.
	raw := filepath.Join(b.TempDir(), "src.raw")
	f, err := os.Create(raw)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := io.CopyN(f, rand.Reader, 128<<20); err != nil {
		b.Fatal(err)
	}
	if _, err := f.Write(make([]byte, 64<<20)); err != nil {
		b.Fatal(err)
	}
	if err := f.Truncate(256 << 20); err != nil {
		b.Fatal(err)
	}
	f.Close()
	run(b, "qemu-img", "convert", "-q", "-f", "raw", "-O", "qcow2", raw, r.volume)
	for _, format := range apiv1.ExportFormats {
		b.Run(format, func(b *testing.B) {
			out := filepath.Join(b.TempDir(), "convert")
			f := format
			if f == apiv1.ExportFormatGzip {
				f = apiv1.ExportFormatRaw
			}
			began := time.Now()
			if o, err := exec.Command("qemu-img", "convert", "-q", "-U", "-f", "qcow2", "-O", f, r.volume, out).CombinedOutput(); err != nil {
				b.Fatalf("qemu-img convert: %v: %s", err, o)
			}
			convert := time.Since(began)
			url := r.url("data", format)
			fetch := func() int64 {
				resp := r.get(url, testToken)
				defer resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Fatalf("GET %s: %s", url, resp.Status)
				}
				n, err := io.Copy(io.Discard, resp.Body)
				if err != nil {
					b.Fatal(err)
				}
				if raw := resp.Header.Get(RawSizeHeader); raw != "" {
					n, _ = strconv.ParseInt(raw, 10, 64)
				}
				return n
			}
			n := fetch() // makes the file
			b.SetBytes(n)
			b.ResetTimer()
			for range b.N {
				fetch()
			}
			b.ReportMetric(convert.Seconds(), "convert-s")
		})
	}
}
