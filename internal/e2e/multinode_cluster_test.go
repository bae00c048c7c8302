package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
	"github.com/virtplane/terraform-provider-virtplane/internal/procfs"
	"github.com/virtplane/terraform-provider-virtplane/internal/testguest"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil/multinode"
)

// mnCluster is virtplane over several private libvirt hosts
// (internal/testutil/multinode): `virtplane-agent serve --role server`
// as a process of its own (embedded etcd; the unix socket for the test
// and the CLI, TLS on 127.0.0.1 for the nodes), and one `serve --role
// node` per host, joined with a bootstrap token from `token create` as
// a second machine would. The node agents and launchers run in the
// host's namespaces and reach their libvirtd by its unix socket; only
// libvirtd, virtlogd and QEMU live in the node's namespaces.
type mnCluster struct {
	nsAPI
	dir     string
	socket  string
	server  *mnProc
	tlsAddr string
	nodes   []*mnNode
}

// mnNode is one virtplane node on one private libvirt host.
type mnNode struct {
	*multinode.Node // its libvirt host; Name is the virtplane node name too

	dir      string // the node agent's dirs are under it
	dataDir  string // --data-dir: identity
	nodeDir  string // --node-data-dir
	imageDir string // --image-dir, with the test guest installed
	socket   string // --socket: launcher sockets go next to it
	kernel   string // the guest kernel's file name in imageDir
	agent    *mnProc
	starts   int           // node agents started so far
	started  time.Time     // when the node agent was started
	joined   time.Duration // from started to schedulable
	consoles consoles
}

// mnOptions change a multi-node cluster's defaults.
type mnOptions struct {
	nodes                int // default 2
	nodeLease, heartbeat time.Duration
	serverArgs           []string // more flags for the server
}

// newMultiNodeCluster starts the private libvirt hosts, the server and
// one joined node agent per host, and waits until every node is
// schedulable.
func newMultiNodeCluster(t *testing.T, o mnOptions) *mnCluster {
	t.Helper()
	requireEnv(t)
	if o.nodes == 0 {
		o.nodes = 2
	}
	guestDir, err := testguest.Dir()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	t.Cleanup(cancel)
	// First: its cleanup, registered first, runs last, after the agents
	// and launchers are gone.
	hosts := multinode.Start(t, o.nodes, multinode.Options{NamePrefix: "e2e"})

	id := randomID(t)
	// Short: launcher sockets live under it (108-byte limit).
	dir := filepath.Join("/tmp", "vpmne-"+id)
	mkdir755(t, dir)
	c := &mnCluster{nsAPI: nsAPI{t: t, ctx: ctx, ns: "mn-" + id}, dir: dir, socket: filepath.Join(dir, "api.sock")}
	t.Cleanup(c.cleanup)

	began := time.Now()
	c.startServer(o)
	t.Logf("server up in %s (TLS %s)", time.Since(began).Round(time.Millisecond), c.tlsAddr)
	c.api, err = client.Dial(ctx, client.Config{Endpoint: "unix://" + c.socket})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.api.Close() })

	for i, h := range hosts {
		nd := filepath.Join(dir, strconv.Itoa(i))
		n := &mnNode{Node: h, dir: nd, dataDir: filepath.Join(nd, "data"), nodeDir: filepath.Join(nd, "node"),
			imageDir: filepath.Join(nd, "images"), socket: filepath.Join(nd, "agent.sock")}
		mkdir755(t, nd)
		mkdir755(t, n.imageDir)
		if n.kernel, err = testguest.Install(guestDir, n.imageDir); err != nil {
			t.Fatal(err)
		}
		c.nodes = append(c.nodes, n)
	}
	var wg sync.WaitGroup
	for _, n := range c.nodes {
		n.agent = c.startNodeAgent(n)
	}
	for _, n := range c.nodes {
		wg.Go(func() { c.waitJoined(n) })
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	for _, n := range c.nodes {
		t.Logf("node %s joined and schedulable in %s", n.Name, n.joined.Round(time.Millisecond))
	}
	return c
}

func mkdir755(t *testing.T, dir string) {
	t.Helper()
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

// reAgentStarted is the server's "agent started" log line, which names
// the TLS listener it bound.
var reAgentStarted = regexp.MustCompile(`msg="agent started".* listen=(127\.0\.0\.1:[0-9]+)`)

// startServer runs role server and waits until it logs its listener.
func (c *mnCluster) startServer(o mnOptions) {
	c.t.Helper()
	args := []string{"serve", "--role", "server",
		"--data-dir", filepath.Join(c.dir, "server"), "--socket", c.socket,
		// Port 0: tests run at once; the log says which port it got.
		"--listen", "127.0.0.1:0", "--metrics-listen", "",
		"--image-dir", env.imageDir, "--log-level", "debug"}
	if o.nodeLease > 0 {
		args = append(args, "--node-lease", o.nodeLease.String())
	}
	if o.heartbeat > 0 {
		args = append(args, "--heartbeat-interval", o.heartbeat.String())
	}
	args = append(args, o.serverArgs...)
	log := filepath.Join(c.dir, "server.log")
	c.server = startMNProc(c.t, "server", log, env.agent, args...)
	testutil.EventuallyNoError(c.t, stateTimeout, "the server's TLS listener", func() error {
		b, _ := os.ReadFile(log)
		if m := reAgentStarted.FindSubmatch(b); m != nil {
			c.tlsAddr = string(m[1])
			return nil
		}
		if !c.server.alive() {
			c.t.Fatalf("the server exited: %s", multinode.TailFile(log, 4000))
		}
		return fmt.Errorf("no listener in %s yet", log)
	})
}

var (
	reToken  = regexp.MustCompile(`(?m)^token: (\S+)`)
	reCAHash = regexp.MustCompile(`(?m)^ca-cert-hash: (\S+)`)
)

// startNodeAgent makes a bootstrap token for n with the CLI and starts
// role node with it: the node joins over TLS, pinning the server's CA.
func (c *mnCluster) startNodeAgent(n *mnNode) *mnProc {
	c.t.Helper()
	out, err := exec.CommandContext(c.ctx, env.agent, "--endpoint", "unix://"+c.socket,
		"token", "create", "--node-name", n.Name, "--ttl", "10m").CombinedOutput()
	if err != nil {
		c.t.Fatalf("token create: %v: %s", err, out)
	}
	tok, hash := reToken.FindSubmatch(out), reCAHash.FindSubmatch(out)
	if tok == nil || hash == nil {
		c.t.Fatalf("token create printed no token or CA hash:\n%s", out)
	}
	n.started = time.Now()
	log := filepath.Join(n.dir, "agent.log")
	if n.starts > 0 {
		log = filepath.Join(n.dir, fmt.Sprintf("agent-%d.log", n.starts))
	}
	n.starts++
	return startMNProc(c.t, "node agent "+n.Name, log, env.agent,
		"serve", "--role", "node",
		"--server", "https://"+c.tlsAddr, "--join-token", string(tok[1]), "--ca-cert-hash", string(hash[1]),
		"--node-name", n.Name,
		"--libvirt-uri", n.URI,
		// The node's libvirtd writes QEMU pid files under its private
		// /run/libvirt; the launchers read them from here.
		"--qemu-pid-dir", n.QEMUPidDir(),
		"--launcher-path", env.launcher,
		"--data-dir", n.dataDir,
		"--node-data-dir", n.nodeDir,
		"--image-dir", n.imageDir,
		"--socket", n.socket,
		// Migrations come to the host's link-local address; its libvirtd
		// listens there without TLS (the harness's hub is private).
		"--migration-address", n.Addr, "--migration-libvirt-uri", n.TCPURI,
		"--log-level", "debug")
}

// waitJoined waits until node n is registered and schedulable. It runs in
// a goroutine of its own, so it reports with Errorf.
func (c *mnCluster) waitJoined(n *mnNode) {
	deadline := time.Now().Add(stateTimeout)
	for {
		got, err := c.api.Nodes.Get(c.ctx, &apiv1.GetNodeRequest{Name: n.Name})
		if err == nil && got.GetStatus().GetSchedulable() {
			n.joined = time.Since(n.started)
			return
		}
		if !n.agent.alive() {
			c.t.Errorf("node agent %s exited: %s", n.Name, multinode.TailFile(n.agent.log, 4000))
			return
		}
		if time.Now().After(deadline) {
			c.t.Errorf("node %s not schedulable after %v (last: %v, %v)", n.Name, stateTimeout, got.GetStatus(), err)
			return
		}
		select {
		case <-time.After(testutil.PollInterval * 5):
		case <-c.ctx.Done():
			return
		}
	}
}

// cleanup stops the agents, their launchers and guests and the server;
// the multinode cleanup that runs after it stops the libvirt hosts.
func (c *mnCluster) cleanup() {
	began := time.Now()
	defer func() { c.t.Logf("multi-node cluster cleaned up in %s", time.Since(began).Round(time.Millisecond)) }()
	if c.t.Failed() {
		c.dumpLogs()
	}
	for _, n := range c.nodes {
		n.agent.kill(c.t)
		n.consoles.closeAll()
	}
	// Launchers outlive their agent by design; this test's are found by
	// the namespace in their domain names.
	// A migration's source and target launchers share a domain name.
	for _, pid := range procfs.LauncherPidsWithPrefix(env.launcher, c.ns+"_") {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	// Not testutil.Eventually: the test's context is done in a cleanup.
	for deadline := time.Now().Add(10 * time.Second); ; {
		left := procfs.LauncherPidsWithPrefix(env.launcher, c.ns+"_")
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			c.t.Errorf("launchers %v of the cluster survived SIGKILL", left)
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, n := range c.nodes {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if err := n.DestroyAll(ctx); err != nil {
			c.t.Errorf("node %s: %v", n.Name, err)
		}
		cancel()
	}
	c.server.stop(c.t)
	if err := os.RemoveAll(c.dir); err != nil {
		c.t.Errorf("removing %s: %v", c.dir, err)
	}
}

func (c *mnCluster) dumpLogs() {
	logs := []string{filepath.Join(c.dir, "server.log")}
	for _, n := range c.nodes {
		agents, _ := filepath.Glob(filepath.Join(n.dir, "agent*.log"))
		logs = append(logs, agents...)
		more, _ := filepath.Glob(filepath.Join(n.nodeDir, "logs", "*.log"))
		logs = append(logs, more...)
	}
	for _, f := range logs {
		if s := multinode.TailFile(f, 12000); s != "" {
			c.t.Logf("--- %s (end)\n%s", f, s)
		}
	}
}

// --- VMs ---------------------------------------------------------------------

// guestVM is the test guest as a VM pinned to node n by its node-name
// label (every Node carries it).
func (c *mnCluster) guestVM(name string, n *mnNode, cmdline string) *apiv1.VirtualMachine {
	vm := guestVM(c.ns, name, apiv1.RunStrategyAlways, n.kernel, cmdline)
	vm.Spec.Template.Spec.NodeSelector = map[string]string{apiv1.LabelNodeName: n.Name}
	return vm
}

// waitRunning waits until VM name's instance is Running and returns it.
func (c *mnCluster) waitRunning(name string) *apiv1.VirtualMachineInstance {
	c.t.Helper()
	var vmi *apiv1.VirtualMachineInstance
	testutil.Eventually(c.t, bootTimeout, name+" running", func() bool {
		vmi = c.vmi(name)
		return vmi.GetStatus().GetPhase() == apiv1.PhaseRunning
	})
	return vmi
}

// console follows the serial console of VMI uid on node n.
func (n *mnNode) console(t *testing.T, uid string) *console {
	return n.consoles.follow(t, n.nodeDir, uid)
}

// --- processes ---------------------------------------------------------------

// mnProc is an agent process of a multi-node cluster.
type mnProc struct {
	what, log string
	cmd       *exec.Cmd
	exited    chan struct{}
}

func startMNProc(t *testing.T, what, log, bin string, args ...string) *mnProc {
	t.Helper()
	f, err := os.Create(log)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	// Dies with the test process, should go test's -timeout kill it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", what, err)
	}
	p := &mnProc{what: what, log: log, cmd: cmd, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.exited) }()
	return p
}

func (p *mnProc) pid() int { return p.cmd.Process.Pid }

func (p *mnProc) alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// logMatches returns the lines of the process's log that match re.
func (p *mnProc) logMatches(re *regexp.Regexp) []string { return logMatches(p.log, re) }

// signal sends sig to the process and reports whether it is gone within
// d.
func (p *mnProc) signal(sig syscall.Signal, d time.Duration) bool {
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.exited:
		return true
	case <-time.After(d):
		return false
	}
}

// kill SIGKILLs the process and waits until it is gone.
func (p *mnProc) kill(t *testing.T) {
	if p != nil && !p.signal(syscall.SIGKILL, 10*time.Second) {
		t.Errorf("%s (pid %d) did not die on SIGKILL", p.what, p.pid())
	}
}

// stop asks the process to shut down (SIGTERM) and kills it if it has
// not within its shutdown timeout.
func (p *mnProc) stop(t *testing.T) {
	if p != nil && !p.signal(syscall.SIGTERM, 15*time.Second) {
		t.Errorf("%s (pid %d) did not stop on SIGTERM within 15 s", p.what, p.pid())
		p.kill(t)
	}
}

// domainsOnSystem lists the domains of qemu:///system whose names start
// with prefix; none when the system daemon does not run.
func domainsOnSystem(t *testing.T, prefix string) []string {
	t.Helper()
	out, err := exec.CommandContext(t.Context(), "virsh", "-c", env.uri, "list", "--all", "--name").CombinedOutput()
	if err != nil {
		t.Logf("%s not reachable (%v: %s): it holds no domain", env.uri, err, strings.TrimSpace(string(out)))
		return nil
	}
	var ds []string
	for _, d := range strings.Fields(string(out)) {
		if strings.HasPrefix(d, prefix) {
			ds = append(ds, d)
		}
	}
	return ds
}
