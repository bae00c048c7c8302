package apiserver

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/dynamicpb"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
	"github.com/virtplane/terraform-provider-virtplane/internal/pki"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

func wantCode(t *testing.T, what string, err error, want codes.Code) {
	t.Helper()
	if got := status.Code(err); got != want {
		t.Fatalf("%s: code %v (%v), want %v", what, got, err, want)
	}
}

// runningVMI stores an instance the scheduler put on node, with a secret
// in its user data.
func (e *secEnv) runningVMI(name, node string) *apiv1.VirtualMachineInstance {
	e.t.Helper()
	vmi, err := e.st.VMIs.Create(ctx(), &apiv1.VirtualMachineInstance{
		Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: name, Labels: map[string]string{apiv1.LabelNodeName: node}},
		Spec:     &apiv1.VirtualMachineInstanceSpec{Domain: &apiv1.DomainSpec{}},
		Status:   &apiv1.VirtualMachineInstanceStatus{NodeName: node, Phase: apiv1.PhaseRunning},
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return vmi
}

// A node that holds a certificate (or any token holder, before) opened
// the console session stream under another node's name and read what
// users typed at that node's consoles.
func TestNodeCannotHijackAnotherNodesConsoles(t *testing.T) {
	e := newSecEnv(t, Limits{})
	a, b := e.join("node-a"), e.join("node-b")
	e.runningVMI("web", "node-a")

	stolen, err := b.c.Consoles.Sessions(ctx(), &apiv1.ConsoleSessionsRequest{NodeName: "node-a"})
	if err == nil {
		_, err = stolen.Recv()
	}
	wantCode(t, "node-b opening node-a's session stream", err, codes.PermissionDenied)

	sctx, cancel := context.WithCancel(ctx())
	defer cancel()
	own, err := a.c.Consoles.Sessions(sctx, &apiv1.ConsoleSessionsRequest{NodeName: "node-a"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := own.Header(); err != nil {
		t.Fatal(err)
	}
	second, err := a.c.Consoles.Sessions(ctx(), &apiv1.ConsoleSessionsRequest{NodeName: "node-a"})
	if err == nil {
		_, err = second.Recv()
	}
	wantCode(t, "a second session stream for node-a", err, codes.AlreadyExists)

	// A user attaches; the session goes to node-a alone, and node-b cannot
	// serve (read the input of) a session it was not handed.
	attach, err := e.admin().Consoles.Attach(ctx())
	if err != nil {
		t.Fatal(err)
	}
	if err := attach.Send(&apiv1.ConsoleInput{Open: &apiv1.ConsoleOpen{Name: "web", Interactive: true}}); err != nil {
		t.Fatal(err)
	}
	sess, err := own.Recv()
	if err != nil {
		t.Fatal(err)
	}
	serve, err := b.c.Consoles.Serve(ctx())
	if err != nil {
		t.Fatal(err)
	}
	if err := serve.Send(&apiv1.ConsoleOutput{SessionId: sess.SessionId}); err != nil {
		t.Fatal(err)
	}
	_, err = serve.Recv()
	wantCode(t, "node-b serving node-a's session", err, codes.NotFound)
}

// Any token holder registered phantom nodes and sent heartbeats for a dead
// node, which kept it from being fenced.
func TestNodeActsOnlyForItself(t *testing.T) {
	e := newSecEnv(t, Limits{})
	a, b := e.join("node-a"), e.join("node-b")
	reg := func(n *joinedNode, name string) error {
		_, err := n.c.Nodes.Register(ctx(), &apiv1.RegisterNodeRequest{Node: &apiv1.Node{
			Metadata: &apiv1.ObjectMeta{Name: name},
			Status: &apiv1.NodeStatus{Capacity: map[string]string{"cpu": "2", "memory": "4Gi"},
				Allocatable: map[string]string{"cpu": "2", "memory": "3Gi"}},
		}})
		return err
	}
	if err := reg(a, "node-a"); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "node-b registering node-a", reg(b, "node-a"), codes.PermissionDenied)
	wantCode(t, "node-b registering a phantom", reg(b, "phantom"), codes.PermissionDenied)
	_, err := b.c.Nodes.Heartbeat(ctx(), &apiv1.HeartbeatRequest{Name: "node-a"})
	wantCode(t, "node-b beating for node-a", err, codes.PermissionDenied)
	if _, err := a.c.Nodes.Heartbeat(ctx(), &apiv1.HeartbeatRequest{Name: "node-a"}); err != nil {
		t.Fatal(err)
	}
	_, err = b.c.Nodes.Get(ctx(), &apiv1.GetNodeRequest{Name: "node-a"})
	wantCode(t, "node-b reading node-a", err, codes.PermissionDenied)
	_, err = b.c.Nodes.List(ctx(), &apiv1.ListNodesRequest{})
	wantCode(t, "a node listing nodes", err, codes.PermissionDenied)
}

// A token holder rewrote any instance's status.
func TestNodeUpdatesOnlyItsOwnInstances(t *testing.T) {
	e := newSecEnv(t, Limits{})
	a, b := e.join("node-a"), e.join("node-b")
	vmi := e.runningVMI("web", "node-a")
	update := func(n *joinedNode, st *apiv1.VirtualMachineInstanceStatus) error {
		cur, err := e.st.VMIs.Get(ctx(), "default", "web")
		if err != nil {
			t.Fatal(err)
		}
		cur.Status = st
		_, err = n.c.VMIs.UpdateStatus(ctx(), &apiv1.UpdateVirtualMachineInstanceStatusRequest{Vmi: cur})
		return err
	}
	wantCode(t, "node-b failing node-a's instance",
		update(b, &apiv1.VirtualMachineInstanceStatus{NodeName: "node-a", Phase: apiv1.PhaseFailed}), codes.PermissionDenied)
	wantCode(t, "node-a moving its instance to node-b",
		update(a, &apiv1.VirtualMachineInstanceStatus{NodeName: "node-b", Phase: apiv1.PhaseRunning}), codes.PermissionDenied)
	if err := update(a, &apiv1.VirtualMachineInstanceStatus{NodeName: "node-a", Phase: apiv1.PhaseSucceeded}); err != nil {
		t.Fatal(err)
	}

	// Reads: only its own instances, and only by its own selector.
	_, err := b.c.VMIs.Get(ctx(), &apiv1.GetVirtualMachineInstanceRequest{Key: &apiv1.ObjectKey{Namespace: "default", Name: "web"}})
	wantCode(t, "node-b reading node-a's instance", err, codes.PermissionDenied)
	_, err = b.c.VMIs.List(ctx(), &apiv1.ListVirtualMachineInstancesRequest{})
	wantCode(t, "node-b listing every instance", err, codes.PermissionDenied)
	own := &apiv1.ListOptions{LabelSelector: apiv1.LabelNodeName + "=node-b"}
	if l, err := b.c.VMIs.List(ctx(), &apiv1.ListVirtualMachineInstancesRequest{Options: own}); err != nil || len(l.Items) != 0 {
		t.Fatalf("node-b listing its own: %v, %v", l, err)
	}
	w, err := b.c.VMIs.Watch(ctx(), &apiv1.WatchVirtualMachineInstancesRequest{
		Options: &apiv1.WatchOptions{LabelSelector: apiv1.LabelNodeName + "=node-a"}})
	if err == nil {
		_, err = w.Recv()
	}
	wantCode(t, "node-b watching node-a's instances", err, codes.PermissionDenied)
	if _, err := a.c.VMIs.Get(ctx(), &apiv1.GetVirtualMachineInstanceRequest{Key: &apiv1.ObjectKey{Namespace: "default", Name: vmi.Metadata.Name}}); err != nil {
		t.Fatal(err)
	}

	// A VM that last ran elsewhere: its identity, not its spec.
	vm := validVM("db")
	vm.Spec.Template.Spec.Volumes = append(vm.Spec.Template.Spec.Volumes, &apiv1.Volume{Name: "ci",
		CloudInitNoCloud: &apiv1.CloudInitNoCloud{UserData: "#cloud-config\npassword: secret\n"}})
	vm.Spec.Template.Spec.Domain.Devices.Disks = append(vm.Spec.Template.Spec.Domain.Devices.Disks,
		&apiv1.Disk{Name: "ci", Cdrom: &apiv1.CDRomTarget{Bus: "sata"}})
	created, err := e.admin().VMs.Create(ctx(), &apiv1.CreateVirtualMachineRequest{Vm: vm})
	if err != nil {
		t.Fatal(err)
	}
	got, err := a.c.VMs.Get(ctx(), &apiv1.GetVirtualMachineRequest{Key: &apiv1.ObjectKey{Namespace: "default", Name: "db"}})
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec != nil || got.Metadata.Uid != created.Metadata.Uid {
		t.Fatalf("a node read a VM that is not its: %v", got)
	}
}

// Admin methods refuse node identities; callers without a credential get
// nothing but Join.
func TestAdminMethodsRefuseNodesAndAnonymous(t *testing.T) {
	e := newSecEnv(t, Limits{})
	a := e.join("node-a")
	_, err := a.c.VMs.Create(ctx(), &apiv1.CreateVirtualMachineRequest{Vm: validVM("x")})
	wantCode(t, "a node creating a VM", err, codes.PermissionDenied)
	_, err = a.c.Nodes.Fence(ctx(), &apiv1.FenceNodeRequest{Name: "node-b"})
	wantCode(t, "a node fencing another", err, codes.PermissionDenied)
	_, err = a.c.Bootstrap.CreateToken(ctx(), &apiv1.CreateBootstrapTokenRequest{})
	wantCode(t, "a node making join tokens", err, codes.PermissionDenied)
	_, err = a.c.Nodes.Revoke(ctx(), &apiv1.RevokeNodeRequest{Name: "node-a"})
	wantCode(t, "a node revoking", err, codes.PermissionDenied)
	_, err = a.c.ReplicaSets.Scale(ctx(), &apiv1.ScaleRequest{Key: &apiv1.ObjectKey{Namespace: "default", Name: "x"}, Replicas: 1})
	wantCode(t, "a node scaling a replica set", err, codes.PermissionDenied)
	_, err = a.c.Pools.List(ctx(), &apiv1.ListPoolsRequest{})
	wantCode(t, "a node listing pools", err, codes.PermissionDenied)
	w, err := a.c.Pools.Watch(ctx(), &apiv1.WatchPoolsRequest{})
	if err == nil {
		_, err = w.Recv()
	}
	wantCode(t, "a node watching pools", err, codes.PermissionDenied)

	anon := e.anonymous()
	_, err = anon.VMs.Get(ctx(), &apiv1.GetVirtualMachineRequest{Key: &apiv1.ObjectKey{Namespace: "default", Name: "x"}})
	wantCode(t, "anonymous read", err, codes.Unauthenticated)
	_, err = anon.ReplicaSets.Get(ctx(), &apiv1.GetReplicaSetRequest{Key: &apiv1.ObjectKey{Namespace: "default", Name: "x"}})
	wantCode(t, "anonymous replica set read", err, codes.Unauthenticated)
	bad := e.dial(client.Config{Token: "not-the-token"})
	_, err = bad.VMs.List(ctx(), &apiv1.ListVirtualMachinesRequest{})
	wantCode(t, "wrong token", err, codes.Unauthenticated)
}

// Bootstrap tokens are single-use, expire, and never take over a node that
// has joined.
func TestBootstrapTokens(t *testing.T) {
	e := newSecEnv(t, Limits{AnonymousRate: 1000, AnonymousBurst: 1000})
	admin := e.admin()
	tok, err := admin.Bootstrap.CreateToken(ctx(), &apiv1.CreateBootstrapTokenRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if want := e.ca.Hash(); tok.CaCertHash != want {
		t.Fatalf("ca hash %s, want %s", tok.CaCertHash, want)
	}
	e.joinWith("node-a", tok.Token)
	_, err = e.tryJoin("node-b", tok.Token)
	wantCode(t, "a used token", err, codes.Unauthenticated)
	_, err = e.tryJoin("node-b", tok.Token[:7]+strings.Repeat("a", 16))
	wantCode(t, "a wrong secret", err, codes.Unauthenticated)

	other, _ := admin.Bootstrap.CreateToken(ctx(), &apiv1.CreateBootstrapTokenRequest{})
	_, err = e.tryJoin("node-a", other.Token)
	wantCode(t, "an any-name token taking over node-a", err, codes.FailedPrecondition)
	forB, _ := admin.Bootstrap.CreateToken(ctx(), &apiv1.CreateBootstrapTokenRequest{NodeName: "node-b"})
	_, err = e.tryJoin("node-c", forB.Token)
	wantCode(t, "node-b's token used for node-c", err, codes.PermissionDenied)
	forA, _ := admin.Bootstrap.CreateToken(ctx(), &apiv1.CreateBootstrapTokenRequest{NodeName: "node-a"})
	if _, err := e.tryJoin("node-a", forA.Token); err != nil {
		t.Fatalf("re-joining node-a with a token made for it: %v", err)
	}

	late, _ := admin.Bootstrap.CreateToken(ctx(), &apiv1.CreateBootstrapTokenRequest{TtlSeconds: 60})
	e.clock.Step(61 * time.Second)
	_, err = e.tryJoin("node-d", late.Token)
	wantCode(t, "an expired token", err, codes.Unauthenticated)
	_, err = admin.Bootstrap.CreateToken(ctx(), &apiv1.CreateBootstrapTokenRequest{TtlSeconds: 7 * 24 * 3600})
	wantCode(t, "a week-long token", err, codes.InvalidArgument)
}

// Revoking a node (or deleting it) refuses its next call and ends its open
// streams at once.
func TestRevokedNodeIsCutOff(t *testing.T) {
	e := newSecEnv(t, Limits{})
	a := e.join("node-a")
	if _, err := a.c.Nodes.Heartbeat(ctx(), &apiv1.HeartbeatRequest{Name: "node-a"}); err != nil && status.Code(err) != codes.NotFound {
		t.Fatal(err)
	}
	stream, err := a.c.Consoles.Sessions(ctx(), &apiv1.ConsoleSessionsRequest{NodeName: "node-a"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Header(); err != nil {
		t.Fatal(err)
	}
	ended := make(chan error, 1)
	go func() { _, err := stream.Recv(); ended <- err }()
	if _, err := e.admin().Nodes.Revoke(ctx(), &apiv1.RevokeNodeRequest{Name: "node-a"}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-ended:
		if err == nil {
			t.Fatal("the session stream delivered a message instead of ending")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the revoked node's session stream is still open")
	}
	testutil.Eventually(t, 10*time.Second, "node-a's heartbeat refused", func() bool {
		_, err := a.c.Nodes.Heartbeat(ctx(), &apiv1.HeartbeatRequest{Name: "node-a"})
		return status.Code(err) == codes.Unauthenticated
	})

	// Delete: same for a node that joined again.
	b := e.join("node-b")
	if _, err := e.admin().Nodes.Delete(ctx(), &apiv1.DeleteNodeRequest{Name: "node-b"}); err != nil && status.Code(err) != codes.NotFound {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "node-b's heartbeat refused", func() bool {
		_, err := b.c.Nodes.Heartbeat(ctx(), &apiv1.HeartbeatRequest{Name: "node-b"})
		return status.Code(err) == codes.Unauthenticated
	})
}

// A node renews its certificate with a new key; the old one keeps working
// until the next renewal, which drops it.
func TestRenewal(t *testing.T) {
	e := newSecEnv(t, Limits{})
	a := e.join("node-a")
	renew := func(c *client.Client) *tls.Certificate {
		t.Helper()
		nk, err := pki.NewNodeKey("node-a")
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.Bootstrap.Renew(ctx(), &apiv1.RenewRequest{CsrPem: nk.CSRPEM})
		if err != nil {
			t.Fatal(err)
		}
		cert, err := tlsPair(resp.CertificatePem, nk)
		if err != nil {
			t.Fatal(err)
		}
		return cert
	}
	second := renew(a.c)
	c2 := e.dial(client.Config{ClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return second, nil }})
	testutil.EventuallyNoError(t, 10*time.Second, "the renewed certificate accepted", func() error {
		_, err := c2.Nodes.Heartbeat(ctx(), &apiv1.HeartbeatRequest{Name: "node-a"})
		if status.Code(err) == codes.NotFound {
			return nil
		}
		return err
	})
	renew(c2)
	testutil.Eventually(t, 10*time.Second, "the first certificate dropped", func() bool {
		_, err := a.c.Nodes.Heartbeat(ctx(), &apiv1.HeartbeatRequest{Name: "node-a"})
		return status.Code(err) == codes.Unauthenticated
	})
	// Another node's name in the request is refused.
	nk, _ := pki.NewNodeKey("node-b")
	_, err := c2.Bootstrap.Renew(ctx(), &apiv1.RenewRequest{CsrPem: nk.CSRPEM})
	wantCode(t, "renewing as another node", err, codes.InvalidArgument)
}

// 100 parallel unauthenticated 3.7 MB requests took the agent from 57 MB
// to 1.32 GB: grpc read each body before the token check. Now the tap
// handle refuses them before a byte of the body is read.
func TestUnauthenticatedBodiesAreNotRead(t *testing.T) {
	e := newSecEnv(t, Limits{})
	anon := e.anonymous()
	big := validVM("big")
	big.Metadata.Annotations = map[string]string{"blob": strings.Repeat("x", 3_700_000)}
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := anon.VMs.Create(ctx(), &apiv1.CreateVirtualMachineRequest{Vm: big})
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		wantCode(t, "unauthenticated large create", err, codes.Unauthenticated)
	}
	if n := e.payloads.count(apiv1.VirtualMachines_Create_FullMethodName); n != 0 {
		t.Fatalf("the server read %d unauthenticated request bodies", n)
	}
	// An admin's oversized request is refused by size, not buffered at
	// 4 MiB; the largest valid VM fits the cap.
	_, err := e.admin().VMs.Create(ctx(), &apiv1.CreateVirtualMachineRequest{Vm: big})
	wantCode(t, "an admin's 3.7 MB create", err, codes.ResourceExhausted)
	if _, err := e.admin().VMs.Create(ctx(), &apiv1.CreateVirtualMachineRequest{Vm: largestVM()}); err != nil {
		t.Fatalf("the largest valid VM over TLS: %v", clipErr(err))
	}
}

func TestRateAndStreamLimits(t *testing.T) {
	e := newSecEnv(t, Limits{NodeStreams: 2, AnonymousRate: 1, AnonymousBurst: 3})
	a := e.join("node-a")
	sel := &apiv1.WatchOptions{LabelSelector: apiv1.LabelNodeName + "=node-a"}
	wctx, cancel := context.WithCancel(ctx())
	defer cancel()
	for i := range 2 {
		w, err := a.c.VMIs.Watch(wctx, &apiv1.WatchVirtualMachineInstancesRequest{Options: sel})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Recv(); err != nil { // SYNCED
			t.Fatalf("watch %d: %v", i, err)
		}
	}
	w, err := a.c.VMIs.Watch(wctx, &apiv1.WatchVirtualMachineInstancesRequest{Options: sel})
	if err == nil {
		_, err = w.Recv()
	}
	wantCode(t, "a third stream over the node's limit of 2", err, codes.ResourceExhausted)

	anon := e.anonymous()
	var limited bool
	for range 10 {
		_, err := anon.Bootstrap.Join(ctx(), &apiv1.JoinRequest{Token: "abcdef.0123456789abcdef", NodeName: "x"})
		if status.Code(err) == codes.ResourceExhausted {
			limited = true
			break
		}
	}
	if !limited {
		t.Fatal("10 joins in a row from one address were not rate-limited (burst 3)")
	}
}

// Every method has exactly one entry in the authorization table (a map:
// at most one), and the node table names only methods; a namespaced
// entry finds the namespace of its request. A new method without an
// entry fails here (and in the role matrix).
func TestEveryMethodHasAnAuthorizationRule(t *testing.T) {
	seen := map[string]bool{}
	for _, sd := range apiv1.Services() {
		ms := sd.Methods()
		for j := range ms.Len() {
			full := "/" + string(sd.FullName()) + "/" + string(ms.Get(j).Name())
			seen[full] = true
			rule, ok := methodRules[full]
			if !ok {
				t.Errorf("%s: no entry in methodRules", full)
				continue
			}
			if rule.scope == scopeNamespace && rule.target == nil {
				req := dynamicpb.NewMessage(ms.Get(j).Input())
				if _, err := namespaceOf(req); err != nil {
					t.Errorf("%s: namespaced rule, but %v", full, err)
				}
			}
		}
	}
	for m := range nodeRules {
		if !seen[m] {
			t.Errorf("nodeRules names %s, which is no method", m)
		}
	}
	for m := range methodRules {
		if !seen[m] {
			t.Errorf("methodRules names %s, which is no method", m)
		}
	}
}

func TestRecoverTurnsPanicIntoInternal(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	_, err := recoverUnary(log)(ctx(), nil, &grpc.UnaryServerInfo{FullMethod: "/x/Y"}, func(context.Context, any) (any, error) { panic("boom") })
	wantCode(t, "a panicking handler", err, codes.Internal)
}

func tlsPair(certPEM []byte, nk *pki.NodeKey) (*tls.Certificate, error) {
	kb, err := x509.MarshalECPrivateKey(nk.Key)
	if err != nil {
		return nil, err
	}
	pair, err := tls.X509KeyPair(certPEM, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}))
	return &pair, err
}
