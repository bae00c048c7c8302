package provider_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/provider/internal/acctest"
)

// Acceptance tests of issue 36 (docs/security.md): Terraform with a
// namespaced edit token, and the tenancy resources with the admin's.

// team is a namespace a cluster-admin prepared for a team: a quota, a
// service account "ci" bound to edit there, and a token of it.
type team struct {
	namespace, token string
}

// newTeam prepares a team through the admin's client, as a cluster-admin
// would with virtplane-agent namespace/auth, and undoes it when the test
// ends (after Terraform destroyed what it made in the namespace).
func newTeam(t *testing.T, agent *acctest.Agent, quota *apiv1.NamespaceQuota) team {
	t.Helper()
	ctx, c := t.Context(), agent.Client
	ns := acctest.RandomName("team")
	if _, err := c.Namespaces.Create(ctx, &apiv1.CreateNamespaceRequest{Namespace: &apiv1.Namespace{
		Metadata: &apiv1.ObjectMeta{Name: ns}, Spec: &apiv1.NamespaceSpec{Quota: quota},
	}}); err != nil {
		t.Fatalf("create namespace %s: %v", ns, err)
	}
	if _, err := c.ServiceAccounts.Create(ctx, &apiv1.CreateServiceAccountRequest{ServiceAccount: &apiv1.ServiceAccount{
		Metadata: &apiv1.ObjectMeta{Namespace: ns, Name: "ci"},
	}}); err != nil {
		t.Fatalf("create service account %s/ci: %v", ns, err)
	}
	sa := &apiv1.Subject{Kind: apiv1.SubjectServiceAccount, Namespace: ns, Name: "ci"}
	if _, err := c.RoleBindings.Create(ctx, &apiv1.CreateRoleBindingRequest{RoleBinding: &apiv1.RoleBinding{
		Metadata: &apiv1.ObjectMeta{Namespace: ns, Name: "ci-edit"},
		Spec:     &apiv1.RoleBindingSpec{Role: apiv1.RoleEdit, Subjects: []*apiv1.Subject{sa}},
	}}); err != nil {
		t.Fatalf("bind edit in %s: %v", ns, err)
	}
	issued, err := c.Credentials.IssueToken(ctx, &apiv1.IssueTokenRequest{Subject: sa, TtlSeconds: 3600, Description: t.Name()})
	if err != nil {
		t.Fatalf("issue a token of %s/ci: %v", ns, err)
	}
	t.Cleanup(func() {
		// t.Context() is canceled before cleanups run.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = c.Credentials.Revoke(ctx, &apiv1.RevokeCredentialRequest{Name: issued.GetCredential().GetMetadata().GetName()})
		_, _ = c.RoleBindings.Delete(ctx, &apiv1.DeleteRoleBindingRequest{Key: &apiv1.ObjectKey{Namespace: ns, Name: "ci-edit"}})
		_, _ = c.ServiceAccounts.Delete(ctx, &apiv1.DeleteServiceAccountRequest{Key: &apiv1.ObjectKey{Namespace: ns, Name: "ci"}})
		if _, err := c.Namespaces.Delete(ctx, &apiv1.DeleteNamespaceRequest{Name: ns}); err != nil {
			t.Errorf("delete namespace %s after the test (it should be empty): %v", ns, err)
		}
	})
	return team{namespace: ns, token: issued.GetToken()}
}

// cleanupContext is a context for a cleanup's calls (t.Context() is
// canceled before cleanups run), ended when the test's cleanups are.
func cleanupContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// providerBlock points the provider at the agent's TLS listener with the
// team's token: what a CI job of the team would configure.
func (tm team) providerBlock(agent *acctest.Agent) string {
	return fmt.Sprintf("provider %q {\n  endpoint = %q\n  ca_file  = %q\n  token    = %q\n}\n",
		acctest.ProviderName, "https://"+agent.TLS.Endpoint, agent.TLS.CAFile, tm.token)
}

// tlsAgent is the shared agent, skipping t when it is external: its TLS
// listener and the admin client that prepares the team are the harness's.
func tlsAgent(t *testing.T) *acctest.Agent {
	t.Helper()
	agent := acctest.SharedAgent(t)
	if agent.TLS == nil {
		t.Skip("external agent: the namespaced token is issued through the in-process agent's TLS listener")
	}
	return agent
}

// checkTeamEmpty verifies destroy left no VM or pool in the namespace
// (read with the admin's client).
func checkTeamEmpty(t *testing.T, agent *acctest.Agent, ns string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		vms, err := agent.Client.VMs.List(t.Context(), &apiv1.ListVirtualMachinesRequest{Options: &apiv1.ListOptions{Namespace: ns}})
		if err != nil {
			return err
		}
		pools, err := agent.Client.Pools.List(t.Context(), &apiv1.ListPoolsRequest{Options: &apiv1.ListOptions{Namespace: ns}})
		if err != nil {
			return err
		}
		if n, m := len(vms.GetItems()), len(pools.GetItems()); n+m > 0 {
			return fmt.Errorf("namespace %s still has %d VMs and %d pools after destroy", ns, n, m)
		}
		return nil
	}
}

// The issue's acceptance point: with an edit token of one namespace,
// Terraform creates, updates, imports and destroys a VM and a pool there
// and reads the namespace (its quota and usage), the VM and an image
// through data sources; a resource the role does not allow (a storage class, a VM in
// another namespace) fails with the role that would allow it.
func TestAccTenancy_editToken(t *testing.T) {
	agent := tlsAgent(t)
	tm := newTeam(t, agent, &apiv1.NamespaceQuota{Vcpus: proto.Int64(8), Memory: proto.String("4Gi"), Vms: proto.Int64(5)})
	ns, vmName, poolName := tm.namespace, acctest.RandomName("vm"), acctest.RandomName("pool")
	// A cluster-admin's image, which every editor reads (images are
	// cluster-wide); on demand, so no node pulls it.
	image := acctest.RandomName("img")
	if _, err := agent.Client.Images.Create(t.Context(), &apiv1.CreateImageRequest{Image: &apiv1.Image{
		Metadata: &apiv1.ObjectMeta{Name: image}, Spec: &apiv1.ImageSpec{Url: "http://127.0.0.1:9/" + image + ".qcow2"},
	}}); err != nil {
		t.Fatalf("create image %s: %v", image, err)
	}
	t.Cleanup(func() { _, _ = agent.Client.Images.Delete(cleanupContext(t), &apiv1.DeleteImageRequest{Name: image}) })
	cfg := func(vmMemory string, replicas int, extra string) string {
		return editConfig(agent, tm, vmName, poolName, vmMemory, replicas, extra) +
			fmt.Sprintf("\ndata \"virtplane_image\" \"base\" {\n  name = %q\n}\n", image)
	}
	used := func(vms int64) []statecheck.StateCheck {
		return []statecheck.StateCheck{
			statecheck.ExpectKnownValue("data.virtplane_namespace.team", tfjsonpath.New("used").AtMapKey("vms"), knownvalue.Int64Exact(vms)),
			statecheck.ExpectKnownValue("data.virtplane_namespace.team", tfjsonpath.New("quota").AtMapKey("vms"), knownvalue.Int64Exact(5)),
			statecheck.ExpectKnownValue("data.virtplane_virtual_machine.test", tfjsonpath.New("namespace"), knownvalue.StringExact(ns)),
			statecheck.ExpectKnownValue("data.virtplane_image.base", tfjsonpath.New("name"), knownvalue.StringExact(image)),
		}
	}
	const vmAddr, poolAddr = "virtplane_virtual_machine.test", "virtplane_virtual_machine_pool.test"
	// The refusals name the role that would allow the call.
	forbiddenClass := fmt.Sprintf(`
resource "virtplane_storage_class" "forbidden" {
  name = %q
  shared_filesystem {
    path = "/mnt/forbidden"
  }
}
`, acctest.RandomName("sc"))
	forbiddenVM := fmt.Sprintf(`
resource "virtplane_virtual_machine" "elsewhere" {
  namespace    = "default"
  name         = %q
  run_strategy = "Halted"
  memory       = "64Mi"
}
`, acctest.RandomName("vm"))
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProtoV6ProviderFactories,
		CheckDestroy:             checkTeamEmpty(t, agent, ns),
		Steps: []resource.TestStep{
			{
				Config: cfg(guestMemory, 1, ""),
				ConfigStateChecks: append(used(2),
					statecheck.ExpectKnownValue(vmAddr, tfjsonpath.New("id"), knownvalue.StringExact(ns+"/"+vmName)),
					statecheck.ExpectKnownValue(poolAddr, tfjsonpath.New("id"), knownvalue.StringExact(ns+"/"+poolName))),
			},
			{
				Config: cfg(guestMemory2, 2, ""),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(vmAddr, plancheck.ResourceActionUpdate),
					plancheck.ExpectResourceAction(poolAddr, plancheck.ResourceActionUpdate),
				}},
				ConfigStateChecks: append(used(3),
					statecheck.ExpectKnownValue(vmAddr, tfjsonpath.New("memory"), knownvalue.StringExact(guestMemory2))),
			},
			{ResourceName: vmAddr, ImportState: true, ImportStateVerify: true},
			{ResourceName: poolAddr, ImportState: true, ImportStateVerify: true},
			{
				Config:      cfg(guestMemory2, 2, forbiddenClass),
				ExpectError: errorRe("StorageClasses.Create", "needs cluster-admin"),
			},
			{
				Config:      cfg(guestMemory2, 2, forbiddenVM),
				ExpectError: regexp.MustCompile(`(?s)VirtualMachines.Create.*needs\s+\w+\s+in\s+default`),
			},
		},
	})
	checkTeamAudit(t, agent, tm, vmName, poolName)
}

// checkTeamAudit reads the audit trail of the run above (the team's
// service account is the test's own): every write Terraform made with the
// token is there once, with the identity and its role, the refusals too,
// and neither the token's secret nor the VM's user data is.
func checkTeamAudit(t *testing.T, agent *acctest.Agent, tm team, vmName, poolName string) {
	t.Helper()
	identity := "serviceaccount " + tm.namespace + "/ci"
	stream, err := agent.Client.Audit.Read(t.Context(), &apiv1.ReadAuditRequest{Identity: identity, Limit: 10000})
	if err != nil {
		t.Fatalf("read the audit trail: %v", err)
	}
	count := map[string]int{}
	seen := map[string]bool{}
	var updates int
	for {
		r, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("read the audit trail: %v", err)
		}
		line := protojson.Format(r)
		if strings.Contains(line, userDataSecret) || strings.Contains(line, tm.token[strings.Index(tm.token, ".")+1:]) {
			t.Errorf("an audit record holds a secret: %s", line)
		}
		if r.GetIdentity() != identity || r.GetRole() == "" {
			t.Errorf("record without the caller's identity and role: %s", line)
		}
		if seen[line] {
			t.Errorf("recorded twice: %s", line)
		}
		seen[line] = true
		method := r.GetMethod()[strings.LastIndex(r.GetMethod(), ".")+1:]
		count[method+" "+r.GetName()+" "+r.GetCode()]++
		if method == "VirtualMachines/Update" && r.GetName() == vmName && r.GetCode() == "OK" {
			updates++
		}
	}
	for key, want := range map[string]int{
		"VirtualMachines/Create " + vmName + " OK": 1,
		"VirtualMachines/Delete " + vmName + " OK": 1,
		"Pools/Create " + poolName + " OK":         1,
		"Pools/Delete " + poolName + " OK":         1,
		"StorageClasses/Create  PermissionDenied":  1,
	} {
		if count[key] != want {
			t.Errorf("audit trail: %d records of %q, want %d; all: %v", count[key], key, want, count)
		}
	}
	if updates == 0 {
		t.Errorf("audit trail: no update of VM %s; all: %v", vmName, count)
	}
}

// userDataSecret is in the team VM's cloud-init user data: the audit
// trail must never hold it.
const userDataSecret = "s3cret-in-user-data-36"

// editConfig is the team's configuration: a Halted VM and a pool of
// replicas in its namespace, the namespace and the VM read back through
// data sources, and extra.
func editConfig(agent *acctest.Agent, tm team, vmName, poolName, vmMemory string, replicas int, extra string) string {
	ns := tm.namespace
	return tm.providerBlock(agent) + fmt.Sprintf(`
resource "virtplane_virtual_machine" "test" {
  namespace    = %[1]q
  name         = %[2]q
  run_strategy = "Halted"
  memory       = %[3]q
  %[6]s
  disk {
    name = "seed"
    cloud_init {
      user_data = "#cloud-config\npassword: %[10]s\n"
    }
  }
}

resource "virtplane_virtual_machine_pool" "test" {
  namespace = %[1]q
  name      = %[4]q
  replicas  = %[5]d
  virtual_machine_template {
    labels = {
      pool = %[4]q
    }
    memory = %[7]q
    %[6]s
    %[8]s
  }
}

data "virtplane_namespace" "team" {
  name       = %[1]q
  depends_on = [virtplane_virtual_machine.test, virtplane_virtual_machine_pool.test]
}

data "virtplane_virtual_machine" "test" {
  namespace = %[1]q
  name      = virtplane_virtual_machine.test.name
}
%[9]s`, ns, vmName, vmMemory, poolName, replicas, agent.Nodes.NodeSelectorHCL(), guestMemory, agent.Nodes.BootHCL(), extra, userDataSecret)
}

// A VM beyond the namespace's quota fails naming the quota: what is
// used, what is allowed.
func TestAccTenancy_quota(t *testing.T) {
	agent := tlsAgent(t)
	tm := newTeam(t, agent, &apiv1.NamespaceQuota{Vms: proto.Int64(1)})
	name := acctest.RandomName("quota")
	cfg := func(n int) string {
		return tm.providerBlock(agent) + fmt.Sprintf(`
resource "virtplane_virtual_machine" "test" {
  count        = %d
  namespace    = %q
  name         = "%s-${count.index}"
  run_strategy = "Halted"
  memory       = "64Mi"
}
`, n, tm.namespace, name)
	}
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProtoV6ProviderFactories,
		CheckDestroy:             checkTeamEmpty(t, agent, tm.namespace),
		Steps: []resource.TestStep{
			{Config: cfg(1)},
			{Config: cfg(2), ExpectError: errorRe("quota exceeded", "exceeded quota", "vms")},
		},
	})
}

// The tenancy resources with the admin's credentials: a namespace with a
// quota and allow-lists, a user, a service account, bindings and a token;
// in-place updates keep the objects; each imports; a token revoked
// outside Terraform is issued again.
func TestAccTenancy_adminResources(t *testing.T) {
	agent := acctest.SharedAgent(t)
	ns, user := acctest.RandomName("team"), acctest.RandomName("user")
	cfg := func(vcpus int, role, description string) string {
		return agent.ProviderConfig() + fmt.Sprintf(`
resource "virtplane_namespace" "team" {
  name = %[1]q
  quota {
    vcpus              = %[3]d
    memory             = "64Gi"
    vms                = 10
    persistent_storage = { "" = "100Gi" }
  }
  allowed {
    bridges             = ["br0"]
    networks            = []
    port_forward_ranges = ["20000-20999"]
  }
}

resource "virtplane_user" "alice" {
  name        = %[2]q
  description = %[5]q
}

resource "virtplane_service_account" "ci" {
  namespace   = virtplane_namespace.team.name
  name        = "ci"
  description = %[5]q
}

resource "virtplane_role_binding" "ci" {
  namespace = virtplane_namespace.team.name
  name      = "ci"
  role      = %[4]q
  subjects = [
    { kind = "ServiceAccount", namespace = virtplane_service_account.ci.namespace, name = virtplane_service_account.ci.name },
    { kind = "User", name = virtplane_user.alice.name },
  ]
}

resource "virtplane_cluster_role_binding" "alice" {
  name     = %[2]q
  role     = "view"
  subjects = [{ kind = "User", name = virtplane_user.alice.name }]
}

resource "virtplane_service_account_token" "ci" {
  namespace       = virtplane_service_account.ci.namespace
  service_account = virtplane_service_account.ci.name
  ttl             = "720h"
  description     = "acceptance"
}

data "virtplane_namespace" "team" {
  name = virtplane_namespace.team.name
}
`, ns, user, vcpus, role, description)
	}
	var nsUID, tokenID string
	keep := func(addr, attr string, v *string, same bool) resource.TestCheckFunc {
		return func(s *terraform.State) error {
			got := s.RootModule().Resources[addr].Primary.Attributes[attr]
			if *v != "" && (got == *v) != same {
				return fmt.Errorf("%s.%s %s after %s (same wanted: %v)", addr, attr, got, *v, same)
			}
			*v = got
			return nil
		}
	}
	tokenAddr := "virtplane_service_account_token.ci"
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProtoV6ProviderFactories,
		CheckDestroy: func(*terraform.State) error {
			_, err := agent.Client.Namespaces.Get(t.Context(), &apiv1.GetNamespaceRequest{Name: ns})
			if status.Code(err) != codes.NotFound {
				return fmt.Errorf("namespace %s still exists after destroy (err %v)", ns, err)
			}
			if _, err := agent.Client.Users.Get(t.Context(), &apiv1.GetUserRequest{Name: user}); status.Code(err) != codes.NotFound {
				return fmt.Errorf("user %s still exists after destroy (err %v)", user, err)
			}
			return nil
		},
		Steps: []resource.TestStep{
			{
				Config: cfg(16, "edit", "first"),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("virtplane_namespace.team", tfjsonpath.New("used").AtMapKey("vms"), knownvalue.Int64Exact(0)),
					statecheck.ExpectKnownValue("data.virtplane_namespace.team", tfjsonpath.New("quota").AtMapKey("vcpus"), knownvalue.Int64Exact(16)),
					statecheck.ExpectKnownValue("data.virtplane_namespace.team", tfjsonpath.New("allowed").AtMapKey("networks"), knownvalue.ListSizeExact(0)),
					statecheck.ExpectKnownValue("data.virtplane_namespace.team", tfjsonpath.New("allowed").AtMapKey("storage_classes"), knownvalue.Null()),
					statecheck.ExpectKnownValue(tokenAddr, tfjsonpath.New("token"), knownvalue.StringRegexp(regexp.MustCompile(`^vpt_`))),
					statecheck.ExpectKnownValue(tokenAddr, tfjsonpath.New("expires"), knownvalue.NotNull()),
				},
				Check: resource.ComposeTestCheckFunc(
					keep("virtplane_namespace.team", "uid", &nsUID, true),
					keep(tokenAddr, "id", &tokenID, true),
					tokenWorks(t, agent, tokenAddr, ns),
				),
			},
			{
				// Quota, role and descriptions change in place; the token
				// is not touched.
				Config: cfg(32, "admin", "second"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("virtplane_namespace.team", plancheck.ResourceActionUpdate),
					plancheck.ExpectResourceAction("virtplane_role_binding.ci", plancheck.ResourceActionUpdate),
					plancheck.ExpectResourceAction("virtplane_user.alice", plancheck.ResourceActionUpdate),
					plancheck.ExpectResourceAction(tokenAddr, plancheck.ResourceActionNoop),
				}},
				Check: resource.ComposeTestCheckFunc(
					keep("virtplane_namespace.team", "uid", &nsUID, true),
					keep(tokenAddr, "id", &tokenID, true),
				),
			},
			{ResourceName: "virtplane_namespace.team", ImportState: true, ImportStateVerify: true},
			{ResourceName: "virtplane_user.alice", ImportState: true, ImportStateVerify: true},
			{ResourceName: "virtplane_service_account.ci", ImportState: true, ImportStateVerify: true},
			{ResourceName: "virtplane_role_binding.ci", ImportState: true, ImportStateVerify: true},
			{ResourceName: "virtplane_cluster_role_binding.alice", ImportState: true, ImportStateVerify: true},
			{
				// Revoked outside Terraform: the refresh drops it, apply
				// issues another.
				PreConfig: func() {
					if _, err := agent.Client.Credentials.Revoke(t.Context(), &apiv1.RevokeCredentialRequest{Name: tokenID}); err != nil {
						t.Fatalf("revoke %s: %v", tokenID, err)
					}
				},
				Config: cfg(32, "admin", "second"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(tokenAddr, plancheck.ResourceActionCreate),
				}},
				Check: keep(tokenAddr, "id", &tokenID, false),
			},
		},
	})
}

// tokenWorks calls the API with the token in the state: WhoAmI names
// the service account and its role.
func tokenWorks(t *testing.T, agent *acctest.Agent, addr, ns string) resource.TestCheckFunc {
	return func(s *terraform.State) error {
		if agent.TLS == nil {
			return nil // an external agent's TLS settings are the environment's
		}
		token := s.RootModule().Resources[addr].Primary.Attributes["token"]
		c, err := acctest.DialToken(t.Context(), agent, token)
		if err != nil {
			return err
		}
		defer c.Close()
		who, err := c.Auth.WhoAmI(t.Context(), &apiv1.WhoAmIRequest{})
		if err != nil {
			return fmt.Errorf("whoami with the issued token: %w", err)
		}
		if want := "serviceaccount " + ns + "/ci"; who.GetIdentity() != want {
			return fmt.Errorf("the token is %q, want %q", who.GetIdentity(), want)
		}
		return nil
	}
}

// A user's client certificate (made here: the key never leaves the
// test) as the provider's credential: with view in the team's namespace
// the data source reads, and a VM is refused naming the role.
func TestAccTenancy_clientCertificate(t *testing.T) {
	agent := tlsAgent(t)
	tm := newTeam(t, agent, nil)
	user := acctest.RandomName("user")
	c := agent.Client
	if _, err := c.Users.Create(t.Context(), &apiv1.CreateUserRequest{User: &apiv1.User{Metadata: &apiv1.ObjectMeta{Name: user}}}); err != nil {
		t.Fatalf("create user %s: %v", user, err)
	}
	t.Cleanup(func() { _, _ = c.Users.Delete(cleanupContext(t), &apiv1.DeleteUserRequest{Name: user}) })
	if _, err := c.RoleBindings.Create(t.Context(), &apiv1.CreateRoleBindingRequest{RoleBinding: &apiv1.RoleBinding{
		Metadata: &apiv1.ObjectMeta{Namespace: tm.namespace, Name: "viewer"},
		Spec:     &apiv1.RoleBindingSpec{Role: apiv1.RoleView, Subjects: []*apiv1.Subject{{Kind: apiv1.SubjectUser, Name: user}}},
	}}); err != nil {
		t.Fatalf("bind view: %v", err)
	}
	t.Cleanup(func() {
		_, _ = c.RoleBindings.Delete(cleanupContext(t), &apiv1.DeleteRoleBindingRequest{Key: &apiv1.ObjectKey{Namespace: tm.namespace, Name: "viewer"}})
	})
	certFile, keyFile := issueClientCertificate(t, agent, &apiv1.Subject{Kind: apiv1.SubjectUser, Name: user})
	providerBlock := fmt.Sprintf("provider %q {\n  endpoint         = %q\n  ca_file          = %q\n  client_cert_file = %q\n  client_key_file  = %q\n}\n",
		acctest.ProviderName, "https://"+agent.TLS.Endpoint, agent.TLS.CAFile, certFile, keyFile)
	read := fmt.Sprintf("data \"virtplane_namespace\" \"team\" {\n  name = %q\n}\n", tm.namespace)
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProtoV6ProviderFactories,
		CheckDestroy:             checkTeamEmpty(t, agent, tm.namespace),
		Steps: []resource.TestStep{
			{
				Config: providerBlock + read,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("data.virtplane_namespace.team", tfjsonpath.New("used").AtMapKey("vms"), knownvalue.Int64Exact(0)),
				},
			},
			{
				Config: providerBlock + read + fmt.Sprintf(`
resource "virtplane_virtual_machine" "test" {
  namespace    = %q
  name         = "viewer-vm"
  run_strategy = "Halted"
  memory       = "64Mi"
}
`, tm.namespace),
				ExpectError: errorRe("user "+user, "VirtualMachines.Create", "needs edit in "+tm.namespace),
			},
		},
	})
}

// issueClientCertificate has the agent CA certify a key made here for
// subject, and writes the pair to a temporary directory.
func issueClientCertificate(t *testing.T, agent *acctest.Agent, subject *apiv1.Subject) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	csr, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: subject.GetName()}}, key)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := agent.Client.Credentials.IssueCertificate(t.Context(), &apiv1.IssueCertificateRequest{
		Subject: subject, CsrPem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: csr}), TtlSeconds: 3600,
	})
	if err != nil {
		t.Fatalf("issue a certificate of %v: %v", subject, err)
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "client.crt"), filepath.Join(dir, "client.key")
	if err := os.WriteFile(certFile, resp.GetCertificatePem(), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}
