package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/virtplane/terraform-provider-virtplane/agent/server"
	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
	"github.com/virtplane/terraform-provider-virtplane/internal/imagepolicy"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/nodedir"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil/multinode"
)

// Timeouts. Guests boot in about 7 s alone under TCG, several times that
// when the package's guests share two cores.
const (
	bootTimeout  = 2 * time.Minute
	stateTimeout = time.Minute
	guestMemory  = "160Mi"
)

// cluster is one virtplane installation for one test: the API server and
// controllers in this process, the node agent as a process of its own
// (so that it can be SIGKILLed), all in a directory of its own, with a
// node name and a namespace no other test uses.
type cluster struct {
	nsAPI
	dir    string
	socket string
	node   string
	rec    *recorder

	nodeDir  string // the node agent's --node-data-dir
	consoles consoles

	// serverArgs point the node agent at the server: the unix socket, or
	// the TLS listener with a bootstrap token (clusterOptions.tls), and
	// the node agent's own flags from clusterOptions.
	serverArgs []string
	tlsAddr    string
	// agentArgs are more flags of the node agent (clusterOptions).
	agentArgs []string

	mu       sync.Mutex
	agent    *exec.Cmd
	agentRun int // how many times the node agent was started
	exited   chan struct{}
}

// clusterOptions change the server's defaults.
type clusterOptions struct {
	nodeLease, heartbeat time.Duration
	// tls: the node joins over TLS on 127.0.0.1 with a bootstrap token
	// and authenticates by its certificate, as a second host would.
	tls bool
	// metricsListen is the server's --metrics-listen; none when empty.
	metricsListen string
	// imagePolicy is the server's image download policy (serve's
	// --image-* flags): tests that serve Images from loopback allow it
	// in SourceCIDRs, which the default refuses.
	imagePolicy imagepolicy.Policy
	// agentArgs are more flags of the node agent (--export-address).
	agentArgs []string
	// adoptDirs are the node agent's --adopt-dir (adopt_test.go).
	adoptDirs []string
}

// newCluster starts the server and the node agent and waits until the
// node is registered.
func newCluster(t *testing.T, opts ...clusterOptions) *cluster {
	t.Helper()
	requireEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	began := time.Now()
	id := randomID(t)
	// Short: unix socket paths (the API's, etcd's, the launchers') must
	// stay under 108 bytes.
	dir := filepath.Join("/tmp", "vpe2e-"+id)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	c := &cluster{
		nsAPI: nsAPI{t: t, ctx: ctx, ns: "e2e-" + id}, node: "e2e-" + id,
		dir: dir, socket: filepath.Join(dir, "api.sock"), nodeDir: filepath.Join(dir, "node"),
	}
	t.Cleanup(c.cleanup)

	logf, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logf.Close() })
	var o clusterOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	so := server.Options{
		DataDir: filepath.Join(dir, "server"), Socket: c.socket, LeaderElect: true,
		ImageDir: env.imageDir, NodeLease: o.nodeLease, HeartbeatInterval: o.heartbeat, MetricsListen: o.metricsListen,
		ImagePolicy: o.imagePolicy,
		Logger:      slog.New(slog.NewTextHandler(logf, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if o.tls {
		so.Listen = "127.0.0.1:0"
	}
	srv, err := server.Start(ctx, so)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// The agent first: its open watch would hold up the server's
		// graceful stop.
		c.killAgent()
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		srv.Shutdown(sctx)
	})
	c.api, err = client.Dial(ctx, client.Config{Endpoint: "unix://" + c.socket})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.api.Close() })
	c.serverArgs = []string{"--server", "unix://" + c.socket}
	if o.tls {
		tok, err := c.api.Bootstrap.CreateToken(ctx, &apiv1.CreateBootstrapTokenRequest{TtlSeconds: 600, NodeName: c.node})
		if err != nil {
			t.Fatal(err)
		}
		c.tlsAddr = srv.TCPAddr().String()
		c.serverArgs = []string{"--server", "https://" + c.tlsAddr, "--join-token", tok.Token, "--ca-cert-hash", tok.CaCertHash}
	}
	c.agentArgs = o.agentArgs
	for _, d := range o.adoptDirs {
		c.serverArgs = append(c.serverArgs, "--adopt-dir", d)
	}
	c.rec = startRecorder(c)
	c.startAgent()
	testutil.Eventually(c.t, stateTimeout, "node "+c.node+" registered and schedulable", func() bool {
		n, err := c.api.Nodes.Get(ctx, &apiv1.GetNodeRequest{Name: c.node})
		return err == nil && n.GetStatus().GetSchedulable()
	})
	t.Logf("cluster %s up in %s", id, time.Since(began).Round(time.Millisecond))
	return c
}

func randomID(t *testing.T) string {
	b := make([]byte, 3)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// agentLog is the log file of the n-th node agent run (1-based).
func (c *cluster) agentLog(n int) string {
	return filepath.Join(c.dir, fmt.Sprintf("agent-%d.log", n))
}

// startAgent starts `virtplane-agent serve --role node` against the
// server, logging to agentLog(run).
func (c *cluster) startAgent() {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.agentRun++
	logf, err := os.Create(c.agentLog(c.agentRun))
	if err != nil {
		c.t.Fatal(err)
	}
	defer logf.Close()
	agentDir := filepath.Join(c.dir, "agent")
	args := append([]string{"serve", "--role", "node"}, c.serverArgs...)
	cmd := exec.Command(env.agent, append(args,
		"--node-name", c.node,
		"--libvirt-uri", env.uri,
		"--launcher-path", env.launcher,
		"--node-data-dir", c.nodeDir,
		"--image-dir", env.imageDir,
		"--data-dir", agentDir,
		// Launcher sockets go next to the agent's socket.
		"--socket", filepath.Join(agentDir, "agent.sock"),
		"--log-level", "debug")...)
	cmd.Args = append(cmd.Args, c.agentArgs...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	c.agent, c.exited = cmd, exited
}

// killAgent SIGKILLs the node agent and waits until it is gone.
func (c *cluster) killAgent() {
	c.t.Helper()
	c.mu.Lock()
	cmd, exited := c.agent, c.exited
	c.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		c.t.Fatal("node agent did not die on SIGKILL")
	}
}

// cleanup removes everything the test made on the host, whatever state
// it is in: the node agent, every launcher and domain of the namespace,
// and the directory.
func (c *cluster) cleanup() {
	began := time.Now()
	defer func() { c.t.Logf("cleaned up in %s", time.Since(began).Round(time.Millisecond)) }()
	c.killAgent()
	// The recorder, which starts followers, has stopped by now (its
	// cleanup ran first).
	c.consoles.closeAll()
	domains := c.domainsOnHost()
	for _, d := range domains {
		for _, pid := range launcherPids(d) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	for _, d := range domains {
		_, _ = virsh("destroy", d)
		_, _ = virsh("undefine", d, "--nvram")
	}
	if c.t.Failed() {
		c.dumpLogs()
	}
	if err := os.RemoveAll(c.dir); err != nil {
		c.t.Logf("removing %s: %v", c.dir, err)
	}
}

// dumpLogs shows the ends of the agent and launcher logs of a failed
// test.
func (c *cluster) dumpLogs() {
	logs, _ := filepath.Glob(filepath.Join(c.dir, "agent-*.log"))
	more, _ := filepath.Glob(filepath.Join(c.nodeDir, "logs", "*.log"))
	for _, f := range append(logs, more...) {
		if s := multinode.TailFile(f, 12000); s != "" {
			c.t.Logf("--- %s (end)\n%s", f, s)
		}
	}
}

// domainsOnHost lists the libvirt domains of this cluster's namespace.
func (c *cluster) domainsOnHost() []string {
	out, err := virsh("list", "--all", "--name")
	if err != nil {
		c.t.Logf("virsh list: %v", err)
		return nil
	}
	var ds []string
	for _, n := range strings.Fields(out) {
		if strings.HasPrefix(n, c.ns+"_") {
			ds = append(ds, n)
		}
	}
	return ds
}

func virsh(args ...string) (string, error) {
	cmd := exec.Command("virsh", append([]string{"-c", env.uri}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("virsh %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return string(out), nil
}

// domainDefined reports whether libvirt knows the domain at all.
func domainDefined(t *testing.T, name string) bool {
	t.Helper()
	out, err := virsh("list", "--all", "--name")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range strings.Fields(out) {
		if n == name {
			return true
		}
	}
	return false
}

// --- VMs ---------------------------------------------------------------------

// guestVM is a VM that boots the test guest by direct kernel boot with
// the given kernel command line (testguest.Cmdline).
func (c *cluster) guestVM(name, strategy, cmdline string) *apiv1.VirtualMachine {
	return guestVM(c.ns, name, strategy, env.kernel, cmdline)
}

func (c *cluster) create(vm *apiv1.VirtualMachine) {
	c.t.Helper()
	if _, err := c.api.VMs.Create(c.ctx, &apiv1.CreateVirtualMachineRequest{Vm: vm}); err != nil {
		c.t.Fatalf("creating VM %s: %v", vm.GetMetadata().GetName(), err)
	}
}

// waitRunning waits until VM name runs an instance other than notUID and
// reports Running and ready, and returns that instance.
func (c *cluster) waitRunning(name, notUID string) *apiv1.VirtualMachineInstance {
	c.t.Helper()
	var vmi *apiv1.VirtualMachineInstance
	testutil.Eventually(c.t, bootTimeout, name+" running", func() bool {
		vmi = c.vmi(name)
		if vmi == nil || vmi.GetMetadata().GetUid() == notUID || vmi.GetStatus().GetPhase() != apiv1.PhaseRunning {
			return false
		}
		vm := c.vm(name)
		return vm.GetStatus().GetPrintableStatus() == apiv1.PrintableRunning && vm.GetStatus().GetReady()
	})
	return vmi
}

// waitPrintable waits until VM name shows the printable status want.
func (c *cluster) waitPrintable(name, want string, d time.Duration) {
	c.t.Helper()
	testutil.Eventually(c.t, d, name+" "+want, func() bool { return c.vm(name).GetStatus().GetPrintableStatus() == want })
}

// vmiDir is the node agent's directory of VMI uid.
func (c *cluster) vmiDir(uid string) string {
	d, err := nodedir.Layout{Root: c.nodeDir}.VMIDir(uid)
	c.must(err)
	return d
}

// vmDir is the node agent's directory of VM uid.
func (c *cluster) vmDir(uid string) string {
	d, err := nodedir.Layout{Root: c.nodeDir}.VMDir(uid)
	c.must(err)
	return d
}

func (c *cluster) must(err error) {
	c.t.Helper()
	if err != nil {
		c.t.Fatal(err)
	}
}

// console returns the serial console of VMI uid, from the log the node
// agent has virtlogd write. Every VMI's console is followed from the
// moment the watch shows the VMI, so nothing is lost when the VMI ends
// (and its directory goes) before the test looks.
func (c *cluster) console(uid string) *console {
	return c.consoles.follow(c.t, c.nodeDir, uid)
}

// agentLogMatches returns the lines of the n-th agent run's log that
// match re.
func (c *cluster) agentLogMatches(n int, re *regexp.Regexp) []string {
	return logMatches(c.agentLog(n), re)
}
