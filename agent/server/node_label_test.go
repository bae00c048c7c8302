package server

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/fake"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent"
	"github.com/virtplane/terraform-provider-virtplane/internal/pki"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// Issue 33, defect 5, end to end: two node agents join over TLS with
// bootstrap tokens. One, compromised, registers with its certificate as
// tier=secure to draw the VMs that select that label (and their
// cloud-init secrets): refused, so the VM waits. An admin labels the other
// node tier=secure and the VM goes there, and only there; that node's
// heartbeats and registrations keep the label, and it can neither change
// nor remove it.
func TestNodeCannotLabelItselfIntoPlacement(t *testing.T) {
	srv := startAgent(t, Options{Role: RoleServer, Listen: "127.0.0.1:0", LeaderElect: true, NodeCertValidity: time.Hour,
		NodeLease: 10 * time.Second, HeartbeatInterval: time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin, err := client.Dial(ctx, client.Config{Endpoint: "unix://" + srv.opts.Socket})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	endpoint := "https://" + srv.TCPAddr().String()

	// join starts a role-node agent that joins with a token and returns a
	// client that authenticates with the certificate it got, as the agent
	// does.
	join := func(name string) *client.Client {
		tok, err := admin.Bootstrap.CreateToken(ctx, &apiv1.CreateBootstrapTokenRequest{NodeName: name})
		if err != nil {
			t.Fatal(err)
		}
		dir := testutil.ShortTempDir(t)
		startAgent(t, Options{Role: RoleNode, NodeName: name, DataDir: filepath.Join(dir, "node"), Socket: filepath.Join(dir, "n.sock"),
			ImageDir: filepath.Join(dir, "images"), HeartbeatInterval: time.Second, NodeLease: 10 * time.Second,
			Node: &NodeOptions{
				Server: client.Config{Endpoint: endpoint}, JoinToken: tok.Token, JoinCAHash: tok.CaCertHash,
				Launchers: fake.New(), Tools: noDomains{},
				Host: &nodeagent.HostFacts{Hostname: name, CPUs: 2, MemoryBytes: 4 << 30, KernelVersion: "6.1.0", Architecture: "amd64"},
			}})
		testutil.EventuallyNoError(t, 30*time.Second, "node "+name+" registered", func() error {
			_, err := admin.Nodes.Get(ctx, &apiv1.GetNodeRequest{Name: name})
			return err
		})
		id := pki.IdentityDir(filepath.Join(dir, "node"))
		kp, err := pki.LoadKeyPair(id.PairFile(), id.PairFile())
		if err != nil {
			t.Fatal(err)
		}
		c, err := client.Dial(ctx, client.Config{Endpoint: endpoint, CAFile: filepath.Join(srv.opts.DataDir, "pki", "ca.crt"),
			ClientCertificate: kp.GetClientCertificate})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	good, evil := join("good"), join("evil")
	node := func(name string) *apiv1.Node {
		n, err := admin.Nodes.Get(ctx, &apiv1.GetNodeRequest{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	// reregister sends what the node registered, with labels.
	reregister := func(c *client.Client, name string, labels map[string]string) error {
		n := node(name)
		n.Metadata = &apiv1.ObjectMeta{Name: name, Labels: labels}
		_, err := c.Nodes.Register(ctx, &apiv1.RegisterNodeRequest{Node: n})
		return err
	}

	// The attack.
	err = reregister(evil, "evil", map[string]string{apiv1.LabelKVM: "false", "tier": "secure"})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("the node registering as tier=secure: %v, want InvalidArgument", err)
	}
	if l := node("evil").Metadata.Labels; l["tier"] != "" {
		t.Fatalf("the node labelled itself: %v", l)
	}
	vm := &apiv1.VirtualMachine{
		Metadata: &apiv1.ObjectMeta{Name: "secret"},
		Spec: &apiv1.VirtualMachineSpec{
			RunStrategy: apiv1.RunStrategyAlways,
			Template: &apiv1.VirtualMachineInstanceTemplateSpec{Spec: &apiv1.VirtualMachineInstanceSpec{
				Domain:       &apiv1.DomainSpec{Memory: &apiv1.Memory{Guest: "256Mi"}},
				NodeSelector: map[string]string{"tier": "secure"},
			}},
		},
	}
	if _, err := admin.VMs.Create(ctx, &apiv1.CreateVirtualMachineRequest{Vm: vm}); err != nil {
		t.Fatal(err)
	}
	key := &apiv1.ObjectKey{Namespace: "default", Name: "secret"}
	vmi := func() *apiv1.VirtualMachineInstance {
		v, err := admin.VMIs.Get(ctx, &apiv1.GetVirtualMachineInstanceRequest{Key: key})
		if status.Code(err) == codes.NotFound {
			return nil
		}
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	testutil.EventuallyNoError(t, 30*time.Second, "the VM unschedulable while no node is tier=secure", func() error {
		v := vmi()
		if n := v.GetStatus().GetNodeName(); n != "" {
			t.Fatalf("the VM selecting tier=secure went to node %s, which no admin labelled", n)
		}
		if c := apiv1.FindCondition(v.GetStatus().GetConditions(), apiv1.ConditionPodScheduled); c.GetReason() != "Unschedulable" {
			return fmt.Errorf("PodScheduled %v", c)
		}
		return nil
	})

	// An admin labels the good node: the VM goes there.
	if _, err := admin.Nodes.Label(ctx, &apiv1.LabelNodeRequest{Name: "good", Set: map[string]string{"tier": "secure"}}); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyNoError(t, 30*time.Second, "the VM running on the labelled node", func() error {
		v := vmi()
		if n := v.GetStatus().GetNodeName(); n != "good" || v.GetStatus().GetPhase() != apiv1.PhaseRunning {
			return fmt.Errorf("on node %q, phase %q", n, v.GetStatus().GetPhase())
		}
		return nil
	})

	// The node's agent beats (and re-registers): the admin's label stays.
	beat := node("good").GetStatus().GetHeartbeat().AsTime()
	testutil.Eventually(t, 30*time.Second, "a heartbeat of the labelled node", func() bool {
		return node("good").GetStatus().GetHeartbeat().AsTime().After(beat)
	})
	if err := reregister(good, "good", map[string]string{apiv1.LabelKVM: "false"}); err != nil {
		t.Fatal(err)
	}
	if l := node("good").Metadata.Labels; l["tier"] != "secure" {
		t.Fatalf("the admin's label did not survive the node's heartbeat and registration: %v", l)
	}
	// It can neither change nor remove it.
	if err := reregister(good, "good", map[string]string{"tier": "public"}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("the node changing the admin's label: %v, want InvalidArgument", err)
	}
	if _, err := good.Nodes.Label(ctx, &apiv1.LabelNodeRequest{Name: "good", Remove: []string{"tier"}}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("the node removing the admin's label: %v, want PermissionDenied", err)
	}
	if _, err := evil.Nodes.Label(ctx, &apiv1.LabelNodeRequest{Name: "evil", Set: map[string]string{"tier": "secure"}}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("the other node labelling itself through Label: %v, want PermissionDenied", err)
	}
	if l := node("good").Metadata.Labels; l["tier"] != "secure" {
		t.Fatalf("labels after the refused calls: %v", l)
	}
	if l := node("evil").Metadata.Labels; l["tier"] != "" {
		t.Fatalf("labels of the other node after the refused calls: %v", l)
	}
	if n := vmi().GetStatus().GetNodeName(); n != "good" {
		t.Fatalf("the VM moved to %s", n)
	}
}
