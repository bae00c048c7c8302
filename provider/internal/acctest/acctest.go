// Package acctest is the harness for the provider's acceptance tests
// (TF_ACC=1). It serves the provider in-process to the real terraform CLI
// and gives the tests an agent: the one VIRTPLANE_ENDPOINT points at, or
// else an in-process agent with embedded etcd and nodes to run VMs on (see
// nodes.go: the real node agent booting the test guest under libvirt, or
// fake nodes with VIRTPLANE_ACC_FAKE_NODES=1), started once per test
// binary.
//
// Use it from a package's TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(acctest.Main(m)) }
package acctest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"

	"github.com/virtplane/terraform-provider-virtplane/agent/server"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
	"github.com/virtplane/terraform-provider-virtplane/internal/imagepolicy"
	"github.com/virtplane/terraform-provider-virtplane/provider/internal/provider"
)

// ProviderName is the provider's local name in test configurations.
const ProviderName = "virtplane"

// EnvAgentLog names a file that receives the in-process agent's log; unset
// discards it.
const EnvAgentLog = "VIRTPLANE_ACC_AGENT_LOG"

// ProtoV6ProviderFactories serves a fresh provider for every terraform
// command, as terraform-plugin-testing expects.
var ProtoV6ProviderFactories = map[string]func() (tfprotov6.ProviderServer, error){
	ProviderName: func() (tfprotov6.ProviderServer, error) {
		return providerserver.NewProtocol6WithError(provider.New("acctest")())()
	},
}

// Agent is the agent the acceptance tests run against.
type Agent struct {
	// Endpoint is what the provider is pointed at.
	Endpoint string
	// External is true when the agent came from VIRTPLANE_ENDPOINT: it may
	// hold objects other than the tests' own.
	External bool
	// Client talks to the agent with the same settings as the provider.
	Client *client.Client
	// TLS is the in-process agent's TLS listener; nil for an external
	// agent, whose TLS settings come from the environment.
	TLS *TLSListener
	// Nodes run the tests' VMs (see nodes.go).
	Nodes *Nodes

	providerBlock string
	stop          func() error
}

// TLSListener is where and how to reach an agent over TLS.
type TLSListener struct {
	Endpoint  string // host:port
	CAFile    string
	TokenFile string
}

// ProviderConfig is the provider block pointing at the agent. For an
// external agent it is empty: the VIRTPLANE_* environment applies, as it
// would for a user.
func (a *Agent) ProviderConfig() string { return a.providerBlock }

var (
	mu     sync.Mutex
	shared *Agent
)

// Main prepares the terraform CLI environment, runs the tests and stops the
// in-process agent if one was started. Without TF_ACC it only runs the
// tests: acceptance tests skip themselves and unit tests need none of this.
//
// With TF_ACC it first checks that the environment says which nodes to
// use, and fails the whole binary when it does not: skipping would let an
// acceptance run pass without having run anything. A run that passed but
// left launchers or domains on the host fails too.
func Main(m *testing.M) int {
	if os.Getenv("TF_ACC") == "" {
		return m.Run()
	}
	if _, err := nodeEnv(); err != nil {
		fmt.Fprintln(os.Stderr, "acctest:", err)
		return 1
	}
	cleanup, err := setupTerraform()
	if err != nil {
		fmt.Fprintln(os.Stderr, "acctest:", err)
		return 1
	}
	defer cleanup()
	code := m.Run()
	if err := stopShared(); err != nil {
		fmt.Fprintln(os.Stderr, "acctest:", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// setupTerraform points terraform at a CLI configuration of our own (the
// user's may not exist or may carry dev_overrides) that cannot install
// providers from the network: the provider under test is served in-process
// and attached by terraform-plugin-testing, and terraform_data is built in.
func setupTerraform() (cleanup func(), err error) {
	dir, err := os.MkdirTemp("", "vpacc-tf")
	if err != nil {
		return nil, fmt.Errorf("create terraform config dir: %w", err)
	}
	cleanup = func() { _ = os.RemoveAll(dir) }
	mirror := filepath.Join(dir, "no-providers")
	if err := os.Mkdir(mirror, 0o755); err != nil {
		cleanup()
		return nil, fmt.Errorf("create empty provider mirror: %w", err)
	}
	rc := filepath.Join(dir, "terraformrc")
	cfg := "disable_checkpoint = true\n\n" +
		"# Anything not attached in-process fails fast instead of reaching a registry.\n" +
		"provider_installation {\n  filesystem_mirror {\n    path = " + strconv.Quote(mirror) + "\n  }\n}\n"
	if err := os.WriteFile(rc, []byte(cfg), 0o644); err != nil {
		cleanup()
		return nil, fmt.Errorf("write terraform CLI config: %w", err)
	}
	env := map[string]string{
		"TF_CLI_CONFIG_FILE": rc,
		"CHECKPOINT_DISABLE": "1",
		"TF_IN_AUTOMATION":   "1",
	}
	// Without an explicit path terraform-plugin-testing falls back to
	// downloading the latest terraform when PATH has none; fail clearly
	// instead.
	if os.Getenv("TF_ACC_TERRAFORM_PATH") == "" {
		tf, err := exec.LookPath("terraform")
		if err != nil {
			cleanup()
			return nil, errors.New("terraform is not on PATH (or set TF_ACC_TERRAFORM_PATH): the acceptance tests drive the real terraform CLI")
		}
		env["TF_ACC_TERRAFORM_PATH"] = tf
	}
	for k, v := range env {
		if err := os.Setenv(k, v); err != nil {
			cleanup()
			return nil, fmt.Errorf("set %s: %w", k, err)
		}
	}
	return cleanup, nil
}

// SkipUnlessAcc skips t unless TF_ACC is set, as resource.Test would; call
// it before preparing fixtures that need an agent.
func SkipUnlessAcc(t *testing.T) {
	t.Helper()
	if os.Getenv("TF_ACC") == "" {
		t.Skip("acceptance test: set TF_ACC=1 to run it")
	}
}

// SharedAgent returns the agent for acceptance tests, starting the
// in-process one on first use. It skips t without TF_ACC.
func SharedAgent(t *testing.T) *Agent {
	t.Helper()
	SkipUnlessAcc(t)
	mu.Lock()
	defer mu.Unlock()
	if shared != nil {
		return shared
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var err error
	if ep := os.Getenv(client.EnvEndpoint); ep != "" {
		shared, err = externalAgent(ctx, ep)
	} else {
		shared, err = startAgent(ctx)
	}
	if err != nil {
		t.Fatalf("acceptance agent: %v", err)
	}
	t.Logf("acceptance agent %s, nodes %v", shared.Endpoint, shared.Nodes.Names)
	return shared
}

func externalAgent(ctx context.Context, endpoint string) (*Agent, error) {
	c, err := client.Dial(ctx, client.ConfigFromEnv())
	if err != nil {
		return nil, fmt.Errorf("dial %s (VIRTPLANE_ENDPOINT): %w", endpoint, err)
	}
	return &Agent{Endpoint: endpoint, External: true, Client: c, Nodes: externalNodes(), stop: func() error { return c.Close() }}, nil
}

// NotAllowedBridge is a bridge the in-process agent's host-resource
// policy refuses (hostPolicy), as docs/security.md's example has it.
const NotAllowedBridge = "docker0"

// hostPolicy is the in-process agent's host-resource policy: the defaults
// (127.0.0.1, ports 1024-65535) plus what the tests name: 0.0.0.0 (a
// forward's address read back), the fake nodes' bridge and libvirt
// network, br0 and libvirt's "default" (configurations of VMs that are
// never started) and NoNodeBridge (no node has it: the placement
// message). Real nodes offer none of them (Nodes.Bridge is empty there).
func hostPolicy() *validation.HostPolicy {
	p := validation.DefaultHostPolicy()
	p.ForwardAddresses = append(p.ForwardAddresses, netip.MustParseAddr("0.0.0.0"))
	p.Bridges = []string{fakeBridge, "br0", NoNodeBridge}
	p.Networks = []string{fakeNetwork, "default"}
	return p
}

// NoNodeBridge is a bridge the policy allows and no node has.
const NoNodeBridge = "vpacc-none0"

// startAgent runs an agent in this process with its data and socket in a
// temporary directory, plus a TLS listener on a free loopback port. The
// directory is short on purpose: unix socket paths (the agent's, etcd's,
// the launchers') are limited to 108 bytes and t.TempDir() can be deep.
func startAgent(ctx context.Context) (_ *Agent, retErr error) {
	dir, err := os.MkdirTemp("", "vpacc")
	if err != nil {
		return nil, fmt.Errorf("create agent dir: %w", err)
	}
	logOut := io.Discard
	var logFile *os.File
	// The failure paths below stop what they started first; the
	// directory and the log go last.
	defer func() {
		if retErr != nil {
			if logFile != nil {
				_ = logFile.Close()
			}
			_ = os.RemoveAll(dir)
		}
	}()
	if p := os.Getenv(EnvAgentLog); p != "" {
		if logFile, err = os.Create(p); err != nil {
			return nil, fmt.Errorf("%s: %w", EnvAgentLog, err)
		}
		logOut = logFile
	}
	socket := filepath.Join(dir, "agent.sock")
	logger := slog.New(slog.NewTextHandler(logOut, &slog.HandlerOptions{Level: slog.LevelDebug}))
	nodeSetup, err := chooseNodes(ctx, dir)
	if err != nil {
		return nil, err
	}
	a, err := server.Start(ctx, server.Options{
		DataDir:       filepath.Join(dir, "data"),
		Socket:        socket,
		Listen:        "127.0.0.1:0",
		MetricsListen: "",
		LeaderElect:   true,
		NodeName:      nodeSetup.nodeName,
		ImageDir:      nodeSetup.imageDir,
		// The image tests serve images on 127.0.0.1, which the default
		// policy refuses (serve --image-source-cidrs).
		ImagePolicy: imagepolicy.Policy{SourceCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}},
		Node:        nodeSetup.agentNode,
		HostPolicy:  hostPolicy(),
		Logger:      logger,
	})
	if err != nil {
		return nil, fmt.Errorf("start in-process agent: %w", err)
	}
	shutdown := func() {
		// Longer than the 30 s the agent gives the node agent to stop.
		sctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
		defer cancel()
		a.Shutdown(sctx)
	}
	endpoint := "unix://" + socket
	c, err := client.Dial(ctx, client.Config{Endpoint: endpoint})
	if err != nil {
		shutdown()
		return nil, fmt.Errorf("dial in-process agent: %w", err)
	}
	nodes, err := nodeSetup.start(ctx, c, logger)
	if err != nil {
		_ = c.Close()
		shutdown()
		return nil, err
	}
	stop := func() error {
		// The nodes' own shutdown first, while the API still serves;
		// what they left on the host is only looked for once the agent
		// (and with it the real node agent) has stopped.
		nodes.stop()
		_ = c.Close()
		shutdown()
		err := nodes.afterShutdown()
		if logFile != nil {
			_ = logFile.Close()
		}
		if rerr := os.RemoveAll(dir); rerr != nil {
			err = errors.Join(err, rerr)
		}
		return err
	}
	pki := filepath.Join(dir, "data", "pki")
	return &Agent{
		Endpoint: endpoint,
		Client:   c,
		Nodes:    nodes,
		TLS: &TLSListener{
			Endpoint:  a.TCPAddr().String(),
			CAFile:    filepath.Join(pki, "ca.crt"),
			TokenFile: filepath.Join(pki, "token"),
		},
		// Explicit, so that a VIRTPLANE_* variable in the developer's
		// shell cannot redirect the tests.
		providerBlock: fmt.Sprintf("provider %q {\n  endpoint = %q\n}\n", ProviderName, endpoint),
		stop:          stop,
	}, nil
}

// stopShared stops the shared agent, if one was started, and reports what
// it left behind.
func stopShared() error {
	mu.Lock()
	defer mu.Unlock()
	if shared == nil {
		return nil
	}
	err := shared.stop()
	shared = nil
	return err
}

// RandomName returns prefix plus a short random suffix, for objects that
// must not collide with earlier runs against an external agent.
func RandomName(prefix string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

// DialToken dials the in-process agent's TLS listener with token, as a
// user or service account of that token would.
func DialToken(ctx context.Context, a *Agent, token string) (*client.Client, error) {
	if a.TLS == nil {
		return nil, errors.New("external agent: no TLS listener of the harness's")
	}
	return client.Dial(ctx, client.Config{Endpoint: "https://" + a.TLS.Endpoint, CAFile: a.TLS.CAFile, Token: token})
}
