package imagepull

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/imagepolicy"
	"github.com/virtplane/terraform-provider-virtplane/internal/imagestore"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// fakeAPI records the status reports.
type fakeAPI struct {
	mu      sync.Mutex
	reports []*apiv1.ImageNodeStatus
}

func (f *fakeAPI) UpdateNodeStatus(_ context.Context, in *apiv1.UpdateImageNodeStatusRequest, _ ...grpc.CallOption) (*apiv1.Image, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reports = append(f.reports, in.GetStatus())
	return &apiv1.Image{}, nil
}

func (f *fakeAPI) last() *apiv1.ImageNodeStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.reports) == 0 {
		return nil
	}
	return f.reports[len(f.reports)-1]
}

type env struct {
	t     *testing.T
	dir   string
	store *imagestore.Store
	api   *fakeAPI
	// fileRoots are the next puller's Options.FileRoots.
	fileRoots []string
	// policy is the next puller's image policy: the default, with the
	// tests' loopback servers allowed.
	policy imagepolicy.Policy
}

func newEnv(t *testing.T) *env {
	t.Helper()
	if _, err := exec.LookPath("qemu-img"); err != nil {
		t.Skip("qemu-img not installed (Debian package qemu-utils)")
	}
	dir := t.TempDir()
	s, err := imagestore.Open(filepath.Join(dir, "images"))
	if err != nil {
		t.Fatal(err)
	}
	pol := imagepolicy.Default()
	pol.SourceCIDRs = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	return &env{t: t, dir: dir, store: s, api: &fakeAPI{}, policy: pol}
}

func (e *env) puller() *Puller { return e.pullerWith(nil) }

func (e *env) pullerWith(clk clock.WithTicker) *Puller {
	e.t.Helper()
	var cur imagepolicy.Current
	cur.Set(e.policy)
	p, err := New(Options{NodeName: "n1", Store: e.store, RecordDir: filepath.Join(e.dir, "pulled"), API: e.api,
		ReportInterval: 20 * time.Millisecond, Clock: clk, FileRoots: e.fileRoots, Policy: &cur,
		HTTPClient: imagepolicy.NewClient(func() ([]netip.Addr, error) { return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil })})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(p.Close)
	return p
}

// qcow2 returns a qcow2 image of size bytes of random data (so nothing is
// sparse), and its sha256.
func qcow2(t testing.TB, size int) ([]byte, string) {
	t.Helper()
	dir := t.TempDir()
	raw := filepath.Join(dir, "src.raw")
	data := make([]byte, size)
	rand.Read(data)
	if err := os.WriteFile(raw, data, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "img.qcow2")
	if b, err := exec.Command("qemu-img", "convert", "-f", "raw", "-O", "qcow2", raw, out).CombinedOutput(); err != nil {
		t.Fatalf("qemu-img convert: %v\n%s", err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return b, hex.EncodeToString(sum[:])
}

// testImageSize is the virtual size of the tests' images.
const testImageSize = 3 << 20

// servedQCOW2 is a test image (qcow2), its sha256 and the URL a server
// serves it at (server: gets counts the requests).
func servedQCOW2(t *testing.T) (content []byte, sum, url string, gets *atomic.Int32) {
	t.Helper()
	content, sum = qcow2(t, testImageSize)
	srv, gets := server(t, content)
	return content, sum, srv.URL + "/img.qcow2", gets
}

func image(name, url, sum string) *apiv1.Image {
	return &apiv1.Image{
		Metadata: &apiv1.ObjectMeta{Name: name, Uid: "0b9c2f8e-3b1a-4c55-8d7e-2f9a6b1c3d4e"},
		Spec:     &apiv1.ImageSpec{Url: url, Sha256: sum},
	}
}

// server serves content with ranges and an ETag, counting requests.
func server(t testing.TB, content []byte) (*httptest.Server, *atomic.Int32) {
	var gets atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gets.Add(1)
		w.Header().Set("ETag", `"v1"`)
		http.ServeContent(w, r, "img.qcow2", time.Unix(1700000000, 0), bytes.NewReader(content))
	}))
	t.Cleanup(srv.Close)
	return srv, &gets
}

func TestPullVerifiesAndReports(t *testing.T) {
	e := newEnv(t)
	content, sum, url, _ := servedQCOW2(t)
	p := e.puller()
	img := image("debian.qcow2", url, sum)
	if err := p.Ensure(t.Context(), img, nil); err != nil {
		t.Fatal(err)
	}
	got, err := e.store.Inspect(t.Context(), "debian.qcow2")
	if err != nil || got.SHA256 != sum || got.Format != "qcow2" {
		t.Fatalf("image = %+v, %v", got, err)
	}
	last := e.api.last()
	if last.Phase != "Ready" || last.Sha256 != sum || last.Node != "n1" || last.SizeBytes != int64(len(content)) || last.VirtualSizeBytes != testImageSize || last.ImageUid != img.Metadata.Uid {
		t.Fatalf("last report = %v", last)
	}
	if !p.Have(img) {
		t.Fatal("Have = false after the pull")
	}
	other := image("debian.qcow2", url, sum)
	other.Metadata.Uid = "7c1e4a52-9d3b-4f6a-8e2c-1b5d7f9a0c3e"
	if p.Have(other) {
		t.Fatal("Have = true for a re-created Image of the same name")
	}
	recs, err := p.Records()
	if err != nil || recs["debian.qcow2"] != img.Metadata.Uid {
		t.Fatalf("records = %v, %v", recs, err)
	}
}

func TestWrongChecksumLeavesNothing(t *testing.T) {
	e := newEnv(t)
	_, _, url, gets := servedQCOW2(t)
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC))
	p := e.pullerWith(clk)
	wrong := strings.Repeat("0", 64)
	img := image("bad.qcow2", url, wrong)
	err := p.Ensure(t.Context(), img, nil)
	if !errors.Is(err, imagestore.ErrChecksumMismatch) {
		t.Fatalf("err = %v, want a checksum mismatch", err)
	}
	if last := e.api.last(); last.Phase != "Failed" || !strings.Contains(last.Message, "expected "+wrong) || last.Attempts != 1 {
		t.Fatalf("last report = %v", last)
	}
	assertOnlyImages(t, e.store.Dir())

	// Within the backoff nobody fetches again, whoever asks.
	var re *RetryError
	if err := p.Ensure(t.Context(), img, nil); !errors.As(err, &re) || !re.RetryAt.Equal(clk.Now().Add(RetryBase)) || !errors.Is(err, imagestore.ErrChecksumMismatch) {
		t.Fatalf("second Ensure = %v, want the last error until %s", err, clk.Now().Add(RetryBase))
	}
	if st := p.Pull(img); st.Err == nil || st.Done != nil || gets.Load() != 1 {
		t.Fatalf("Pull within the backoff = %+v after %d requests", st, gets.Load())
	}

	// After it, a new attempt says why the last one failed while it runs.
	clk.Step(RetryBase)
	before := len(e.api.reports)
	_ = p.Ensure(t.Context(), img, nil)
	e.api.mu.Lock()
	first := e.api.reports[before]
	e.api.mu.Unlock()
	if gets.Load() != 2 || first.Phase != "Pulling" || first.Attempts != 2 || !strings.Contains(first.Message, "the last failed: ") || !strings.Contains(first.Message, "expected "+wrong) {
		t.Fatalf("retry's first report = %v (%d requests)", first, gets.Load())
	}
	// And the backoff doubles.
	if err := p.Ensure(t.Context(), img, nil); !errors.As(err, &re) || !re.RetryAt.Equal(clk.Now().Add(2*RetryBase)) {
		t.Fatalf("third Ensure = %v, want a retry after %s", err, 2*RetryBase)
	}
}

// assertOnlyImages fails if dir holds anything but the named images.
func assertOnlyImages(t *testing.T, dir string, names ...string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".info.json") {
			got = append(got, e.Name())
		}
	}
	if strings.Join(got, ",") != strings.Join(names, ",") {
		t.Fatalf("image dir holds %q, want %q", got, names)
	}
}

func TestConcurrentEnsuresShareOneDownload(t *testing.T) {
	e := newEnv(t)
	_, sum, url, gets := servedQCOW2(t)
	p := e.puller()
	img := image("shared.qcow2", url, sum)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() { defer wg.Done(); errs <- p.Ensure(t.Context(), img, nil) }()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := gets.Load(); n != 1 {
		t.Fatalf("%d downloads, want 1", n)
	}
}

// TestInterruptedPullResumes stops a pull mid-download, as an agent
// killed then would, and checks that the next puller continues the file
// with a range request instead of starting over, and that nothing was
// visible as an image meanwhile.
func TestInterruptedPullResumes(t *testing.T) {
	e := newEnv(t)
	content, sum := qcow2(t, testImageSize)
	half := int64(len(content) / 2)
	var ranges []string
	var mu sync.Mutex
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		ranges = append(ranges, r.Header.Get("Range"))
		first := len(ranges) == 1
		mu.Unlock()
		w.Header().Set("ETag", `"v1"`)
		if !first {
			http.ServeContent(w, r, "img.qcow2", time.Unix(1700000000, 0), bytes.NewReader(content))
			return
		}
		// The first request sends half, then stalls until the test is
		// done with it.
		w.Header().Set("Content-Length", itoa(len(content)))
		w.WriteHeader(http.StatusOK)
		w.Write(content[:half])
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	defer close(release)

	img := image("resume.qcow2", srv.URL+"/img.qcow2", sum)
	first := e.puller()
	ctx, cancel := context.WithCancel(t.Context())
	watched := make(chan Progress, 100)
	go func() {
		_ = first.Ensure(ctx, img, func(pr Progress) {
			select {
			case watched <- pr:
			default:
			}
		})
	}()
	dl, err := e.store.DownloadPath("resume.qcow2")
	if err != nil {
		t.Fatal(err)
	}
	// Wait until half is on disk and a progress report said so.
	testutil.Eventually(t, 30*time.Second, "half the image downloaded and reported", func() bool {
		fi, err := os.Stat(dl)
		last := e.api.last()
		return err == nil && fi.Size() == half && last != nil && last.BytesDone == half && last.BytesTotal == int64(len(content))
	})
	// The watcher may first hear "connecting" (no size known yet); it
	// must then hear the size.
	deadline := time.After(30 * time.Second)
	for sized := false; !sized; {
		select {
		case pr := <-watched:
			sized = pr.Total == int64(len(content))
		case <-deadline:
			t.Fatal("Ensure's watcher heard no progress with the image's size")
		}
	}
	cancel()
	first.Close()
	assertOnlyImages(t, e.store.Dir(), ".resume.qcow2.tmp-pull", ".resume.qcow2.tmp-pull.json")
	if first.Have(img) {
		t.Fatal("a half download counts as the image")
	}

	second := e.puller()
	if err := second.Ensure(t.Context(), img, nil); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	got := append([]string(nil), ranges...)
	mu.Unlock()
	if len(got) != 2 || got[1] != "bytes="+itoa(int(half))+"-" {
		t.Fatalf("requests' Range headers = %q, want the second to resume at %d", got, half)
	}
	assertOnlyImages(t, e.store.Dir(), "resume.qcow2")
}

func TestAdoptsAndRemoves(t *testing.T) {
	e := newEnv(t)
	content, sum := qcow2(t, testImageSize)
	src := filepath.Join(t.TempDir(), "local.qcow2")
	if err := os.WriteFile(src, content, 0o644); err != nil {
		t.Fatal(err)
	}
	// Imported by hand (an air-gapped node), then named by an Image whose
	// URL this node could not reach: adopted by checksum, no download.
	if _, err := e.store.Import(t.Context(), "airgap.qcow2", src, imagestore.ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	p := e.puller()
	img := image("airgap.qcow2", "http://127.0.0.1:1/unreachable", sum)
	if err := p.Ensure(t.Context(), img, nil); err != nil {
		t.Fatalf("adopt: %v", err)
	}
	if err := p.Remove(t.Context(), "airgap.qcow2", "7c1e4a52-9d3b-4f6a-8e2c-1b5d7f9a0c3e"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.Inspect(t.Context(), "airgap.qcow2"); err != nil {
		t.Fatalf("Remove for another uid removed the image: %v", err)
	}
	if err := p.Remove(t.Context(), "airgap.qcow2", img.Metadata.Uid); err != nil {
		t.Fatal(err)
	}
	assertOnlyImages(t, e.store.Dir())

	// A file:// source is copied, only from where the operator allows.
	fileImg := image("local.qcow2", "file://"+src, sum)
	if err := p.Ensure(t.Context(), fileImg, nil); err == nil || !strings.Contains(err.Error(), "file:// sources are off") {
		t.Fatalf("file:// without roots: %v", err)
	}
	e.fileRoots = []string{t.TempDir()}
	p2 := e.puller()
	shadow := image("shadow.raw", "file:///etc/shadow", "")
	if err := p2.Ensure(t.Context(), shadow, nil); err == nil || !strings.Contains(err.Error(), "outside the directories") {
		t.Fatalf("file:///etc/shadow: %v", err)
	}
	e.fileRoots = []string{filepath.Dir(src)}
	p3 := e.puller()
	if err := p3.Ensure(t.Context(), fileImg, nil); err != nil {
		t.Fatal(err)
	}
	assertOnlyImages(t, e.store.Dir(), "local.qcow2")
}

func TestHTTPErrorIsReported(t *testing.T) {
	e := newEnv(t)
	srv := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(srv.Close)
	p := e.puller()
	err := p.Ensure(t.Context(), image("missing.qcow2", srv.URL+"/nope", ""), nil)
	if err == nil || !strings.Contains(err.Error(), "404 Not Found") {
		t.Fatalf("err = %v", err)
	}
	if last := e.api.last(); last.Phase != "Failed" || !strings.Contains(last.Message, "404") {
		t.Fatalf("last report = %v", last)
	}
	assertOnlyImages(t, e.store.Dir())
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestCompleteButUncommittedDownloadStartsOver: an agent killed between
// the last byte and the commit leaves a download as long as the content;
// resuming it asks for a range past the end (416), so the pull starts
// over instead of failing forever.
func TestCompleteButUncommittedDownloadStartsOver(t *testing.T) {
	e := newEnv(t)
	content, sum, url, gets := servedQCOW2(t)
	img := image("whole.qcow2", url, sum)
	dl, err := e.store.DownloadPath("whole.qcow2")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dl, content, 0o600); err != nil {
		t.Fatal(err)
	}
	ri := `{"imageUID":"` + img.Metadata.Uid + `","url":"` + img.Spec.Url + `","etag":"\"v1\""}`
	if err := os.WriteFile(resumeInfoPath(dl), []byte(ri), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := e.puller().Ensure(t.Context(), img, nil); err != nil {
		t.Fatal(err)
	}
	if n := gets.Load(); n != 2 {
		t.Fatalf("%d requests, want the 416 and a full download", n)
	}
	assertOnlyImages(t, e.store.Dir(), "whole.qcow2")
}
