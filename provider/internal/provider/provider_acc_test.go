package provider_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"

	"github.com/virtplane/terraform-provider-virtplane/provider/internal/acctest"
)

func TestMain(m *testing.M) { os.Exit(acctest.Main(m)) }

// failsWith plans a read of virtplane_nodes under providerBlock and
// expects an error matching want.
func failsWith(t *testing.T, providerBlock, want string) {
	t.Helper()
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config:      providerBlock + `data "virtplane_nodes" "all" {}` + "\n",
			ExpectError: regexp.MustCompile(want),
		}},
	})
}

// A missing CA file is a configuration mistake: it must fail at configure,
// naming ca_file, before anything is dialled.
func TestAccProviderBadCAFile(t *testing.T) {
	failsWith(t, fmt.Sprintf(`
provider "virtplane" {
  endpoint = "127.0.0.1:7443"
  token    = "not-used"
  ca_file  = %q
}
`, filepath.Join(t.TempDir(), "missing-ca.crt")), `Unusable ca_file`)
}

func TestAccProviderBadEndpoint(t *testing.T) {
	failsWith(t, `
provider "virtplane" {
  endpoint = "http://127.0.0.1:7443"
}
`, `Invalid virtplane endpoint`)
}

func TestAccProviderConflictingToken(t *testing.T) {
	failsWith(t, `
provider "virtplane" {
  endpoint   = "127.0.0.1:7443"
  token      = "a"
  token_file = "/dev/null"
}
`, `(?s)Invalid Attribute Combination.*token_file`)
}

// A stopped agent is reported with the endpoint, not as a generic RPC error.
func TestAccProviderUnreachable(t *testing.T) {
	failsWith(t, fmt.Sprintf(`
provider "virtplane" {
  endpoint = "unix://%s"
}
`, filepath.Join(t.TempDir(), "no-agent.sock")), `(?s)virtplane agent unreachable.*unreachable at\s+unix://`)
}

// A provider block that depends on a resource created in the same apply is
// unknown during plan; that plan must succeed and the read happen at apply.
func TestAccProviderUnknownConfig(t *testing.T) {
	agent := acctest.SharedAgent(t)
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: fmt.Sprintf(`
resource "terraform_data" "endpoint" {
  input = %q
}
provider "virtplane" {
  endpoint = terraform_data.endpoint.output
}
data "virtplane_nodes" "all" {
  depends_on = [terraform_data.endpoint]
}
`, agent.Endpoint),
			Check: resource.TestCheckResourceAttr("data.virtplane_nodes.all", "id", "*"),
		}},
	})
}

// The TLS path end to end, through the in-process agent's TLS listener:
// each misconfiguration gets a message that says which setting to fix.
func TestAccProviderTLS(t *testing.T) {
	agent := acctest.SharedAgent(t)
	if agent.TLS == nil {
		t.Skip("external agent: its TLS settings come from the VIRTPLANE_* environment")
	}
	wrongToken := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(wrongToken, []byte("not-the-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	config := func(caFile, tokenFile string) string {
		return fmt.Sprintf(`
provider "virtplane" {
  endpoint   = "https://%s"
  ca_file    = %q
  token_file = %q
}
data "virtplane_nodes" "all" {}
`, agent.TLS.Endpoint, caFile, tokenFile)
	}
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config:      config(agent.TLS.CAFile, wrongToken),
				ExpectError: regexp.MustCompile(`virtplane agent rejected the credentials`),
			},
			{
				// "" falls back to the system roots, which do not know
				// the agent's own CA.
				Config:      config("", agent.TLS.TokenFile),
				ExpectError: regexp.MustCompile(`(?s)virtplane agent unreachable.*set\s+ca_file`),
			},
			{
				Config: config(agent.TLS.CAFile, agent.TLS.TokenFile),
				Check:  resource.TestCheckResourceAttr("data.virtplane_nodes.all", "id", "*"),
			},
		},
	})
}
