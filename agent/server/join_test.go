package server

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	clocktesting "k8s.io/utils/clock/testing"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/fake"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent"
	"github.com/virtplane/terraform-provider-virtplane/internal/pki"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

type noDomains struct{}

func (noDomains) Probe(context.Context, string) (launcher.ProbeResult, error) {
	return launcher.ProbeResult{LibvirtVersion: "9.0.0", QEMUVersion: "7.2.0", Hostname: "n1"}, nil
}
func (noDomains) ListDomains(context.Context, string) ([]launcher.DomainInfo, error) { return nil, nil }
func (noDomains) ListNetworks(context.Context, string) ([]launcher.NetworkInfo, error) {
	return nil, nil
}

// A role-node agent with only a bootstrap token joins over TLS, registers
// by its certificate, renews it at two thirds of its life (on its clock)
// and goes on with the new one; the admin token is refused to it.
func TestNodeRoleJoinsAndRenews(t *testing.T) {
	srv := startAgent(t, Options{Role: RoleServer, Listen: "127.0.0.1:0", NoControllers: true, NodeCertValidity: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, err := client.Dial(ctx, client.Config{Endpoint: "unix://" + srv.opts.Socket})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	tok, err := admin.Bootstrap.CreateToken(ctx, &apiv1.CreateBootstrapTokenRequest{NodeName: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	endpoint := "https://" + srv.TCPAddr().String()

	dir := testutil.ShortTempDir(t)
	nodeOpts := func(n *NodeOptions) Options {
		n.Launchers, n.Tools = fake.New(), noDomains{}
		n.Host = &nodeagent.HostFacts{Hostname: "n1", CPUs: 2, MemoryBytes: 4 << 30, KernelVersion: "6.1.0", Architecture: "amd64"}
		return Options{Role: RoleNode, NodeName: "n1", DataDir: filepath.Join(dir, "node"), Socket: filepath.Join(dir, "n.sock"),
			ImageDir: filepath.Join(dir, "images"), Node: n}
	}
	// The admin token is not a node's credential.
	bad := &NodeOptions{Server: client.Config{Endpoint: endpoint, TokenFile: filepath.Join(srv.opts.DataDir, "pki", "token")}}
	if _, err := Start(ctx, nodeOpts(bad)); err == nil {
		t.Fatal("a node agent started with the admin token")
	}
	// Without a pin or CA file, no join: the token would go to whoever answers.
	unpinned := &NodeOptions{Server: client.Config{Endpoint: endpoint}, JoinToken: tok.Token}
	if _, err := Start(ctx, nodeOpts(unpinned)); err == nil {
		t.Fatal("joined without a way to authenticate the server")
	}

	clk := clocktesting.NewFakeClock(time.Now())
	n := &NodeOptions{Server: client.Config{Endpoint: endpoint}, JoinToken: tok.Token, JoinCAHash: tok.CaCertHash, Clock: clk}
	startAgent(t, nodeOpts(n))
	testutil.EventuallyNoError(t, 30*time.Second, "node n1 registered", func() error {
		_, err := admin.Nodes.Get(ctx, &apiv1.GetNodeRequest{Name: "n1"})
		return err
	})
	id := pki.IdentityDir(filepath.Join(dir, "node"))
	first, err := pki.LoadKeyPair(id.PairFile(), id.PairFile())
	if err != nil {
		t.Fatal(err)
	}
	cred := func() []*apiv1.NodeCertificate {
		nc, err := newStores(srv.client, srv.opts.EtcdPrefix, nil).NodeCredentials.Get(ctx, "", "n1")
		if err != nil {
			t.Fatal(err)
		}
		return nc.Certificates
	}
	if c := cred(); len(c) != 1 || c[0].Serial != pki.SerialHex(first.Leaf()) {
		t.Fatalf("credential %v, want the joined certificate", c)
	}
	// Two thirds into its life the node renews with a new key.
	testutil.Eventually(t, 10*time.Second, "the renewal timer set", func() bool { return clk.HasWaiters() })
	clk.SetTime(pki.RenewAt(first.Leaf()).Add(time.Second))
	testutil.Eventually(t, 30*time.Second, "the certificate renewed", func() bool {
		kp, err := pki.LoadKeyPair(id.PairFile(), id.PairFile())
		return err == nil && pki.SerialHex(kp.Leaf()) != pki.SerialHex(first.Leaf())
	})
	if c := cred(); len(c) != 2 {
		t.Fatalf("credential after renewal %v, want the old and the new certificate", c)
	}
	// Revocation removes the record (the API tests show the cut-off).
	if _, err := admin.Nodes.Revoke(ctx, &apiv1.RevokeNodeRequest{Name: "n1"}); err != nil {
		t.Fatal(err)
	}
	_, err = admin.Nodes.Revoke(ctx, &apiv1.RevokeNodeRequest{Name: "n1"})
	if status.Code(err) != codes.NotFound {
		t.Fatalf("revoking twice: %v", err)
	}
}
