package client

import (
	"context"
	"crypto/tls"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// namedServer answers Nodes.Get with its own name as the node's name.
type namedServer struct {
	apiv1.UnimplementedNodesServer
	name string
}

func (s namedServer) Get(context.Context, *apiv1.GetNodeRequest) (*apiv1.Node, error) {
	return &apiv1.Node{Metadata: &apiv1.ObjectMeta{Name: s.name}}, nil
}

// A client of several servers uses the first that answers and moves to
// the next when it goes away; calls made after that succeed without the
// caller retrying.
func TestDialSeveralEndpoints(t *testing.T) {
	cert, caFile := selfSigned(t, t.TempDir())
	creds := grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}}))
	var addrs []string
	var servers []*grpc.Server
	for _, name := range []string{"a", "b", "c"} {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := grpc.NewServer(creds)
		apiv1.RegisterNodesServer(srv, namedServer{name: name})
		go func() { _ = srv.Serve(lis) }()
		t.Cleanup(srv.Stop)
		servers = append(servers, srv)
		addrs = append(addrs, "https://"+lis.Addr().String())
	}
	// A listed server that does not run: the client goes past it.
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	dead.Close()

	c := dial(t, Config{Endpoint: deadAddr + ", " + strings.Join(addrs, ","), CAFile: caFile, Token: "tok"})
	answered := func() string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		n, err := c.Nodes.Get(ctx, &apiv1.GetNodeRequest{Name: "x"})
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		return n.GetMetadata().GetName()
	}
	if got := answered(); got != "a" {
		t.Fatalf("first answer from %q, want a (the first live server)", got)
	}
	servers[0].Stop()
	if got := answered(); got != "b" {
		t.Fatalf("after a stopped, answer from %q, want b", got)
	}
	servers[1].Stop()
	if got := answered(); got != "c" {
		t.Fatalf("after b stopped, answer from %q, want c", got)
	}
}

func TestDialEndpointListErrors(t *testing.T) {
	for _, tt := range []struct{ endpoint, want string }{
		{"a:1,,b:2", "entry 2 of 3 is empty"},
		{"a:1,unix:///run/x.sock", "a unix socket reaches one server only"},
		{"a:1,https://a:1", "a:1 is listed twice"},
		{"a:1,http://b:2", "entry 2 of 2"},
	} {
		c, err := Dial(context.Background(), Config{Endpoint: tt.endpoint})
		if err == nil {
			_ = c.Close()
			t.Errorf("Dial(%q) succeeded, want an error", tt.endpoint)
			continue
		}
		if !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Dial(%q): %v, want it to say %q", tt.endpoint, err, tt.want)
		}
	}
}
