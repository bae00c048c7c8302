package apiserver

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/types/known/timestamppb"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/audit"
	"github.com/virtplane/terraform-provider-virtplane/internal/etcdserver"
	"github.com/virtplane/terraform-provider-virtplane/internal/pki"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// newAuditEnv is newSecEnv (real etcd, TLS, node certificates, the admin
// token, every check) with an audit log in dir.
func newAuditEnv(t *testing.T, opts Options) (*secEnv, string) {
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
	e.st = NewStores(es.Client(), store.Options{Prefix: "/audit/registry"})
	e.reg = prometheus.NewRegistry()
	if e.metrics, err = NewMetrics(e.reg); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "audit", "audit.log")
	al, err := audit.New(audit.Config{Path: logPath, Registerer: e.reg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = al.Close() })
	opts.CA, opts.Clock, opts.NodeCertValidity, opts.Metrics = ca, e.clock.Now, time.Hour, e.metrics
	opts.Audit, opts.ServerName = al, "server-1"
	e.srv = New(e.st, opts)
	go e.srv.Run(ctx)
	kp, err := pki.LoadKeyPair(paths.ServerCert, paths.ServerKey, paths.CACert)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	so := e.srv.ServerOptions(Listener{Token: func() string { return token }}, nil, nil)
	so = append(so, grpc.Creds(credentials.NewTLS(pki.ServerTLSConfig(kp, pool))))
	gs := grpc.NewServer(so...)
	e.srv.Register(gs)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = gs.Serve(l) }()
	t.Cleanup(gs.Stop)
	e.addr = l.Addr().String()
	return e, logPath
}

// auditLines reads every record in the log file.
func auditLines(t *testing.T, path string) []audit.Record {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []audit.Record
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var r audit.Record
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		out = append(out, r)
	}
	return out
}

const marker = "AUDIT-MARKER-s3cr3t-9f2c"

// The acceptance for the audit trail: every write of a run
// appears once with its identity and result, reads do not, and no
// secret (cloud-init user data, an issued token) is written.
func TestAuditTrailRecordsWritesOnceWithoutSecrets(t *testing.T) {
	e, logPath := newAuditEnv(t, Options{})
	admin := e.admin()

	// A node joins (recorded, its bootstrap token not) and then does its
	// routine (not recorded).
	n := e.join("node-a")
	tok, err := admin.Bootstrap.CreateToken(ctx(), &apiv1.CreateBootstrapTokenRequest{NodeName: "node-b"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.c.Nodes.Heartbeat(ctx(), &apiv1.HeartbeatRequest{Name: "node-a"}); code(err) == codes.Unauthenticated {
		t.Fatal(err)
	}

	vm := validVM("web")
	vm.Spec.Template.Spec.Domain.Devices.Disks = append(vm.Spec.Template.Spec.Domain.Devices.Disks,
		&apiv1.Disk{Name: "ci", Disk: &apiv1.DiskTarget{Bus: "virtio"}})
	vm.Spec.Template.Spec.Volumes = append(vm.Spec.Template.Spec.Volumes,
		&apiv1.Volume{Name: "ci", CloudInitNoCloud: &apiv1.CloudInitNoCloud{UserData: "#cloud-config\npassword: " + marker}})
	created, err := admin.VMs.Create(ctx(), &apiv1.CreateVirtualMachineRequest{Vm: vm})
	if err != nil {
		t.Fatal(err)
	}
	// Reads: never recorded.
	if _, err := admin.VMs.Get(ctx(), &apiv1.GetVirtualMachineRequest{Key: webKey}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.VMs.List(ctx(), &apiv1.ListVirtualMachinesRequest{}); err != nil {
		t.Fatal(err)
	}
	created.Metadata.Labels["tier"] = "front"
	if _, err := admin.VMs.Update(ctx(), &apiv1.UpdateVirtualMachineRequest{Vm: created}); err != nil {
		t.Fatal(err)
	}
	// A write the handler refuses, with the secret in it.
	bad := validVM("bad")
	bad.Spec.Template.Spec.Domain.Memory.Guest = "lots"
	bad.Spec.Template.Spec.Volumes = append(bad.Spec.Template.Spec.Volumes,
		&apiv1.Volume{Name: "ci", CloudInitNoCloud: &apiv1.CloudInitNoCloud{UserData: marker}})
	_, err = admin.VMs.Create(ctx(), &apiv1.CreateVirtualMachineRequest{Vm: bad})
	wantCode(t, "an invalid VM", err, codes.InvalidArgument)
	// Writes the tap handle refuses: no credential, and a node's call of
	// an admin's method.
	_, err = e.anonymous().VMs.Delete(ctx(), &apiv1.DeleteVirtualMachineRequest{Key: webKey})
	wantCode(t, "a delete without a credential", err, codes.Unauthenticated)
	_, err = n.c.VMs.Delete(ctx(), &apiv1.DeleteVirtualMachineRequest{Key: webKey})
	wantCode(t, "a node's delete", err, codes.PermissionDenied)
	// A write the interceptor's node rule refuses, after the body is read.
	_, err = n.c.Nodes.Register(ctx(), &apiv1.RegisterNodeRequest{Node: &apiv1.Node{Metadata: &apiv1.ObjectMeta{Name: "node-z"}}})
	wantCode(t, "a node registering another", err, codes.PermissionDenied)
	// A console attach attempt: the VM has no instance.
	cs, err := admin.Consoles.Attach(ctx())
	if err != nil {
		t.Fatal(err)
	}
	if err := cs.Send(&apiv1.ConsoleInput{Open: &apiv1.ConsoleOpen{Name: "web", Interactive: true}}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.Recv(); err == nil || err == io.EOF {
		t.Fatalf("console of a VM with no instance: %v", err)
	}
	// A migration request, refused: no instance runs.
	_, err = admin.Migrations.Create(ctx(), &apiv1.CreateMigrationRequest{Migration: &apiv1.VirtualMachineInstanceMigration{
		Metadata: &apiv1.ObjectMeta{Name: "move-web"}, Spec: &apiv1.VirtualMachineInstanceMigrationSpec{VmiName: "web"}}})
	if err == nil {
		t.Fatal("a migration of a VM with no instance was accepted")
	}
	if _, err := admin.VMs.Delete(ctx(), &apiv1.DeleteVirtualMachineRequest{Key: webKey}); err != nil {
		t.Fatal(err)
	}
	// A join with a wrong token: refused, and the token stays out.
	_, err = e.tryJoin("node-c", "abcdef."+marker)
	wantCode(t, "a join with a wrong token", err, codes.Unauthenticated)

	want := []struct {
		identity, method, namespace, name, code string
		uid                                     bool
	}{
		{"admin", apiv1.Bootstrap_CreateToken_FullMethodName, "", "", "OK", false},
		{"anonymous (127.0.0.1)", apiv1.Bootstrap_Join_FullMethodName, "", "node-a", "OK", false},
		{"admin", apiv1.Bootstrap_CreateToken_FullMethodName, "", "node-b", "OK", false},
		{"admin", apiv1.VirtualMachines_Create_FullMethodName, "default", "web", "OK", true},
		{"admin", apiv1.VirtualMachines_Update_FullMethodName, "default", "web", "OK", true},
		{"admin", apiv1.VirtualMachines_Create_FullMethodName, "", "bad", "InvalidArgument", false},
		{"anonymous (127.0.0.1)", apiv1.VirtualMachines_Delete_FullMethodName, "", "", "Unauthenticated", false},
		// Refused before the request is read: no object.
		{"node node-a", apiv1.VirtualMachines_Delete_FullMethodName, "", "", "PermissionDenied", false},
		{"node node-a", apiv1.Nodes_Register_FullMethodName, "", "node-z", "PermissionDenied", false},
		{"admin", apiv1.Consoles_Attach_FullMethodName, "", "web", "FailedPrecondition", false},
		{"admin", apiv1.Migrations_Create_FullMethodName, "", "move-web", "", false},
		{"admin", apiv1.VirtualMachines_Delete_FullMethodName, "default", "web", "OK", true},
		{"anonymous (127.0.0.1)", apiv1.Bootstrap_Join_FullMethodName, "", "node-c", "Unauthenticated", false},
	}
	// The console's record is written when its stream ends, which the
	// server sees after the client has the error.
	var got []audit.Record
	deadline := time.Now().Add(10 * time.Second)
	for {
		got = auditLines(t, logPath)
		if len(got) >= len(want) || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(got) != len(want) {
		for _, r := range got {
			t.Logf("%s %s %s/%s %s", r.Identity, r.Method, r.Namespace, r.Name, r.Code)
		}
		t.Fatalf("%d records, want %d", len(got), len(want))
	}
	for i, w := range want {
		r := got[i]
		if r.Identity != w.identity || r.Method != w.method || r.Namespace != w.namespace || r.Name != w.name ||
			(w.code != "" && r.Code != w.code) || (w.code == "" && r.Code == "OK") || (r.UID != "") != w.uid {
			t.Errorf("record %d: %+v\nwant %+v", i, r, w)
		}
		if r.Server != "server-1" || r.Peer != "127.0.0.1" || r.Time.IsZero() {
			t.Errorf("record %d: server %q peer %q time %v", i, r.Server, r.Peer, r.Time)
		}
		if r.Code != "OK" && r.Message == "" {
			t.Errorf("record %d: a refusal without its message", i)
		}
	}
	if got[3].UID != created.GetMetadata().GetUid() {
		t.Errorf("create's uid %q, want %q", got[3].UID, created.GetMetadata().GetUid())
	}
	data, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	for what, secret := range map[string]string{"cloud-init user data": marker, "bootstrap token": tok.GetToken(), "admin token": e.token} {
		if strings.Contains(string(data), secret) {
			t.Errorf("the audit log holds the %s", what)
		}
	}
	secret, _, _ := strings.Cut(tok.GetToken(), ".")
	if strings.Contains(string(data), tok.GetToken()[len(secret)+1:]) {
		t.Error("the audit log holds the bootstrap token's secret")
	}
}

// Audit.Read serves the log to admins, filtered and limited; nodes may
// not read it.
func TestAuditRead(t *testing.T) {
	e, _ := newAuditEnv(t, Options{})
	admin := e.admin()
	start := e.clock.Now()
	for _, name := range []string{"a1", "a2", "a3"} {
		if _, err := admin.VMs.Create(ctx(), &apiv1.CreateVirtualMachineRequest{Vm: validVM(name)}); err != nil {
			t.Fatal(err)
		}
		e.clock.Step(time.Second)
	}
	if _, err := admin.Nodes.Cordon(ctx(), &apiv1.CordonNodeRequest{Name: "none"}); err == nil {
		t.Fatal("cordoned a node that does not exist")
	}
	reader := apiv1.NewAuditClient(admin.Conn)
	read := func(req *apiv1.ReadAuditRequest) ([]string, error) {
		s, err := reader.Read(ctx(), req)
		if err != nil {
			return nil, err
		}
		var out []string
		for {
			r, err := s.Recv()
			if err == io.EOF {
				return out, nil
			}
			if err != nil {
				return out, err
			}
			out = append(out, r.GetName()+":"+r.GetCode())
		}
	}
	for _, c := range []struct {
		req  *apiv1.ReadAuditRequest
		want string
	}{
		{&apiv1.ReadAuditRequest{}, "a1:OK,a2:OK,a3:OK,none:NotFound"},
		{&apiv1.ReadAuditRequest{Limit: 2}, "a3:OK,none:NotFound"},
		{&apiv1.ReadAuditRequest{Method: "VirtualMachines/Create"}, "a1:OK,a2:OK,a3:OK"},
		{&apiv1.ReadAuditRequest{Method: "VirtualMachines/Create", Since: timestamppb.New(start.Add(time.Second)), Limit: 1}, "a2:OK"},
		{&apiv1.ReadAuditRequest{Namespace: "default", Identity: "admin"}, "a1:OK,a2:OK,a3:OK"},
		{&apiv1.ReadAuditRequest{Identity: "user alice"}, ""},
	} {
		got, err := read(c.req)
		if err != nil {
			t.Fatalf("%v: %v", c.req, err)
		}
		if strings.Join(got, ",") != c.want {
			t.Errorf("%v: %s, want %s", c.req, strings.Join(got, ","), c.want)
		}
	}
	_, err := read(&apiv1.ReadAuditRequest{Limit: audit.MaxReadLimit + 1})
	wantCode(t, "a limit over the cap", err, codes.InvalidArgument)
	n := e.join("node-a")
	_, err = func() ([]string, error) {
		s, err := apiv1.NewAuditClient(n.c.Conn).Read(ctx(), &apiv1.ReadAuditRequest{})
		if err != nil {
			return nil, err
		}
		_, err = s.Recv()
		return nil, err
	}()
	wantCode(t, "a node reading the audit log", err, codes.PermissionDenied)
}

// A server without an audit log says so.
func TestAuditReadWithoutLog(t *testing.T) {
	f := newFixture(t)
	s, err := apiv1.NewAuditClient(f.conn).Read(context.Background(), &apiv1.ReadAuditRequest{})
	if err == nil {
		_, err = s.Recv()
	}
	wantCode(t, "Audit.Read without a log", err, codes.FailedPrecondition)
}

// With AuditNodeReports, a node's routine reports are recorded.
func TestAuditNodeReports(t *testing.T) {
	e, logPath := newAuditEnv(t, Options{AuditNodeReports: true})
	n := e.join("node-a")
	if _, err := n.c.Nodes.Heartbeat(ctx(), &apiv1.HeartbeatRequest{Name: "node-a"}); code(err) == codes.Unauthenticated || code(err) == codes.PermissionDenied {
		t.Fatal(err)
	}
	var beats int
	for _, r := range auditLines(t, logPath) {
		if r.Method == apiv1.Nodes_Heartbeat_FullMethodName && r.Identity == "node node-a" && r.Name == "node-a" {
			beats++
		}
	}
	if beats != 1 {
		t.Fatalf("%d heartbeat records, want 1", beats)
	}
}

// A console session is recorded once, when it ends, with its code; what
// was typed and shown is not. The node's side (Serve) is a node report.
func TestAuditConsoleSessionOnce(t *testing.T) {
	e, logPath := newAuditEnv(t, Options{})
	n := e.join("node-a")
	e.runningVMI("web", "node-a")
	sctx, cancel := context.WithCancel(ctx())
	defer cancel()
	sessions, err := n.c.Consoles.Sessions(sctx, &apiv1.ConsoleSessionsRequest{NodeName: "node-a"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sessions.Header(); err != nil {
		t.Fatal(err)
	}
	client, err := e.admin().Consoles.Attach(sctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := client.Send(&apiv1.ConsoleInput{Open: &apiv1.ConsoleOpen{Namespace: "default", Name: "web", Interactive: true}}); err != nil {
		t.Fatal(err)
	}
	s, err := sessions.Recv()
	if err != nil {
		t.Fatal(err)
	}
	node, err := n.c.Consoles.Serve(sctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := node.Send(&apiv1.ConsoleOutput{SessionId: s.GetSessionId()}); err != nil {
		t.Fatal(err)
	}
	if err := node.Send(&apiv1.ConsoleOutput{Data: []byte("login: " + marker)}); err != nil {
		t.Fatal(err)
	}
	if out, err := client.Recv(); err != nil || !strings.Contains(string(out.GetData()), marker) {
		t.Fatalf("client got %v, %v", out, err)
	}
	if err := client.Send(&apiv1.ConsoleInput{Data: []byte(marker + "\r")}); err != nil {
		t.Fatal(err)
	}
	if in, err := node.Recv(); err != nil || !strings.Contains(string(in.GetData()), marker) {
		t.Fatalf("node got %v, %v", in, err)
	}
	if err := node.Send(&apiv1.ConsoleOutput{Notice: "instance ended", Final: true}); err != nil {
		t.Fatal(err)
	}
	_ = node.CloseSend()
	for {
		if _, err := client.Recv(); err != nil {
			break
		}
	}
	var got []audit.Record
	deadline := time.Now().Add(10 * time.Second)
	for len(got) < 2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		got = auditLines(t, logPath)
	}
	var consoles []audit.Record
	for _, r := range got {
		if strings.Contains(r.Method, "Consoles") {
			consoles = append(consoles, r)
		}
	}
	if len(consoles) != 1 || consoles[0].Method != apiv1.Consoles_Attach_FullMethodName || consoles[0].Identity != "admin" ||
		consoles[0].Namespace != "default" || consoles[0].Name != "web" || consoles[0].Code != "OK" {
		t.Fatalf("console records: %+v", consoles)
	}
	data, _ := os.ReadFile(logPath)
	if strings.Contains(string(data), marker) {
		t.Error("the audit log holds what was typed or shown")
	}
}
