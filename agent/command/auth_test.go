package command

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

func startTenancy(t *testing.T) (*fakeTenancy, string) {
	t.Helper()
	f := newFakeTenancy()
	return f, serveUnix(t, f.register)
}

func i64(n int64) *int64   { return &n }
func str(s string) *string { return &s }

// get namespace puts usage beside the quota, USED/LIMIT, and what is
// unbounded alone; -o wide adds storage per class and the allow-lists;
// -o yaml is the whole object.
func TestGetNamespaceShowsQuotaAndUsage(t *testing.T) {
	f, ep := startTenancy(t)
	f.locked(func() {
		f.namespaces[fakeKey("", "team-a")] = &apiv1.Namespace{
			Metadata: &apiv1.ObjectMeta{Name: "team-a"},
			Spec: &apiv1.NamespaceSpec{
				Quota: &apiv1.NamespaceQuota{Vcpus: i64(16), Memory: str("64Gi"), Vms: i64(10),
					PersistentStorage: map[string]string{"ceph": "500Gi"}},
				Allowed: &apiv1.NamespaceAllowed{Bridges: &apiv1.StringList{Items: []string{"br1", "br0"}}, Networks: &apiv1.StringList{}},
			},
			Status: &apiv1.NamespaceStatus{Used: &apiv1.NamespaceUsage{Vcpus: 14, Memory: "28Gi", Vms: 7, Images: 2,
				PersistentStorage: map[string]string{"ceph": "120Gi", "": "10Gi"}}},
		}
		f.namespaces[fakeKey("", "team-b")] = &apiv1.Namespace{Metadata: &apiv1.ObjectMeta{Name: "team-b"}}
	})
	want := "" +
		"NAME     VCPUS   MEMORY      VMS    IMAGES   AGE\n" +
		"team-a   14/16   28Gi/64Gi   7/10   2        <unknown>\n" +
		"team-b   0       0           0      0        <unknown>\n"
	if out := mustRun(t, ep, "get", "namespaces"); out != want {
		t.Errorf("get namespaces:\n%s\nwant:\n%s", out, want)
	}
	wide := mustRun(t, ep, "get", "ns", "team-a", "-o", "wide")
	for _, w := range []string{"STORAGE  ", "local=10Gi,ceph=120Gi/500Gi", "br0,br1", "<nothing>", "<all>"} {
		if !strings.Contains(wide, w) {
			t.Errorf("get ns team-a -o wide lacks %q:\n%s", w, wide)
		}
	}
	out := mustRun(t, ep, "get", "namespace", "team-a", "-o", "yaml")
	for _, w := range []string{"kind: Namespace\n", "vcpus: \"16\"", "memory: 64Gi", "used:", "memory: 28Gi", "ceph: 500Gi"} {
		if !strings.Contains(out, w) {
			t.Errorf("get namespace team-a -o yaml lacks %q:\n%s", w, out)
		}
	}
}

// set-quota makes a namespace that has no object yet, changes only the
// bounds it names (again after a conflicting write), and refuses a
// mistake naming the item before it calls anything.
func TestNamespaceSetQuota(t *testing.T) {
	f, ep := startTenancy(t)
	if out := mustRun(t, ep, "namespace", "set-quota", "team-a", "vcpus=16", "memory=64Gi", "vms=10", "images=5", "storage.ceph=500Gi", "storage=20Gi"); out != "namespace/team-a created\n" {
		t.Errorf("first set-quota printed %q", out)
	}
	f.locked(func() { f.conflicts = 2 })
	if out := mustRun(t, ep, "namespace", "set-quota", "team-a", "vcpus=32", "images=none", "storage.ceph=none"); out != "namespace/team-a configured\n" {
		t.Errorf("second set-quota printed %q", out)
	}
	var got *apiv1.NamespaceQuota
	f.locked(func() { got = f.namespaces[fakeKey("", "team-a")].GetSpec().GetQuota() })
	want := &apiv1.NamespaceQuota{Vcpus: i64(32), Memory: str("64Gi"), Vms: i64(10), PersistentStorage: map[string]string{"": "20Gi"}}
	if !proto.Equal(got, want) {
		t.Errorf("quota %v, want %v", got, want)
	}
	for _, tt := range []struct{ item, want string }{
		{"cpus=4", `unknown key "cpus"`},
		{"vcpus=-1", `quota vcpus="-1": want a whole number`},
		{"memory=64GB", `quota memory="64GB": want a quantity`},
		{"storage.=1Gi", "storage.CLASS needs a class name"},
		{"vms", `quota item "vms": want KEY=VALUE`},
	} {
		if _, _, err := run(t, ep, "namespace", "set-quota", "team-a", tt.item); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("set-quota %s: %v, want %q", tt.item, err, tt.want)
		}
	}
}

// allow replaces the lists it is given, keeps the others, --bridges=
// allows none, --clear removes a list.
func TestNamespaceAllow(t *testing.T) {
	f, ep := startTenancy(t)
	mustRun(t, ep, "namespace", "create", "team-a")
	mustRun(t, ep, "namespace", "allow", "team-a", "--bridges", "br0", "--networks", "default", "--storage-classes", "ceph,local",
		"--port-forward-ranges", "20000-20999")
	mustRun(t, ep, "namespace", "allow", "team-a", "--bridges=", "--clear", "networks")
	var got *apiv1.NamespaceAllowed
	f.locked(func() { got = f.namespaces[fakeKey("", "team-a")].GetSpec().GetAllowed() })
	want := &apiv1.NamespaceAllowed{Bridges: &apiv1.StringList{Items: []string{}}, StorageClasses: &apiv1.StringList{Items: []string{"ceph", "local"}},
		PortForwardRanges: &apiv1.StringList{Items: []string{"20000-20999"}}}
	if !proto.Equal(got, want) {
		t.Errorf("allowed %v, want %v", got, want)
	}
	if got.GetBridges() == nil {
		t.Error("--bridges= removed the list instead of allowing nothing")
	}
	for _, args := range [][]string{{"team-a"}, {"team-a", "--clear", "ports"}, {"team-a", "--clear", "bridges", "--bridges", "br0"}} {
		if _, _, err := run(t, ep, append([]string{"namespace", "allow"}, args...)...); err == nil {
			t.Errorf("namespace allow %q succeeded", args)
		}
	}
}

func TestAuthUsersAndServiceAccounts(t *testing.T) {
	f, ep := startTenancy(t)
	if out := mustRun(t, ep, "auth", "user", "create", "alice", "--description", "Alice A."); out != "user/alice created\n" {
		t.Errorf("user create printed %q", out)
	}
	mustRun(t, ep, "auth", "user", "disable", "alice")
	f.locked(func() { f.conflicts = 1 })
	if out := mustRun(t, ep, "auth", "user", "list"); !strings.Contains(out, "alice   True       Alice A.") {
		t.Errorf("user list after disable:\n%s", out)
	}
	if out := mustRun(t, ep, "auth", "user", "enable", "alice"); out != "user/alice enabled\n" {
		t.Errorf("user enable printed %q", out)
	}
	if out := mustRun(t, ep, "get", "user", "alice"); !strings.Contains(out, "alice   False") {
		t.Errorf("get user alice:\n%s", out)
	}
	mustRun(t, ep, "auth", "user", "delete", "alice")
	if _, _, err := run(t, ep, "get", "user", "alice"); err == nil || err.Error() != `user "alice" not found` {
		t.Errorf("get user alice after delete: %v", err)
	}

	mustRun(t, ep, "auth", "sa", "create", "deployer", "-n", "team-a", "--description", "CI")
	mustRun(t, ep, "auth", "serviceaccount", "create", "other", "-n", "team-b")
	if out := mustRun(t, ep, "auth", "sa", "list", "-n", "team-a"); !strings.HasPrefix(out, "NAME       DESCRIPTION   AGE\ndeployer   CI") || strings.Contains(out, "other") {
		t.Errorf("sa list -n team-a:\n%s", out)
	}
	if out := mustRun(t, ep, "get", "sa", "-A"); !strings.Contains(out, "team-b      other") {
		t.Errorf("get sa -A:\n%s", out)
	}
	mustRun(t, ep, "auth", "sa", "delete", "deployer", "-n", "team-a")
	if _, _, err := run(t, ep, "auth", "sa", "delete", "deployer", "-n", "team-a"); err == nil || err.Error() != `serviceaccount "deployer" not found` {
		t.Errorf("second delete: %v", err)
	}
}

// token issue prints the token and nothing else, so that > file holds
// it; list shows no secret; revoke marks it.
func TestAuthTokens(t *testing.T) {
	f, ep := startTenancy(t)
	out, errOut, err := run(t, ep, "auth", "token", "issue", "--service-account", "team-a/deployer", "--ttl", "720h", "--description", "CI")
	if err != nil || out != "vpt_cred-0001.s3cr3t\n" || errOut != "" {
		t.Fatalf("token issue: %q, %q, %v", out, errOut, err)
	}
	var req *apiv1.IssueTokenRequest
	f.locked(func() { req = f.lastToken })
	want := &apiv1.IssueTokenRequest{Subject: &apiv1.Subject{Kind: apiv1.SubjectServiceAccount, Namespace: "team-a", Name: "deployer"},
		TtlSeconds: 720 * 3600, Description: "CI"}
	if !proto.Equal(req, want) {
		t.Errorf("IssueToken %v, want %v", req, want)
	}
	mustRun(t, ep, "auth", "token", "issue", "--user", "alice")

	list := mustRun(t, ep, "auth", "token", "list", "--user", "alice")
	if strings.Contains(list, "deployer") || !strings.Contains(list, "cred-0002   Token   user alice") || strings.Contains(list, "s3cr3t") {
		t.Errorf("token list --user alice:\n%s", list)
	}
	if out := mustRun(t, ep, "auth", "token", "revoke", "cred-0001"); out != "credential/cred-0001 revoked\n" {
		t.Errorf("revoke printed %q", out)
	}
	if out := mustRun(t, ep, "get", "credentials", "-o", "wide"); !strings.Contains(out, "serviceaccount team-a/deployer") ||
		!strings.Contains(out, "True      CI            admin       admin        2030-01-03T00:00:00Z") {
		t.Errorf("get credentials -o wide:\n%s", out)
	}
	for _, args := range [][]string{
		{"issue"}, {"issue", "--user", "a", "--service-account", "b/c"}, {"issue", "--service-account", "deployer"},
	} {
		if _, _, err := run(t, ep, append([]string{"auth", "token"}, args...)...); err == nil {
			t.Errorf("token %q succeeded", args)
		}
	}
}

// cert issue makes the key here (0600), sends only a request for its
// public key, writes the certificate and CA, and never overwrites.
func TestAuthCertIssue(t *testing.T) {
	f, ep := startTenancy(t)
	dir := filepath.Join(t.TempDir(), "alice")
	out := mustRun(t, ep, "auth", "cert", "issue", "--user", "alice", "--out-dir", dir, "--ttl", "24h")
	if !strings.HasPrefix(out, "credential/cred-0001 issued: "+filepath.Join(dir, "client.crt")) {
		t.Errorf("cert issue printed %q", out)
	}
	st, err := os.Stat(filepath.Join(dir, "client.key"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("client.key: %v, mode %v", err, st.Mode())
	}
	keyPEM, _ := os.ReadFile(filepath.Join(dir, "client.key"))
	kb, _ := pem.Decode(keyPEM)
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	var req *apiv1.IssueCertificateRequest
	f.locked(func() { req = f.lastCert })
	if strings.Contains(string(req.GetCsrPem()), "PRIVATE") {
		t.Fatal("the request carries the private key")
	}
	cb, _ := pem.Decode(req.GetCsrPem())
	csr, err := x509.ParseCertificateRequest(cb.Bytes)
	if err != nil || csr.CheckSignature() != nil || !key.PublicKey.Equal(csr.PublicKey) {
		t.Errorf("the request is not for the key written: %v", err)
	}
	if req.GetTtlSeconds() != 24*3600 || req.GetSubject().GetName() != "alice" {
		t.Errorf("request %v", req)
	}
	for name, want := range map[string]string{"client.crt": "CERT\n", "ca.crt": "CA\n"} {
		if b, _ := os.ReadFile(filepath.Join(dir, name)); string(b) != want {
			t.Errorf("%s holds %q", name, b)
		}
	}
	if _, _, err := run(t, ep, "auth", "cert", "issue", "--user", "alice", "--out-dir", dir); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Errorf("a second issue into the same directory: %v", err)
	}
}

func TestAuthBindings(t *testing.T) {
	f, ep := startTenancy(t)
	if out := mustRun(t, ep, "auth", "bind", "--role", "edit", "-n", "team-a", "--service-account", "team-a/deployer"); out != "rolebinding/edit-sa-team-a-deployer created\n" {
		t.Errorf("bind printed %q", out)
	}
	mustRun(t, ep, "auth", "bind", "--role", "view", "-n", "team-b", "--user", "alice", "--name", "alice-reads")
	if out := mustRun(t, ep, "auth", "bind", "--cluster", "--role", "cluster-admin", "--user", "root"); out != "clusterrolebinding/cluster-admin-user-root created\n" {
		t.Errorf("bind --cluster printed %q", out)
	}
	var b *apiv1.RoleBinding
	f.locked(func() { b = f.bindings[fakeKey("team-a", "edit-sa-team-a-deployer")] })
	if b.GetSpec().GetRole() != "edit" || len(b.GetSpec().GetSubjects()) != 1 || b.GetSpec().GetSubjects()[0].GetNamespace() != "team-a" {
		t.Errorf("binding %v", b)
	}
	want := "" +
		"NAMESPACE   NAME                      ROLE            SUBJECTS\n" +
		"team-a      edit-sa-team-a-deployer   edit            serviceaccount:team-a/deployer\n" +
		"team-b      alice-reads               view            user:alice\n" +
		"<cluster>   cluster-admin-user-root   cluster-admin   user:root\n"
	if out := mustRun(t, ep, "auth", "bindings", "list", "-A"); out != want {
		t.Errorf("bindings list -A:\n%s\nwant:\n%s", out, want)
	}
	if out := mustRun(t, ep, "get", "rolebindings", "-n", "team-b"); !strings.Contains(out, "alice-reads   view   user:alice") {
		t.Errorf("get rolebindings -n team-b:\n%s", out)
	}
	mustRun(t, ep, "auth", "unbind", "alice-reads", "-n", "team-b")
	mustRun(t, ep, "auth", "unbind", "--cluster", "cluster-admin-user-root")
	if out := mustRun(t, ep, "auth", "bindings", "list", "-A"); strings.Contains(out, "alice") || strings.Contains(out, "root") {
		t.Errorf("after unbind:\n%s", out)
	}
}

// A refusal is the server's message as it is: it names the role that
// would allow the call.
func TestAuthRefusalIsVerbatim(t *testing.T) {
	f, ep := startTenancy(t)
	const msg = "serviceaccount team-a/deployer (edit in team-a) may not call RoleBindings.Create: needs admin in team-a"
	f.locked(func() { f.deny = msg })
	_, _, err := run(t, ep, "auth", "bind", "--role", "edit", "-n", "team-a", "--user", "bob")
	if err == nil || err.Error() != msg || status.Code(err) != codes.PermissionDenied {
		t.Errorf("bind refused: %v, want %q", err, msg)
	}
	const quota = "namespace team-a: exceeded quota: vcpus: requested 4, used 14, limited 16"
	f.locked(func() { f.deny = "" })
	// The quota's refusal goes through apply the same way.
	_, _, err = runIn(t, ep, "kind: Namespace\nmetadata: {name: team-a}\nspec: {quota: {vcpus: 16}}\n", "apply", "-f", "-")
	if err != nil {
		t.Fatal(err)
	}
	f.locked(func() { f.deny = quota })
	if _, _, err := run(t, ep, "namespace", "set-quota", "team-a", "vcpus=1"); err == nil || err.Error() != quota {
		t.Errorf("set-quota refused: %v", err)
	}
}

func TestAuthWhoAmIAndCanI(t *testing.T) {
	f, ep := startTenancy(t)
	want := "" +
		"identity:     serviceaccount team-a/deployer\n" +
		"credential:   cred-0001\n" +
		"expires:      2030-01-02T03:04:05Z\n" +
		"roles:        edit in team-a\n"
	if out := mustRun(t, ep, "auth", "whoami"); out != want {
		t.Errorf("whoami:\n%s\nwant:\n%s", out, want)
	}
	if out := mustRun(t, ep, "auth", "can-i", "VirtualMachines.Create", "-n", "team-a"); out != "yes\n" {
		t.Errorf("can-i in team-a: %q", out)
	}
	out, _, err := run(t, ep, "auth", "can-i", "VirtualMachines.Create", "-n", "team-b")
	if out != "no\n" || err == nil || !strings.HasSuffix(err.Error(), "needs edit in team-b") {
		t.Errorf("can-i in team-b: %q, %v", out, err)
	}
	var req *apiv1.CanIRequest
	f.locked(func() { req = f.lastCanI })
	if req.GetMethod() != "VirtualMachines.Create" || req.GetNamespace() != "team-b" {
		t.Errorf("CanI request %v", req)
	}
}

func TestAuditCommand(t *testing.T) {
	f, ep := startTenancy(t)
	f.locked(func() {
		f.records = []*apiv1.AuditRecord{{
			Time: timestamppb.New(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)), Identity: "serviceaccount team-a/deployer", Role: "edit in team-a",
			Method: "/virtplane.v1.VirtualMachines/Create", Namespace: "team-a", Name: "web", Code: "ResourceExhausted",
			Message: "namespace team-a: exceeded quota: vms: requested 1, used 10, limited 10",
		}}
	})
	before := time.Now()
	out := mustRun(t, ep, "audit", "--since", "1h", "--identity", "serviceaccount team-a/deployer", "--method", "Create", "-n", "team-a", "--limit", "5")
	want := "" +
		"TIME                   IDENTITY                         ROLE             METHOD                   NAMESPACE   NAME   CODE                MESSAGE\n" +
		"2030-01-02T03:04:05Z   serviceaccount team-a/deployer   edit in team-a   VirtualMachines.Create   team-a      web    ResourceExhausted   namespace team-a: exceeded quota: vms: requested 1, used 10, limited 10\n"
	if out != want {
		t.Errorf("audit:\n%s\nwant:\n%s", out, want)
	}
	var req *apiv1.ReadAuditRequest
	f.locked(func() { req = f.lastAudit })
	since := req.GetSince().AsTime()
	if since.Before(before.Add(-time.Hour-time.Second)) || since.After(time.Now().Add(-time.Hour)) || req.GetLimit() != 5 ||
		req.GetIdentity() != "serviceaccount team-a/deployer" || req.GetMethod() != "Create" || req.GetNamespace() != "team-a" {
		t.Errorf("ReadAudit request %v (since %v)", req, since)
	}
	js := mustRun(t, ep, "audit", "-o", "json")
	f.locked(func() { req = f.lastAudit })
	if req.GetNamespace() != "" || req.GetSince() != nil {
		t.Errorf("audit without -n or --since filtered: %v", req)
	}
	if strings.Count(js, "\n") != 1 || !strings.HasPrefix(js, `{"time":"2030-01-02T03:04:05Z","identity":"serviceaccount team-a/deployer"`) {
		t.Errorf("audit -o json: %q", js)
	}
}

// apply -f takes the tenancy kinds; a cluster-scoped one refuses a
// namespace.
func TestApplyTenancyKinds(t *testing.T) {
	f, ep := startTenancy(t)
	manifests := `kind: Namespace
metadata: {name: team-a}
spec:
  quota: {vcpus: 16, memory: 64Gi, vms: 10}
  allowed: {bridges: {items: [br0]}}
---
kind: ServiceAccount
metadata: {name: deployer}
spec: {description: CI}
---
kind: RoleBinding
metadata: {name: deployer-edit}
spec:
  role: edit
  subjects: [{kind: ServiceAccount, namespace: team-a, name: deployer}]
---
kind: User
metadata: {name: alice}
---
kind: ClusterRoleBinding
metadata: {name: alice-admin}
spec: {role: cluster-admin, subjects: [{kind: User, name: alice}]}
`
	out, _, err := runIn(t, ep, manifests, "apply", "-n", "team-a", "-f", "-")
	want := "namespace/team-a created\nserviceaccount/deployer created\nrolebinding/deployer-edit created\nuser/alice created\nclusterrolebinding/alice-admin created\n"
	if err != nil || out != want {
		t.Fatalf("apply: %q, %v", out, err)
	}
	f.locked(func() {
		if f.accounts[fakeKey("team-a", "deployer")] == nil || f.bindings[fakeKey("team-a", "deployer-edit")] == nil {
			t.Error("the service account or binding is not in team-a")
		}
	})
	if out, _, err := runIn(t, ep, manifests, "apply", "-n", "team-a", "-f", "-"); err != nil || strings.Count(out, "unchanged") != 5 {
		t.Errorf("second apply: %q, %v", out, err)
	}
	if _, _, err := runIn(t, ep, "kind: User\nmetadata: {name: bob, namespace: x}\n", "apply", "-f", "-"); err == nil || !strings.Contains(err.Error(), "cluster-scoped") {
		t.Errorf("a namespaced user: %v", err)
	}
	if _, _, err := run(t, ep, "get", "sa", "-w"); err == nil || !strings.Contains(err.Error(), "no watch call") {
		t.Errorf("get sa -w: %v", err)
	}
}
