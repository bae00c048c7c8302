package acctest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6/tf6server"

	"github.com/virtplane/terraform-provider-virtplane/provider/internal/provider"
)

// CLI is the terraform CLI run by a test itself, in a directory of its
// own, with the provider under test served from this process as
// terraform-plugin-testing serves it (a reattached plugin). It is for
// what the framework does not show a test: the human-readable output of
// plan, apply and state show (that a sensitive value is never printed).
type CLI struct {
	t   *testing.T
	dir string
	env []string
}

// providerAddr is where terraform looks for the provider of a
// configuration that names it without required_providers.
const providerAddr = "registry.terraform.io/hashicorp/" + ProviderName

// NewCLI serves the provider until t ends and returns the CLI that uses
// it. The environment is Main's (TF_CLI_CONFIG_FILE: no registry).
func NewCLI(t *testing.T) *CLI {
	t.Helper()
	SkipUnlessAcc(t)
	ctx, cancel := context.WithCancel(context.Background())
	reattach := make(chan *plugin.ReattachConfig)
	closed := make(chan struct{})
	served := make(chan error, 1)
	go func() {
		served <- tf6server.Serve(providerAddr, providerserver.NewProtocol6(provider.New("acctest")()),
			tf6server.WithDebug(ctx, reattach, closed),
			tf6server.WithGoPluginLogger(hclog.NewNullLogger()),
			// As terraform-plugin-testing serves it: the provider's logs
			// go where TF_LOG says (nowhere by default), not to stderr.
			tf6server.WithLoggingSink(t),
			tf6server.WithoutLogStderrOverride())
	}()
	var cfg *plugin.ReattachConfig
	select {
	case cfg = <-reattach:
	case err := <-served:
		cancel()
		t.Fatalf("serve the provider: %v", err)
	case <-time.After(10 * time.Second):
		cancel()
		t.Fatal("the provider server gave no reattach configuration in 10 s")
	}
	t.Cleanup(func() {
		cancel()
		<-closed
	})
	js, err := json.Marshal(map[string]any{providerAddr: map[string]any{
		"Protocol": string(cfg.Protocol), "ProtocolVersion": cfg.ProtocolVersion, "Pid": cfg.Pid, "Test": cfg.Test,
		"Addr": map[string]string{"Network": cfg.Addr.Network(), "String": cfg.Addr.String()},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return &CLI{t: t, dir: t.TempDir(), env: append(os.Environ(), "TF_REATTACH_PROVIDERS="+string(js), "NO_COLOR=1")}
}

// Dir is the working directory, where the state file is.
func (c *CLI) Dir() string { return c.dir }

// WriteConfig replaces the configuration (main.tf).
func (c *CLI) WriteConfig(cfg string) {
	c.t.Helper()
	if err := os.WriteFile(filepath.Join(c.dir, "main.tf"), []byte(cfg), 0o600); err != nil {
		c.t.Fatal(err)
	}
}

// Run runs terraform with args (add -no-color where the command takes
// it) and returns its standard output and error together.
func (c *CLI) Run(args ...string) (string, error) {
	c.t.Helper()
	tf := os.Getenv("TF_ACC_TERRAFORM_PATH")
	if tf == "" {
		tf = "terraform"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, tf, args...)
	cmd.Dir, cmd.Env = c.dir, c.env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil {
		err = fmt.Errorf("terraform %v: %w", args, err)
	}
	return out.String(), err
}

// MustRun is Run failing the test on an error.
func (c *CLI) MustRun(args ...string) string {
	c.t.Helper()
	out, err := c.Run(args...)
	if err != nil {
		c.t.Fatalf("%v\n%s", err, out)
	}
	return out
}
