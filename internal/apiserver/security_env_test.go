package apiserver

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
	"github.com/virtplane/terraform-provider-virtplane/internal/etcdserver"
	"github.com/virtplane/terraform-provider-virtplane/internal/pki"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// secEnv is an API server as an agent runs it on its TLS listener: real
// etcd, the agent CA, node certificates, the admin token, every limit and
// check; callers are real TLS clients on 127.0.0.1.
type secEnv struct {
	t *testing.T
	// uploadDir is the server's image upload directory.
	uploadDir string
	st        Stores
	srv       *Server
	ca        *pki.CA
	caFile    string
	addr      string
	token     string
	clock     *testClock
	// payloads counts request messages the server read, per method.
	payloads *payloadCounter
	// metrics counts the server's calls and refusals in reg.
	metrics *Metrics
	reg     *prometheus.Registry
}

type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *testClock) Step(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func newSecEnv(t *testing.T, limits Limits) *secEnv {
	t.Helper()
	return newSecEnvWith(t, limits, nil)
}

// newSecEnvWith is newSecEnv with unary interceptors run just before the
// handlers, as the agent adds its quota check.
func newSecEnvWith(t *testing.T, limits Limits, unary []grpc.UnaryServerInterceptor) *secEnv {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	es, err := etcdserver.Start(ctx, etcdserver.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = es.Close() })
	dir := t.TempDir()
	paths := pki.PathsIn(dir)
	if err := pki.Ensure(paths, []string{"127.0.0.1"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	ca, err := pki.LoadCA(paths)
	if err != nil {
		t.Fatal(err)
	}
	token, err := pki.ReadToken(paths.Token)
	if err != nil {
		t.Fatal(err)
	}
	e := &secEnv{t: t, ca: ca, caFile: paths.CACert, token: token, clock: &testClock{now: time.Now()}, payloads: &payloadCounter{n: map[string]int{}}}
	e.st = NewStores(es.Client(), store.Options{Prefix: "/sec/registry"})
	e.reg = prometheus.NewRegistry()
	if e.metrics, err = NewMetrics(e.reg); err != nil {
		t.Fatal(err)
	}
	e.uploadDir = filepath.Join(dir, "uploads")
	e.srv = New(e.st, Options{CA: ca, Clock: e.clock.Now, Limits: limits, NodeCertValidity: time.Hour, Metrics: e.metrics, UploadDir: e.uploadDir})
	go e.srv.Run(ctx)
	kp, err := pki.LoadKeyPair(paths.ServerCert, paths.ServerKey, paths.CACert)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	opts := e.srv.ServerOptions(Listener{Token: func() string { return token }}, unary, nil)
	opts = append(opts, grpc.Creds(credentials.NewTLS(pki.ServerTLSConfig(kp, pool))), grpc.StatsHandler(e.payloads))
	gs := grpc.NewServer(opts...)
	e.srv.Register(gs)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = gs.Serve(l) }()
	t.Cleanup(gs.Stop)
	e.addr = l.Addr().String()
	return e
}

// admin is a client with the bearer token.
func (e *secEnv) admin() *client.Client {
	return e.dial(client.Config{Token: e.token})
}

// anonymous is a TLS client with no credential.
func (e *secEnv) anonymous() *client.Client { return e.dial(client.Config{}) }

func (e *secEnv) dial(cfg client.Config) *client.Client {
	e.t.Helper()
	cfg.Endpoint, cfg.CAFile = e.addr, e.caFile
	c, err := client.Dial(context.Background(), cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = c.Close() })
	return c
}

// joinedNode is a node that joined with a bootstrap token, as
// `node join` does: its client authenticates with the signed certificate.
type joinedNode struct {
	name string
	c    *client.Client
	cert *tls.Certificate
}

func (e *secEnv) join(name string) *joinedNode {
	e.t.Helper()
	ctx := context.Background()
	tok, err := e.admin().Bootstrap.CreateToken(ctx, &apiv1.CreateBootstrapTokenRequest{})
	if err != nil {
		e.t.Fatal(err)
	}
	return e.joinWith(name, tok.Token)
}

func (e *secEnv) joinWith(name, token string) *joinedNode {
	e.t.Helper()
	cert, err := e.tryJoin(name, token)
	if err != nil {
		e.t.Fatalf("join %s: %v", name, err)
	}
	n := &joinedNode{name: name, cert: cert}
	n.c = e.dial(client.Config{ClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert, nil }})
	// The credential cache sees the new record through its watch.
	testutil.EventuallyNoError(e.t, 10*time.Second, "node credential visible to the server", func() error {
		_, err := n.c.Nodes.Get(ctx(), &apiv1.GetNodeRequest{Name: name})
		if err != nil && status.Code(err) != codes.NotFound {
			return err
		}
		return nil
	})
	return n
}

func (e *secEnv) tryJoin(name, token string) (*tls.Certificate, error) {
	nk, err := pki.NewNodeKey(name)
	if err != nil {
		e.t.Fatal(err)
	}
	resp, err := e.anonymous().Bootstrap.Join(ctx(), &apiv1.JoinRequest{Token: token, NodeName: name, CsrPem: nk.CSRPEM})
	if err != nil {
		return nil, err
	}
	pair, err := tlsPair(resp.CertificatePem, nk)
	if err != nil {
		e.t.Fatal(err)
	}
	return pair, nil
}

// ctx bounds each call of the security tests: a call that a broken check
// lets through blocks (a stream nobody writes to) and fails by deadline
// instead of hanging the suite.
func ctx() context.Context {
	c, cancel := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Second, cancel)
	return c
}

// payloadCounter is a stats handler that counts request messages the
// server read in full: a call refused in the tap handle reads none.
type payloadCounter struct {
	mu sync.Mutex
	// n counts the request messages read per method, decodedN those
	// decoded.
	n, decodedN map[string]int
}

type methodKey struct{}

func (p *payloadCounter) TagRPC(ctx context.Context, i *stats.RPCTagInfo) context.Context {
	return context.WithValue(ctx, methodKey{}, i.FullMethodName)
}
func (p *payloadCounter) HandleRPC(ctx context.Context, s stats.RPCStats) {
	if in, ok := s.(*stats.InPayload); ok && !in.IsClient() {
		m, _ := ctx.Value(methodKey{}).(string)
		p.mu.Lock()
		p.n[m]++
		// A message the codec refused is read but left empty.
		if msg, ok := in.Payload.(proto.Message); ok && proto.Size(msg) > 0 {
			if p.decodedN == nil {
				p.decodedN = map[string]int{}
			}
			p.decodedN[m]++
		}
		p.mu.Unlock()
	}
}

// decoded counts the request messages of m the server decoded.
func (p *payloadCounter) decoded(m string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.decodedN[m]
}
func (p *payloadCounter) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context {
	return ctx
}
func (p *payloadCounter) HandleConn(context.Context, stats.ConnStats) {}
func (p *payloadCounter) count(m string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n[m]
}
