package apiserver

import (
	"crypto/tls"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
	"github.com/virtplane/terraform-provider-virtplane/internal/pki"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// wantUnauthenticated waits until c's calls are refused as
// Unauthenticated saying msg: the server learns of a revocation through
// its watch.
func wantUnauthenticated(t *testing.T, what string, c *client.Client, msg string) {
	t.Helper()
	testutil.Eventually(t, 10*time.Second, what, func() bool {
		_, err := apiv1.NewAuthClient(c.Conn).WhoAmI(ctx(), &apiv1.WhoAmIRequest{})
		return status.Code(err) == codes.Unauthenticated && strings.Contains(status.Convert(err).Message(), msg)
	})
}

// openWatch opens a watch of namespace a's VMs as c and reads its first
// event; the channel gets the error that ends it.
func openWatch(t *testing.T, c *client.Client) <-chan error {
	t.Helper()
	w, err := c.VMs.Watch(ctx(), &apiv1.WatchVirtualMachinesRequest{Options: &apiv1.WatchOptions{Namespace: "a"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Recv(); err != nil {
		t.Fatalf("first event: %v", err)
	}
	ended := make(chan error, 1)
	go func() {
		for {
			if _, err := w.Recv(); err != nil {
				ended <- err
				return
			}
		}
	}()
	return ended
}

func wantEnded(t *testing.T, what string, ended <-chan error) {
	t.Helper()
	select {
	case err := <-ended:
		if status.Code(err) == codes.OK {
			t.Fatalf("%s: the watch ended without an error", what)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: the watch is still open", what)
	}
}

// Revoking a token, deleting it, disabling its user or deleting its
// service account refuses its next call and ends its open watches.
func TestRevocationEndsOpenCalls(t *testing.T) {
	e := newSecEnv(t, Limits{})
	admin := e.admin()
	creds := apiv1.NewCredentialsClient(admin.Conn)
	eddie := e.user("eddie", "edit a")

	ended := openWatch(t, eddie.c)
	revoked, err := creds.Revoke(ctx(), &apiv1.RevokeCredentialRequest{Name: eddie.cred})
	if err != nil {
		t.Fatal(err)
	}
	if !revoked.Spec.Revoked || revoked.Status.RevokedBy != "admin" || revoked.Status.RevokedAt == nil {
		t.Fatalf("revoked credential %v", revoked)
	}
	wantEnded(t, "revoked token", ended)
	wantUnauthenticated(t, "revoked token refused", eddie.c, "was revoked")

	second := e.issue(eddie.sub, 0)
	wantNoError := func(c *client.Client) {
		testutil.EventuallyNoError(t, 10*time.Second, "token accepted", func() error {
			_, err := apiv1.NewAuthClient(c.Conn).WhoAmI(ctx(), &apiv1.WhoAmIRequest{})
			return err
		})
	}
	wantNoError(second.c)
	ended = openWatch(t, second.c)
	if _, err := creds.Delete(ctx(), &apiv1.DeleteCredentialRequest{Name: second.cred}); err != nil {
		t.Fatal(err)
	}
	wantEnded(t, "deleted token", ended)
	wantUnauthenticated(t, "deleted token refused", second.c, "unknown")

	third := e.issue(eddie.sub, 0)
	wantNoError(third.c)
	ended = openWatch(t, third.c)
	users := apiv1.NewUsersClient(admin.Conn)
	u, err := users.Get(ctx(), &apiv1.GetUserRequest{Name: "eddie"})
	if err != nil {
		t.Fatal(err)
	}
	u.Spec = &apiv1.UserSpec{Disabled: true}
	if _, err := users.Update(ctx(), &apiv1.UpdateUserRequest{User: u}); err != nil {
		t.Fatal(err)
	}
	wantEnded(t, "disabled user", ended)
	wantUnauthenticated(t, "disabled user refused", third.c, "is disabled")

	ci := e.serviceAccount("a", "ci", "edit a")
	ended = openWatch(t, ci.c)
	if _, err := apiv1.NewServiceAccountsClient(admin.Conn).Delete(ctx(), &apiv1.DeleteServiceAccountRequest{Key: &apiv1.ObjectKey{Namespace: "a", Name: "ci"}}); err != nil {
		t.Fatal(err)
	}
	wantEnded(t, "deleted service account", ended)
	wantUnauthenticated(t, "deleted service account's token refused", ci.c, "revoked")
}

// Tokens expire by the server's clock; a wrong secret, a token of a
// credential that never was and a too long life are refused; reads of
// credentials never carry the token's hash.
func TestTokens(t *testing.T) {
	e := newSecEnv(t, Limits{})
	eddie := e.user("eddie", "edit a")
	short := e.issue(eddie.sub, time.Minute)
	testutil.EventuallyNoError(t, 10*time.Second, "short token accepted", func() error {
		_, err := apiv1.NewAuthClient(short.c.Conn).WhoAmI(ctx(), &apiv1.WhoAmIRequest{})
		return err
	})
	e.clock.Step(61 * time.Second)
	wantUnauthenticated(t, "expired token refused", short.c, "expired")
	if _, err := apiv1.NewAuthClient(eddie.c.Conn).WhoAmI(ctx(), &apiv1.WhoAmIRequest{}); err != nil {
		t.Fatalf("a 90-day token after a minute: %v", err)
	}

	name, _, _ := strings.Cut(strings.TrimPrefix(eddie.token, apiv1.TokenPrefix), ".")
	for what, tok := range map[string]string{
		"wrong secret":       apiv1.TokenPrefix + name + ".not-the-secret",
		"no such credential": apiv1.TokenPrefix + "cred-0000000000000000.secret",
		"no secret":          apiv1.TokenPrefix + name,
	} {
		_, err := apiv1.NewAuthClient(e.dial(client.Config{Token: tok}).Conn).WhoAmI(ctx(), &apiv1.WhoAmIRequest{})
		wantCode(t, what, err, codes.Unauthenticated)
	}

	creds := apiv1.NewCredentialsClient(e.admin().Conn)
	_, err := creds.IssueToken(ctx(), &apiv1.IssueTokenRequest{Subject: eddie.sub, TtlSeconds: 3 * 365 * 24 * 3600})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "ttl_seconds") {
		t.Fatalf("a three-year token: %v", err)
	}
	_, err = creds.IssueToken(ctx(), &apiv1.IssueTokenRequest{Subject: &apiv1.Subject{Kind: apiv1.SubjectUser, Name: "ghost"}})
	wantCode(t, "a token for a user that does not exist", err, codes.FailedPrecondition)
	got, err := creds.Get(ctx(), &apiv1.GetCredentialRequest{Name: eddie.cred})
	if err != nil || len(got.Spec.TokenSha256) != 0 || got.Status.IssuedBy != "admin" {
		t.Fatalf("Get = %v, %v; want no hash, issued by admin", got, err)
	}
	list, err := creds.List(ctx(), &apiv1.ListCredentialsRequest{Subject: eddie.sub})
	if err != nil || len(list.Items) != 2 {
		t.Fatalf("List = %v, %v; want eddie's two", list, err)
	}
	for _, cr := range list.Items {
		if len(cr.Spec.TokenSha256) != 0 {
			t.Fatalf("List carries a token hash: %v", cr)
		}
	}
}

// A client certificate of a user authenticates it while its credential
// lists the serial; a node's certificate never authenticates a user, nor
// a user's a node.
func TestUserCertificates(t *testing.T) {
	e := newSecEnv(t, Limits{})
	admin := e.admin()
	alice := e.user("alice", "edit a")
	nk, err := pki.NewNodeKey("whatever-the-csr-says")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := apiv1.NewCredentialsClient(admin.Conn).IssueCertificate(ctx(), &apiv1.IssueCertificateRequest{Subject: alice.sub, CsrPem: nk.CSRPEM, TtlSeconds: 3600})
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tlsPair(resp.CertificatePem, nk)
	if err != nil {
		t.Fatal(err)
	}
	byCert := e.dial(client.Config{ClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return pair, nil }})
	testutil.EventuallyNoError(t, 10*time.Second, "certificate accepted", func() error {
		who, err := apiv1.NewAuthClient(byCert.Conn).WhoAmI(ctx(), &apiv1.WhoAmIRequest{})
		if err == nil && who.Identity != "user alice" {
			t.Fatalf("the certificate authenticates %q", who.Identity)
		}
		return err
	})
	if _, err := byCert.VMs.Create(ctx(), &apiv1.CreateVirtualMachineRequest{Vm: vmIn("a", "web")}); err != nil {
		t.Fatalf("alice's certificate creating in a: %v", err)
	}
	_, err = byCert.VMs.Create(ctx(), &apiv1.CreateVirtualMachineRequest{Vm: vmIn("b", "web")})
	wantDenied(t, "alice's certificate creating in b", err, "needs edit in b")
	_, err = byCert.Nodes.Heartbeat(ctx(), &apiv1.HeartbeatRequest{Name: "alice"})
	wantDenied(t, "a user's certificate acting as a node", err, "needs cluster-admin")

	// A certificate the CA signed for alice that no credential lists.
	cert, certPEM, err := e.ca.SignUserCSR(nk.CSRPEM, pki.UserCommonName(pki.UserCertUser, "", "alice"), time.Now(), time.Hour)
	if err != nil || cert == nil {
		t.Fatal(err)
	}
	stray, err := tlsPair(certPEM, nk)
	if err != nil {
		t.Fatal(err)
	}
	unlisted := e.dial(client.Config{ClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return stray, nil }})
	_, err = apiv1.NewAuthClient(unlisted.Conn).WhoAmI(ctx(), &apiv1.WhoAmIRequest{})
	wantCode(t, "a certificate no credential lists", err, codes.Unauthenticated)

	// A node's certificate is the node's, whatever users exist.
	n := e.join("alice")
	who, err := apiv1.NewAuthClient(n.c.Conn).WhoAmI(ctx(), &apiv1.WhoAmIRequest{})
	if err != nil || who.Identity != "node alice" || len(who.Roles) != 0 {
		t.Fatalf("a node certificate: %v, %v", who, err)
	}
	_, err = n.c.VMs.Create(ctx(), &apiv1.CreateVirtualMachineRequest{Vm: vmIn("a", "db")})
	wantCode(t, "node alice acting as user alice", err, codes.PermissionDenied)

	if _, err := apiv1.NewCredentialsClient(admin.Conn).Revoke(ctx(), &apiv1.RevokeCredentialRequest{Name: resp.Credential.Metadata.Name}); err != nil {
		t.Fatal(err)
	}
	wantUnauthenticated(t, "revoked certificate refused", byCert, "was revoked")
}

// A namespace's admin manages its service accounts, their tokens and its
// role bindings, and nothing of users or other namespaces.
func TestNamespaceAdminManagesServiceAccounts(t *testing.T) {
	e := newSecEnv(t, Limits{})
	ada := e.user("ada", "admin a")
	eddie := e.user("eddie", "edit a")
	sas := apiv1.NewServiceAccountsClient(ada.c.Conn)
	if _, err := sas.Create(ctx(), &apiv1.CreateServiceAccountRequest{ServiceAccount: &apiv1.ServiceAccount{Metadata: &apiv1.ObjectMeta{Namespace: "a", Name: "ci"}}}); err != nil {
		t.Fatal(err)
	}
	_, err := sas.Create(ctx(), &apiv1.CreateServiceAccountRequest{ServiceAccount: &apiv1.ServiceAccount{Metadata: &apiv1.ObjectMeta{Namespace: "b", Name: "ci"}}})
	wantDenied(t, "admin of a making an account in b", err, "needs admin in b")
	_, err = apiv1.NewServiceAccountsClient(eddie.c.Conn).Create(ctx(), &apiv1.CreateServiceAccountRequest{ServiceAccount: &apiv1.ServiceAccount{Metadata: &apiv1.ObjectMeta{Namespace: "a", Name: "ci2"}}})
	wantDenied(t, "edit of a making an account", err, "user eddie (edit in a) may not call ServiceAccounts.Create in namespace a: needs admin in a")
	ci := &apiv1.Subject{Kind: apiv1.SubjectServiceAccount, Namespace: "a", Name: "ci"}
	if _, err := apiv1.NewRoleBindingsClient(ada.c.Conn).Create(ctx(), &apiv1.CreateRoleBindingRequest{RoleBinding: &apiv1.RoleBinding{
		Metadata: &apiv1.ObjectMeta{Namespace: "a", Name: "ci"}, Spec: &apiv1.RoleBindingSpec{Role: apiv1.RoleEdit, Subjects: []*apiv1.Subject{ci}}}}); err != nil {
		t.Fatal(err)
	}
	creds := apiv1.NewCredentialsClient(ada.c.Conn)
	tok, err := creds.IssueToken(ctx(), &apiv1.IssueTokenRequest{Subject: ci})
	if err != nil {
		t.Fatal(err)
	}
	ciClient := e.dial(client.Config{Token: tok.Token})
	testutil.EventuallyNoError(t, 10*time.Second, "the account's token works with its binding", func() error {
		_, err := ciClient.VMs.Create(ctx(), &apiv1.CreateVirtualMachineRequest{Vm: vmIn("a", "web")})
		return err
	})
	_, err = creds.IssueToken(ctx(), &apiv1.IssueTokenRequest{Subject: eddie.sub})
	wantDenied(t, "admin of a issuing a user's token", err, "needs cluster-admin")
	_, err = apiv1.NewCredentialsClient(eddie.c.Conn).IssueToken(ctx(), &apiv1.IssueTokenRequest{Subject: ci})
	wantDenied(t, "edit of a issuing the account's token", err, "needs admin")
	list, err := creds.List(ctx(), &apiv1.ListCredentialsRequest{Subject: ci})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("admin of a listing the account's credentials: %v, %v", list, err)
	}
	_, err = creds.List(ctx(), &apiv1.ListCredentialsRequest{})
	wantDenied(t, "admin of a listing every credential", err, "needs cluster-admin")
	_, err = creds.Get(ctx(), &apiv1.GetCredentialRequest{Name: eddie.cred})
	wantDenied(t, "admin of a reading a user's credential", err, "needs cluster-admin")
	// An account a cluster-admin bound elsewhere is not the namespace
	// admin's to take.
	e.bindRole(ci, "view *")
	testutil.EventuallyNoError(t, 10*time.Second, "a token of an account with a cluster role refused", func() error {
		_, err := creds.IssueToken(ctx(), &apiv1.IssueTokenRequest{Subject: ci})
		if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "may not issue credentials of serviceaccount a/ci") {
			return fmt.Errorf("got %v", err)
		}
		return nil
	})
	if _, err := creds.Revoke(ctx(), &apiv1.RevokeCredentialRequest{Name: tok.Credential.Metadata.Name}); err != nil {
		t.Fatalf("admin of a revoking the account's token: %v", err)
	}
	wantUnauthenticated(t, "the revoked account token", ciClient, "was revoked")
}

// Deleting a user revokes its credentials and takes it out of its
// bindings: a user made again under the name starts with nothing.
func TestDeleteUserForgetsIt(t *testing.T) {
	e := newSecEnv(t, Limits{})
	admin := e.admin()
	eddie := e.user("eddie", "edit a", "view *")
	bobSub := &apiv1.Subject{Kind: apiv1.SubjectUser, Name: "bob"}
	e.user("bob", "edit a")
	// A binding of both: eddie's removal leaves bob in it.
	if _, err := apiv1.NewRoleBindingsClient(admin.Conn).Create(ctx(), &apiv1.CreateRoleBindingRequest{RoleBinding: &apiv1.RoleBinding{
		Metadata: &apiv1.ObjectMeta{Namespace: "b", Name: "both"}, Spec: &apiv1.RoleBindingSpec{Role: apiv1.RoleView, Subjects: []*apiv1.Subject{eddie.sub, bobSub}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := apiv1.NewUsersClient(admin.Conn).Delete(ctx(), &apiv1.DeleteUserRequest{Name: "eddie"}); err != nil {
		t.Fatal(err)
	}
	wantUnauthenticated(t, "deleted user's token", eddie.c, "")
	rbs, err := apiv1.NewRoleBindingsClient(admin.Conn).List(ctx(), &apiv1.ListRoleBindingsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, rb := range rbs.Items {
		for _, s := range rb.Spec.Subjects {
			if s.Name == "eddie" {
				t.Fatalf("eddie is still in %s/%s", rb.Metadata.Namespace, rb.Metadata.Name)
			}
		}
		if rb.Metadata.Name == "both" && len(rb.Spec.Subjects) != 1 {
			t.Fatalf("binding both: %v", rb.Spec.Subjects)
		}
	}
	crbs, err := apiv1.NewClusterRoleBindingsClient(admin.Conn).List(ctx(), &apiv1.ListClusterRoleBindingsRequest{})
	if err != nil || len(crbs.Items) != 0 {
		t.Fatalf("cluster role bindings after deleting their only subject: %v, %v", crbs, err)
	}
	again := e.user("eddie")
	who, err := apiv1.NewAuthClient(again.c.Conn).WhoAmI(ctx(), &apiv1.WhoAmIRequest{})
	if err != nil || len(who.Roles) != 0 {
		t.Fatalf("eddie made again: %v, %v", who, err)
	}
}

// Images are written by the editors of the namespace that owns them
// (label virtplane.io/namespace), and only cluster-admins move them.
func TestImageOwnership(t *testing.T) {
	e := newSecEnv(t, Limits{})
	eddie := e.user("eddie", "edit a")
	bob := e.user("bob", "edit b")
	img := validImage("os.qcow2")
	_, err := eddie.c.Images.Create(ctx(), &apiv1.CreateImageRequest{Image: img})
	wantDenied(t, "an image without an owner", err, "needs cluster-admin for an image without the label virtplane.io/namespace")
	img.Metadata.Labels = map[string]string{apiv1.LabelOwnerNamespace: "a"}
	created, err := eddie.c.Images.Create(ctx(), &apiv1.CreateImageRequest{Image: img})
	if err != nil {
		t.Fatalf("edit of a making an image of a: %v", err)
	}
	img.Metadata.Labels[apiv1.LabelOwnerNamespace] = "b"
	_, err = bob.c.Images.Create(ctx(), &apiv1.CreateImageRequest{Image: validImage("other.qcow2")})
	wantDenied(t, "edit of b making an image without owner", err, "needs cluster-admin")
	moved := created
	moved.Metadata.Labels = map[string]string{apiv1.LabelOwnerNamespace: "b"}
	_, err = eddie.c.Images.Update(ctx(), &apiv1.UpdateImageRequest{Image: moved})
	wantDenied(t, "edit of a moving its image to b", err, "changing the label virtplane.io/namespace")
	_, err = bob.c.Images.Delete(ctx(), &apiv1.DeleteImageRequest{Name: "os.qcow2"})
	wantDenied(t, "edit of b deleting a's image", err, "needs edit in a")
	if _, err := bob.c.Images.Get(ctx(), &apiv1.GetImageRequest{Name: "os.qcow2"}); err != nil {
		t.Fatalf("edit of b reading a's image (images are read by all): %v", err)
	}
	if _, err := eddie.c.Images.Delete(ctx(), &apiv1.DeleteImageRequest{Name: "os.qcow2"}); err != nil {
		t.Fatalf("edit of a deleting its image: %v", err)
	}
}

// A caller who loses the role an open watch needs (its binding deleted or
// changed) has that watch ended; a change that leaves the role leaves it.
func TestLosingARoleEndsOpenCalls(t *testing.T) {
	e := newSecEnv(t, Limits{})
	admin := e.admin()
	eddie := e.user("eddie", "edit a")
	rbs := apiv1.NewRoleBindingsClient(admin.Conn)
	key := &apiv1.ObjectKey{Namespace: "a", Name: "user-eddie-edit"}

	ended := openWatch(t, eddie.c)
	// Edit to view still lets it watch; the watch that then sees the
	// binding deleted ends.
	rb, err := rbs.Get(ctx(), &apiv1.GetRoleBindingRequest{Key: key})
	if err != nil {
		t.Fatal(err)
	}
	rb.Spec.Role = apiv1.RoleView
	if _, err := rbs.Update(ctx(), &apiv1.UpdateRoleBindingRequest{RoleBinding: rb}); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyNoError(t, 10*time.Second, "eddie down to view", func() error {
		_, err := eddie.c.VMs.Create(ctx(), &apiv1.CreateVirtualMachineRequest{Vm: vmIn("a", "web")})
		if status.Code(err) != codes.PermissionDenied {
			return fmt.Errorf("create as view: %v", err)
		}
		return nil
	})
	select {
	case err := <-ended:
		t.Fatalf("a watch a viewer may keep ended: %v", err)
	default:
	}
	if _, err := rbs.Delete(ctx(), &apiv1.DeleteRoleBindingRequest{Key: key}); err != nil {
		t.Fatal(err)
	}
	wantEnded(t, "binding deleted", ended)

	// A watch of every namespace by a cluster viewer ends when its
	// ClusterRoleBinding goes.
	vic := e.user("vic", "view *")
	w, err := vic.c.VMs.Watch(ctx(), &apiv1.WatchVirtualMachinesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Recv(); err != nil {
		t.Fatal(err)
	}
	vicEnded := make(chan error, 1)
	go func() {
		for {
			if _, err := w.Recv(); err != nil {
				vicEnded <- err
				return
			}
		}
	}()
	if _, err := apiv1.NewClusterRoleBindingsClient(admin.Conn).Delete(ctx(), &apiv1.DeleteClusterRoleBindingRequest{Name: "user-vic-view"}); err != nil {
		t.Fatal(err)
	}
	wantEnded(t, "cluster binding deleted", vicEnded)
}
