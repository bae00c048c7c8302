package client

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// echoServer answers Nodes.Get with the authorization header it received,
// stored as the node's "authorization" label.
type echoServer struct {
	apiv1.UnimplementedNodesServer
}

func (echoServer) Get(ctx context.Context, req *apiv1.GetNodeRequest) (*apiv1.Node, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	labels := map[string]string{}
	if v := md.Get("authorization"); len(v) > 0 {
		labels["authorization"] = v[0]
	}
	return &apiv1.Node{Metadata: &apiv1.ObjectMeta{Name: req.GetName(), Labels: labels}}, nil
}

func serve(t *testing.T, lis net.Listener, opts ...grpc.ServerOption) {
	t.Helper()
	srv := grpc.NewServer(opts...)
	apiv1.RegisterNodesServer(srv, echoServer{})
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
}

func getNode(t *testing.T, c *Client) (*apiv1.Node, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return c.Nodes.Get(ctx, &apiv1.GetNodeRequest{Name: "n1"})
}

func dial(t *testing.T, cfg Config) *Client {
	t.Helper()
	c, err := Dial(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Dial(%+v): %v", cfg, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestDialUnix(t *testing.T) {
	sock := filepath.Join(testutil.ShortTempDir(t), "agent.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	serve(t, lis)

	for _, endpoint := range []string{"unix://" + sock, sock} {
		t.Run(endpoint, func(t *testing.T) {
			// A token and a missing token file are irrelevant on the socket:
			// nothing is read and nothing is sent.
			c := dial(t, Config{Endpoint: endpoint, Token: "secret", TokenFile: "/nonexistent"})
			node, err := getNode(t, c)
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			if got := node.GetMetadata().GetLabels()["authorization"]; got != "" {
				t.Errorf("token sent over the unix socket: %q", got)
			}
		})
	}
}

// selfSigned writes a certificate for 127.0.0.1 to dir/ca.pem and returns
// it as a server certificate.
func selfSigned(t *testing.T, dir string) (tls.Certificate, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "virtplane-test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, caFile
}

func TestDialTLS(t *testing.T) {
	dir := t.TempDir()
	cert, caFile := selfSigned(t, dir)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serve(t, lis, grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}})))
	addr := lis.Addr().String()

	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("  file-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"token", Config{Endpoint: "https://" + addr, Token: "tok", CAFile: caFile}, "Bearer tok"},
		{"token file, bare host:port", Config{Endpoint: addr, TokenFile: tokenFile, CAFile: caFile}, "Bearer file-token"},
		{"token wins over file", Config{Endpoint: addr, Token: "tok", TokenFile: tokenFile, CAFile: caFile}, "Bearer tok"},
		{"no token", Config{Endpoint: addr, CAFile: caFile}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			node, err := getNode(t, dial(t, tt.cfg))
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			if got := node.GetMetadata().GetLabels()["authorization"]; got != tt.want {
				t.Errorf("authorization = %q, want %q", got, tt.want)
			}
		})
	}

	t.Run("system roots reject self-signed", func(t *testing.T) {
		_, err := getNode(t, dial(t, Config{Endpoint: addr, Token: "tok"}))
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("Get with system roots: %v, want Unavailable", err)
		}
	})
}

func TestDialErrors(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	notPEM := filepath.Join(dir, "not.pem")
	for f, content := range map[string]string{empty: " \n", notPEM: "hello"} {
		if err := os.WriteFile(f, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	missing := filepath.Join(dir, "missing")

	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"missing CA file", Config{Endpoint: "h:1", CAFile: missing}, missing},
		{"CA file without PEM", Config{Endpoint: "h:1", CAFile: notPEM}, notPEM},
		{"missing token file", Config{Endpoint: "h:1", TokenFile: missing}, missing},
		{"empty token file", Config{Endpoint: "h:1", TokenFile: empty}, "empty"},
		{"no port", Config{Endpoint: "https://agent.example"}, "host:port"},
		{"relative socket", Config{Endpoint: "unix://agent.sock"}, "absolute"},
		{"plain http", Config{Endpoint: "http://h:1"}, "https://"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Dial(context.Background(), tt.cfg)
			if err == nil {
				_ = c.Close()
				t.Fatalf("Dial(%+v) succeeded, want error", tt.cfg)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not mention %q", err, tt.want)
			}
		})
	}
}

func TestParseEndpoint(t *testing.T) {
	tests := []struct {
		in     string
		target string
		secure bool
	}{
		{"", "unix:///run/virtplane/agent.sock", false},
		{"unix:///tmp/a.sock", "unix:///tmp/a.sock", false},
		{"/tmp/a.sock", "unix:///tmp/a.sock", false},
		{"agent:7443", "dns:///agent:7443", true},
		{"https://agent:7443/", "dns:///agent:7443", true},
		{"https://[::1]:7443", "dns:///[::1]:7443", true},
	}
	for _, tt := range tests {
		target, secure, err := parseEndpoint(tt.in)
		if err != nil || target != tt.target || secure != tt.secure {
			t.Errorf("parseEndpoint(%q) = %q, %v, %v; want %q, %v", tt.in, target, secure, err, tt.target, tt.secure)
		}
	}
}

func TestConfigFromEnv(t *testing.T) {
	t.Setenv(EnvEndpoint, "agent:7443")
	t.Setenv(EnvToken, "tok")
	t.Setenv(EnvTokenFile, "/tok")
	t.Setenv(EnvCAFile, "/ca.pem")
	want := Config{Endpoint: "agent:7443", Token: "tok", TokenFile: "/tok", CAFile: "/ca.pem"}
	if got := ConfigFromEnv(); !reflect.DeepEqual(got, want) {
		t.Errorf("ConfigFromEnv() = %+v, want %+v", got, want)
	}
}

// EachEvent ends quietly when the server ends the stream, and passes on
// the stream's and fn's errors.
func TestEachEvent(t *testing.T) {
	boom, stop := errors.New("boom"), errors.New("stop")
	for _, c := range []struct {
		name  string
		recv  []error // the error of each Recv; nil delivers event i
		fnErr error   // returned by fn for the second event
		want  error
		seen  int
	}{
		{"server ends it", []error{nil, nil, io.EOF}, nil, nil, 2},
		{"stream fails", []error{nil, boom}, nil, boom, 1},
		{"fn stops it", []error{nil, nil, nil}, stop, stop, 2},
	} {
		s := &fakeStream{errs: c.recv}
		seen := 0
		err := EachEvent[int](s, func(int) error {
			seen++
			if seen == 2 {
				return c.fnErr
			}
			return nil
		})
		if !errors.Is(err, c.want) || (c.want == nil && err != nil) || seen != c.seen {
			t.Errorf("%s: %v after %d events, want %v after %d", c.name, err, seen, c.want, c.seen)
		}
	}
}

type fakeStream struct {
	errs []error
	i    int
}

func (f *fakeStream) Recv() (int, error) {
	err := f.errs[f.i]
	f.i++
	return f.i, err
}
