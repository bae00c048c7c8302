package imagepolicy

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
)

// listenOn serves h on addr (an IP), counting requests.
func listenOn(t *testing.T, ip string, h http.HandlerFunc) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	l, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Skipf("cannot listen on %s: %v", ip, err)
	}
	var n atomic.Int32
	srv := &httptest.Server{Listener: l, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		h(w, r)
	})}}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &n
}

func get(ctx context.Context, c *http.Client, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

func mustPolicy(t *testing.T, cidrs ...string) Policy {
	t.Helper()
	p := Default()
	var err error
	if p.SourceCIDRs, err = ParseCIDRs(cidrs); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestClientRefusesAtEveryHop: with only 127.0.0.2 allowed, a source
// there is fetched, its redirect to 127.0.0.1 is refused when the
// connection is made (the service there sees no request), a name that
// resolves to loopback is refused like the address, and a request that
// carries no policy connects nowhere.
func TestClientRefusesAtEveryHop(t *testing.T) {
	internal, internalHits := listenOn(t, "127.0.0.1", func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "SECRET")
	})
	source, sourceHits := listenOn(t, "127.0.0.2", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/redirect" {
			http.Redirect(w, r, internal.URL+"/latest/meta-data", http.StatusFound)
			return
		}
		io.WriteString(w, "image")
	})
	c := NewClient(func() ([]netip.Addr, error) { return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil })
	ctx := WithPolicy(t.Context(), mustPolicy(t, "127.0.0.2/32"))

	if body, err := get(ctx, c, source.URL+"/img"); err != nil || body != "image" {
		t.Fatalf("allowed source: %q, %v", body, err)
	}
	_, err := get(ctx, c, source.URL+"/redirect")
	var re *RefusedError
	if !errors.As(err, &re) || re.Addr != netip.MustParseAddr("127.0.0.1") {
		t.Fatalf("redirect to 127.0.0.1: %v, want a RefusedError for 127.0.0.1", err)
	}
	if sourceHits.Load() != 2 || internalHits.Load() != 0 {
		t.Fatalf("requests: source %d (want 2), internal service %d (want 0)", sourceHits.Load(), internalHits.Load())
	}
	_, port, _ := net.SplitHostPort(internal.Listener.Addr().String())
	if _, err := get(ctx, c, "http://localhost:"+port+"/"); !errors.As(err, &re) || internalHits.Load() != 0 {
		t.Fatalf("localhost: %v (%d requests), want refused", err, internalHits.Load())
	}
	if _, err := get(t.Context(), c, source.URL+"/img"); !errors.Is(err, ErrNoPolicy) {
		t.Fatalf("no policy: %v, want ErrNoPolicy", err)
	}
}

// TestClientIgnoresProxyAndOtherSchemes: HTTP_PROXY is not used (the
// proxy would be the address checked, not the source), and a redirect
// to another scheme is not followed.
func TestClientIgnoresProxyAndOtherSchemes(t *testing.T) {
	proxy, proxyHits := listenOn(t, "127.0.0.3", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "via proxy") })
	t.Setenv("HTTP_PROXY", proxy.URL)
	t.Setenv("http_proxy", proxy.URL)
	source, _ := listenOn(t, "127.0.0.2", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/file" {
			http.Redirect(w, r, "file:///etc/shadow", http.StatusFound)
			return
		}
		io.WriteString(w, "direct")
	})
	c := NewClient(func() ([]netip.Addr, error) { return nil, nil })
	ctx := WithPolicy(t.Context(), mustPolicy(t, "127.0.0.2/32", "127.0.0.3/32"))
	if body, err := get(ctx, c, source.URL+"/"); err != nil || body != "direct" || proxyHits.Load() != 0 {
		t.Fatalf("got %q, %v (%d proxy requests), want a direct download", body, err, proxyHits.Load())
	}
	var se *SchemeError
	if _, err := get(ctx, c, source.URL+"/file"); !errors.As(err, &se) || !strings.Contains(err.Error(), `"file"`) {
		t.Fatalf("redirect to file://: %v, want a SchemeError", err)
	}
}
