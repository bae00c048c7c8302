package client

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// namedServer answers Nodes.Get with its own name as the node's name, or,
// when noQuorum, refuses every call as a server whose etcd lost its
// majority does.
type namedServer struct {
	apiv1.UnimplementedNodesServer
	name     string
	noQuorum bool
}

func (s namedServer) Get(context.Context, *apiv1.GetNodeRequest) (*apiv1.Node, error) {
	if s.noQuorum {
		return nil, status.Error(codes.Unavailable, "no quorum")
	}
	return &apiv1.Node{Metadata: &apiv1.ObjectMeta{Name: s.name}}, nil
}

// startNamed starts one namedServer per name on loopback, with TLS.
func startNamed(t *testing.T, cert tls.Certificate, servers ...namedServer) (addrs []string, stops []func()) {
	t.Helper()
	creds := grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}}))
	for _, ns := range servers {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := grpc.NewServer(creds)
		apiv1.RegisterNodesServer(srv, ns)
		go func() { _ = srv.Serve(lis) }()
		t.Cleanup(srv.Stop)
		stops = append(stops, srv.Stop)
		addrs = append(addrs, "https://"+lis.Addr().String())
	}
	return addrs, stops
}

// answers makes n Gets and counts the servers that answered; any error
// fails the test: the client must hide a lost server from its caller.
func answers(t *testing.T, c *Client, n int) map[string]int {
	t.Helper()
	got := map[string]int{}
	for range n {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		node, err := c.Nodes.Get(ctx, &apiv1.GetNodeRequest{Name: "x"})
		cancel()
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		got[node.GetMetadata().GetName()]++
	}
	return got
}

// A client of several servers spreads calls over those that answer,
// goes past a listed server that never ran, and leaves out one that went
// away; reads made after that succeed without the caller retrying.
func TestDialSeveralEndpoints(t *testing.T) {
	cert, caFile := selfSigned(t, t.TempDir())
	addrs, stops := startNamed(t, cert, namedServer{name: "a"}, namedServer{name: "b"}, namedServer{name: "c"})
	deadAddr := "127.0.0.1:" + strconv.Itoa(testutil.FreePort(t, "tcp"))

	c := dial(t, Config{Endpoint: deadAddr + ", " + strings.Join(addrs, ","), CAFile: caFile, Token: "tok"})
	// round_robin picks among the connected servers only: wait until all
	// three are, as a long-lived client is.
	var got map[string]int
	for deadline := time.Now().Add(10 * time.Second); len(got) < 3 && time.Now().Before(deadline); {
		got = answers(t, c, 6)
	}
	if len(got) != 3 {
		t.Fatalf("answers from %v, want a, b and c", got)
	}
	stops[0]()
	if got := answers(t, c, 6); got["a"] != 0 || got["b"]+got["c"] != 6 {
		t.Fatalf("after a stopped: answers %v", got)
	}
	stops[1]()
	if got := answers(t, c, 4); got["c"] != 4 {
		t.Fatalf("after b stopped: answers %v, want c only", got)
	}
}

// A server that runs but whose etcd lost its majority answers every call
// Unavailable and keeps its connections: reads go on to another server.
func TestEndpointsPassOverServerWithoutQuorum(t *testing.T) {
	cert, caFile := selfSigned(t, t.TempDir())
	addrs, _ := startNamed(t, cert, namedServer{name: "minority", noQuorum: true}, namedServer{name: "majority"})
	c := dial(t, Config{Endpoint: strings.Join(addrs, ","), CAFile: caFile, Token: "tok"})
	if got := answers(t, c, 10); got["majority"] != 10 {
		t.Fatalf("answers %v, want all from majority", got)
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

// Reads of every service are retried on the next server, the replica
// kinds' (another .proto file) included; writes never are.
func TestRetryServiceConfigCoversEveryService(t *testing.T) {
	var cfg struct {
		MethodConfig []struct {
			Name []struct{ Service, Method string } `json:"name"`
		} `json:"methodConfig"`
	}
	if err := json.Unmarshal([]byte(retryServiceConfig()), &cfg); err != nil || len(cfg.MethodConfig) != 1 {
		t.Fatalf("config: %v %+v", err, cfg)
	}
	retried := map[string]bool{}
	for _, n := range cfg.MethodConfig[0].Name {
		retried["/"+n.Service+"/"+n.Method] = true
	}
	for _, m := range []string{
		apiv1.VirtualMachines_Get_FullMethodName, apiv1.ReplicaSets_List_FullMethodName,
		apiv1.Pools_Get_FullMethodName, apiv1.Pools_Watch_FullMethodName,
		apiv1.Namespaces_Get_FullMethodName, apiv1.Auth_WhoAmI_FullMethodName, apiv1.Auth_CanI_FullMethodName,
		apiv1.Audit_Read_FullMethodName,
	} {
		if !retried[m] {
			t.Errorf("%s is not retried", m)
		}
	}
	for _, m := range []string{apiv1.VirtualMachines_Create_FullMethodName, apiv1.ReplicaSets_Scale_FullMethodName, apiv1.Pools_Delete_FullMethodName,
		apiv1.Credentials_IssueToken_FullMethodName, apiv1.Credentials_Revoke_FullMethodName} {
		if retried[m] {
			t.Errorf("%s, a write, is retried", m)
		}
	}
}
