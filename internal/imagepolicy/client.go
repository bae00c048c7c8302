package imagepolicy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"
)

// The client nodes download images with. The policy is applied where the
// connection is made: the dialer's control hook sees the address the
// socket is about to connect to, after DNS resolution, for the first
// request and for every redirect, so neither a redirect nor a name that
// resolves differently the second time (DNS rebinding) reaches an
// address the policy refuses. There is no proxy (Transport.Proxy is nil,
// HTTP_PROXY and the like are ignored): a proxy would make the
// connection the hook sees the proxy's, and the image source's address
// would never be checked.

type policyKey struct{}

// WithPolicy returns ctx carrying the policy its downloads are held to.
// A request without one connects nowhere.
func WithPolicy(ctx context.Context, p Policy) context.Context {
	return context.WithValue(ctx, policyKey{}, p)
}

func policyFrom(ctx context.Context) (Policy, bool) {
	p, ok := ctx.Value(policyKey{}).(Policy)
	return p, ok
}

// OwnAddrs lists the node's own addresses.
type OwnAddrs func() ([]netip.Addr, error)

// interfaceAddrs is OwnAddrs of the host's (the network namespace's)
// interfaces, read at each connection: addresses come and go, and one
// listing per connection is little beside a download.
func interfaceAddrs() ([]netip.Addr, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	out := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok {
				out = append(out, ip.Unmap())
			}
		}
	}
	return out, nil
}

// ErrNoPolicy: a download was started without a policy (WithPolicy).
var ErrNoPolicy = errors.New("no image pull policy: the node has not received the server's yet")

// SchemeError is a redirect to a scheme other than http and https.
type SchemeError struct{ Scheme string }

func (e *SchemeError) Error() string {
	return fmt.Sprintf("refused: a redirect to a %q URL (only http and https are followed)", e.Scheme)
}

// maxRedirects is what browsers and curl allow, about.
const maxRedirects = 10

// NewClient returns the HTTP client of image downloads: each connection
// is checked by Policy.Check under the policy of its request's context,
// with own as the node's addresses (nil: the host's interfaces'). Connections are
// not kept for another request, which could be held to another policy.
func NewClient(own OwnAddrs) *http.Client {
	if own == nil {
		own = interfaceAddrs
	}
	d := &net.Dialer{
		Timeout: 30 * time.Second, KeepAlive: 30 * time.Second,
		ControlContext: func(ctx context.Context, network, address string, _ syscall.RawConn) error {
			return control(ctx, network, address, own)
		},
	}
	t := &http.Transport{
		Proxy:                  nil,
		DialContext:            d.DialContext,
		ForceAttemptHTTP2:      true,
		TLSHandshakeTimeout:    10 * time.Second,
		ResponseHeaderTimeout:  time.Minute,
		ExpectContinueTimeout:  time.Second,
		DisableKeepAlives:      true,
		MaxResponseHeaderBytes: 64 << 10,
		// Bytes as they come: a gzip body inflated by the transport
		// would be counted against a download's bound after inflating.
		DisableCompression: true,
	}
	return &http.Client{Transport: t, CheckRedirect: checkRedirect}
}

// control is the dialer's hook: address is the IP and port the socket
// is about to connect to.
func control(ctx context.Context, network, address string, own OwnAddrs) error {
	p, ok := policyFrom(ctx)
	if !ok {
		return ErrNoPolicy
	}
	switch network {
	case "tcp4", "tcp6":
	default:
		return fmt.Errorf("refused: network %q", network)
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("refused: %q is not an IP address and port: %w", address, err)
	}
	addrs, err := own()
	if err != nil {
		// Without them the node's own addresses cannot be told apart.
		return fmt.Errorf("refused: listing this node's addresses: %w", err)
	}
	return p.Check(ap.Addr(), addrs)
}

// checkRedirect follows http and https redirects only; where they lead
// is the dialer's to check.
func checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= maxRedirects {
		return fmt.Errorf("refused: more than %d redirects", maxRedirects)
	}
	switch req.URL.Scheme {
	case "http", "https":
		return nil
	}
	return &SchemeError{Scheme: req.URL.Scheme}
}
