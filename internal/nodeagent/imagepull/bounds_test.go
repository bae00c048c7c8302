package imagepull

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/virtplane/terraform-provider-virtplane/internal/imagepolicy"
	"github.com/virtplane/terraform-provider-virtplane/internal/imagestore"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// handlerServer serves h on 127.0.0.1, counting requests.
func handlerServer(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { n.Add(1); h(w, r) }))
	t.Cleanup(srv.Close)
	return srv, &n
}

// endless streams a body without Content-Length until the client goes
// (or 1 GiB, so that a puller without bounds ends too).
func endless(w http.ResponseWriter, r *http.Request) {
	block := make([]byte, 64<<10)
	for i := range block {
		block[i] = byte(i)
	}
	for sent := 0; sent < 1<<30 && r.Context().Err() == nil; sent += len(block) {
		if _, err := w.Write(block); err != nil {
			return
		}
	}
}

func wantPermanent(t *testing.T, err error, msg string) {
	t.Helper()
	var perm *PermanentError
	if !errors.As(err, &perm) || !strings.Contains(err.Error(), msg) {
		t.Fatalf("err = %v, want a PermanentError saying %q", err, msg)
	}
}

// TestEndlessSourceStopsAtMaxSize: a source with no Content-Length that
// never ends is stopped one byte past max_size; nothing is left (no
// download, no resume record); the node does not download it again
// while the bounds stay, and does once max_size changes.
func TestEndlessSourceStopsAtMaxSize(t *testing.T) {
	e := newEnv(t)
	srv, gets := handlerServer(t, endless)
	p := e.puller()
	img := image("endless.raw", srv.URL+"/endless", "")
	img.Spec.MaxSize = "4Mi"
	err := p.Ensure(t.Context(), img, nil)
	wantPermanent(t, err, "refused: the source sent more than max_size 4Mi")
	assertOnlyImages(t, e.store.Dir())
	last := e.api.last()
	if last.Phase != "Failed" || !strings.Contains(last.Message, "max_size 4Mi") || last.BytesDone > 4<<20+64<<10 {
		t.Fatalf("last report = %v", last)
	}
	for range 3 {
		if err := p.Ensure(t.Context(), img, nil); !errors.As(err, new(*PermanentError)) {
			t.Fatalf("again: %v", err)
		}
		if st := p.Pull(img); !errors.As(st.Err, new(*PermanentError)) || !st.RetryAt.IsZero() || st.Done != nil {
			t.Fatalf("Pull = %+v, want the permanent failure", st)
		}
	}
	if n := gets.Load(); n != 1 {
		t.Fatalf("%d requests, want 1: a refused image is not downloaded again", n)
	}
	img.Spec.MaxSize = "5Mi"
	wantPermanent(t, p.Ensure(t.Context(), img, nil), "max_size 5Mi")
	if n := gets.Load(); n != 2 {
		t.Fatalf("%d requests after max_size changed, want 2", n)
	}
}

// TestContentLengthAboveMaxSize: a Content-Length above max_size is
// refused before a byte is written; an Image without max_size gets the
// policy's default, and one above the cap is held to the cap.
func TestContentLengthAboveMaxSize(t *testing.T) {
	e := newEnv(t)
	content, sum, url, _ := servedQCOW2(t)
	e.policy.DefaultMaxSize, e.policy.MaxSizeCap = int64(len(content))-1, int64(len(content))
	p := e.puller()
	wantPermanent(t, p.Ensure(t.Context(), image("big.qcow2", url, sum), nil), "the source says the image has")
	assertOnlyImages(t, e.store.Dir())
	over := image("over.qcow2", url, sum)
	over.Spec.MaxSize = "1Ti" // written before the cap was lowered
	if err := p.Ensure(t.Context(), over, nil); err != nil {
		t.Fatalf("at the cap: %v", err)
	}
	capped := image("capped.qcow2", url, sum)
	capped.Spec.MaxSize = "1Ti"
	e.policy.MaxSizeCap = int64(len(content)) - 1
	wantPermanent(t, e.puller().Ensure(t.Context(), capped, nil), "more than max_size")
}

// stallServer sends first bytes of a body it says is size long, then
// waits for the client to go; got counts the requests.
func stallServer(t *testing.T, first, size int) (*httptest.Server, *atomic.Int32) {
	return handlerServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", itoa(size))
		w.Header().Set("ETag", `"v1"`)
		w.WriteHeader(http.StatusOK)
		w.Write(make([]byte, first))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
}

// pullOnFakeClock starts pulling img on a puller with clock clk and
// waits until first bytes are on disk.
func pullOnFakeClock(t *testing.T, e *env, clk *clocktesting.FakeClock, name, url string, first int64) (*Puller, chan error) {
	t.Helper()
	p := e.pullerWith(clk)
	img := image(name, url, "")
	done := make(chan error, 1)
	go func() { done <- p.Ensure(t.Context(), img, nil) }()
	dl, err := e.store.DownloadPath(name)
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, "the first bytes on disk", func() bool {
		fi, err := os.Stat(dl)
		return err == nil && fi.Size() == first
	})
	return p, done
}

func waitErr(t *testing.T, done chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("the pull did not stop")
		return nil
	}
}

// TestDeadline: on the puller's clock, a download still running when
// the policy's timeout is up is stopped, for good, and leaves nothing.
func TestDeadline(t *testing.T) {
	e := newEnv(t)
	e.policy.Timeout, e.policy.MinSpeed, e.policy.MinSpeedTime = 10*time.Minute, 1, 24*time.Hour
	srv, gets := stallServer(t, 1000, 1<<20)
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC))
	_, done := pullOnFakeClock(t, e, clk, "late.raw", srv.URL+"/late", 1000)
	// One step: a ticker of the fake clock drops a tick its reader has
	// not taken yet. TestCheckProgress holds the rule to the second.
	clk.Step(10 * time.Minute)
	wantPermanent(t, waitErr(t, done), "refused: the download took longer than 10m0s")
	assertOnlyImages(t, e.store.Dir())
	if gets.Load() != 1 {
		t.Fatalf("%d requests", gets.Load())
	}
}

// TestStallStopsAndResumes: a download that gets fewer than the minimum
// bytes a second over the window is stopped; unlike a bound, that is
// retried with the backoff, and what arrived is kept for the resume.
func TestStallStopsAndResumes(t *testing.T) {
	e := newEnv(t)
	e.policy.MinSpeed, e.policy.MinSpeedTime = 1024, time.Minute
	srv, _ := stallServer(t, 1000, 1<<20)
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC))
	p, done := pullOnFakeClock(t, e, clk, "slow.raw", srv.URL+"/slow", 1000)
	clk.Step(61 * time.Second) // one step, as in TestDeadline
	err := waitErr(t, done)
	if err == nil || errors.As(err, new(*PermanentError)) || !strings.Contains(err.Error(), "less than 1Ki a second") ||
		!strings.Contains(err.Error(), "got 1000 bytes in the last 1m1s") {
		t.Fatalf("err = %v, want a stop for speed that is not permanent", err)
	}
	assertOnlyImages(t, e.store.Dir(), ".slow.raw.tmp-pull", ".slow.raw.tmp-pull.json")
	if st := p.Pull(image("slow.raw", srv.URL+"/slow", "")); errors.As(st.Err, new(*PermanentError)) || st.RetryAt.IsZero() {
		t.Fatalf("Pull = %+v, want the backoff", st)
	}
}

// TestVirtualSizeAboveCap: a 7 MiB qcow2 claiming 64 PiB is refused
// after the download, before it is kept, for good.
func TestVirtualSizeAboveCap(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	huge := filepath.Join(dir, "huge.qcow2")
	if out, err := exec.Command("qemu-img", "create", "-q", "-f", "qcow2", "-o", "cluster_size=2M", huge, "64P").CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	srv := httptest.NewServer(http.FileServer(http.Dir(dir)))
	t.Cleanup(srv.Close)
	err := e.puller().Ensure(t.Context(), image("huge.qcow2", srv.URL+"/huge.qcow2", ""), nil)
	wantPermanent(t, err, "virtual size is 64Pi")
	if !errors.Is(err, imagestore.ErrTooLarge) || !strings.Contains(err.Error(), "--image-max-virtual-size") {
		t.Fatalf("err = %v", err)
	}
	assertOnlyImages(t, e.store.Dir())
}

// rawServer answers every connection on 127.0.0.1 with response, as is.
func rawServer(t *testing.T, response string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil || line == "\r\n" {
						break
					}
				}
				c.Write([]byte(response))
			}()
		}
	}()
	return "http://" + l.Addr().String()
}

// TestStatusQuotesNothingServed: what a server sends (an error body, the
// reason phrase of its status line, a banner that is no HTTP) never
// reaches the Image's status; the code and the node's own words do.
func TestStatusQuotesNothingServed(t *testing.T) {
	e := newEnv(t)
	p := e.puller()
	for _, tc := range []struct {
		name, response, want string
	}{
		{"body.raw", "HTTP/1.1 403 Forbidden\r\nContent-Length: 22\r\n\r\nSECRET-TOKEN-abc123xyz", "HTTP 403 Forbidden"},
		{"reason.raw", "HTTP/1.1 500 SECRET-TOKEN-abc123xyz\r\nContent-Length: 0\r\n\r\n", "HTTP 500 Internal Server Error"},
		{"banner.raw", "SSH-2.0-SECRET-TOKEN-abc123xyz\r\n", "the download failed (the node agent's log has the cause)"},
	} {
		url := rawServer(t, tc.response)
		err := p.Ensure(t.Context(), image(tc.name, url+"/x", ""), nil)
		last := e.api.last()
		if err == nil || strings.Contains(err.Error(), "SECRET") || strings.Contains(last.GetMessage(), "SECRET") ||
			!strings.Contains(last.GetMessage(), tc.want) || !strings.HasPrefix(last.GetMessage(), url+"/x: ") {
			t.Errorf("%s: err %v, message %q; want %q and nothing served", tc.name, err, last.GetMessage(), tc.want)
		}
	}
}

// TestRefusedDestination: with the default policy a loopback source is
// refused at connect time: it sees no request, and the status says what
// was refused and how to allow it. Without a policy nothing is pulled.
func TestRefusedDestination(t *testing.T) {
	e := newEnv(t)
	srv, gets := handlerServer(t, func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "SECRET", http.StatusForbidden)
	})
	e.policy.SourceCIDRs = nil
	p := e.puller()
	err := p.Ensure(t.Context(), image("internal.raw", srv.URL+"/latest/meta-data", ""), nil)
	var re *imagepolicy.RefusedError
	if !errors.As(err, &re) || re.Addr != netip.MustParseAddr("127.0.0.1") || gets.Load() != 0 {
		t.Fatalf("err = %v after %d requests, want refused at connect time", err, gets.Load())
	}
	want := "refused: 127.0.0.1 is a loopback address; allow it with --image-source-cidrs"
	if msg := e.api.last().GetMessage(); !strings.HasSuffix(msg, want) || strings.Contains(msg, "SECRET") {
		t.Fatalf("message %q, want it to end %q", msg, want)
	}

	var none imagepolicy.Current
	q, err := New(Options{NodeName: "n1", Store: e.store, RecordDir: filepath.Join(e.dir, "pulled2"), API: e.api, Policy: &none})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if st := q.Pull(image("internal.raw", srv.URL+"/x", "")); !errors.Is(st.Err, errNoPolicy) || st.RetryAt.IsZero() || st.Done != nil {
		t.Fatalf("Pull without a policy = %+v", st)
	}
	if gets.Load() != 0 {
		t.Fatal("a puller without a policy connected")
	}
}

// TestCheckProgress is the deadline and speed rule on its own: samples
// a second apart, a window of 10 s at 100 bytes a second.
func TestCheckProgress(t *testing.T) {
	pol := imagepolicy.Policy{Timeout: time.Hour, MinSpeed: 100, MinSpeedTime: 10 * time.Second}
	start := time.Unix(1000, 0)
	var samples []speedSample
	samples = append(samples, speedSample{start, 0})
	bytes := int64(0)
	for i := 1; i <= 30; i++ {
		bytes += 150 // above the minimum
		if err := checkProgress(pol, start, start.Add(time.Duration(i)*time.Second), bytes, &samples); err != nil {
			t.Fatalf("second %d: %v", i, err)
		}
	}
	if len(samples) > 12 {
		t.Fatalf("%d samples kept, want a window's", len(samples))
	}
	// Stalled from second 31: the window still holds bytes that came
	// before, and falls below 1000 bytes at second 34 (4500-3600).
	for i := 31; i < 40; i++ {
		err := checkProgress(pol, start, start.Add(time.Duration(i)*time.Second), bytes, &samples)
		switch {
		case i < 34 && err != nil:
			t.Fatalf("second %d: stopped early: %v", i, err)
		case i == 34 && (err == nil || !strings.Contains(err.Error(), "got 900 bytes in the last 10s")):
			t.Fatalf("second 34: %v, want a stop", err)
		case i == 34:
			if err := checkProgress(pol, start, start.Add(time.Hour), bytes, &samples); err == nil || !strings.Contains(err.Error(), "longer than 1h0m0s") {
				t.Fatalf("at the deadline: %v", err)
			}
			return
		}
	}
}
