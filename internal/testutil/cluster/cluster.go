// Package cluster runs virtplane over private libvirt hosts
// (internal/testutil/multinode) as a second machine would see it:
// `virtplane-agent serve --role server` as a process of its own (embedded
// etcd; a unix socket for tests and the CLI, TLS on 127.0.0.1 for the
// nodes) — or several, on a cluster of embedded etcd members or on an
// external etcd cluster — and one `serve --role node` per host, joined with a bootstrap
// token from `token create` and pinning the server's CA. The node agents
// and launchers run in the host's namespaces and reach their libvirtd by
// its unix socket; only libvirtd, virtlogd and QEMU live in the node's
// namespaces.
//
// The multi-node e2e tests and `make demo-cluster` use it; it imports no
// testing package.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
	"github.com/virtplane/terraform-provider-virtplane/internal/procfs"
	"github.com/virtplane/terraform-provider-virtplane/internal/testguest"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil/multinode"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil/proc"
	"k8s.io/apimachinery/pkg/util/wait"
)

// How long an agent process gets to exit after SIGTERM (then SIGKILL);
// after SIGKILL, processes get proc.KillWait.
const (
	stopGrace = 15 * time.Second
	// pollInterval is how often a start is checked on.
	pollInterval = 50 * time.Millisecond
)

// Options say what a cluster runs and where.
type Options struct {
	// Agent and Launcher are the virtplane-agent and virtplane-launcher
	// binaries.
	Agent, Launcher string
	// Dir holds the cluster's dirs and sockets; short, since launcher
	// sockets live under it (108-byte limit). Start makes it (0755).
	Dir string
	// GuestDir holds the built test guest, installed into every node's
	// image dir; ServerImageDir is the server's --image-dir.
	GuestDir, ServerImageDir string
	// Namespace is the one the cluster's VMs use: its launchers are
	// found by it (their domains are <namespace>_<name>) when it stops.
	Namespace string
	// NodeLease and Heartbeat override the server's defaults when set.
	NodeLease, Heartbeat time.Duration
	// ServerArgs are more flags for the server; NodeArgs for every node
	// agent.
	ServerArgs, NodeArgs []string
	// JoinTimeout bounds the server's start and each node's join
	// (default 2 minutes).
	JoinTimeout time.Duration
	// Servers is how many servers run (default 1). With more than one
	// and no ExternalEtcd, their embedded etcds form one cluster.
	Servers int
	// ExternalEtcd runs the servers on a three-member cluster of
	// EtcdBinary (default etcd on PATH, Debian's etcd-server).
	ExternalEtcd bool
	EtcdBinary   string
}

// Cluster is the running servers with one node agent per libvirt host.
type Cluster struct {
	Dir     string
	Servers []*Server
	Etcd    []*EtcdMember // the external etcd cluster's, if any
	Nodes   []*Node
	// API is a client of the first server over its socket.
	API  *client.Client
	opts Options
}

// Node is one virtplane node on one private libvirt host.
type Node struct {
	*multinode.Node // its libvirt host; Name is the virtplane node name too

	Dir      string // the node agent's dirs are under it
	DataDir  string // --data-dir: identity
	NodeDir  string // --node-data-dir
	ImageDir string // --image-dir, with the test guest installed
	Socket   string // --socket: launcher sockets go next to it
	Kernel   string // the guest kernel's file name in ImageDir
	Agent    *proc.Proc
	Starts   int           // node agents started so far
	Started  time.Time     // when the node agent was last started
	Joined   time.Duration // from Started to schedulable
}

// Start starts the server and one node agent per host and returns once
// every node is schedulable. On error, what was started is stopped.
func Start(ctx context.Context, hosts []*multinode.Node, opts Options) (*Cluster, error) {
	if opts.JoinTimeout <= 0 {
		opts.JoinTimeout = 2 * time.Minute
	}
	if err := mkdir755(opts.Dir); err != nil {
		return nil, err
	}
	c := &Cluster{Dir: opts.Dir, opts: opts}
	err := c.start(ctx, hosts)
	if err != nil {
		return nil, errors.Join(err, c.Close())
	}
	return c, nil
}

func (c *Cluster) start(ctx context.Context, hosts []*multinode.Node) error {
	if c.opts.ExternalEtcd {
		if err := c.startEtcd(ctx); err != nil {
			return err
		}
	}
	if err := c.startServers(ctx); err != nil {
		return err
	}
	var err error
	for i, h := range hosts {
		nd := filepath.Join(c.Dir, strconv.Itoa(i))
		n := &Node{Node: h, Dir: nd, DataDir: filepath.Join(nd, "data"), NodeDir: filepath.Join(nd, "node"),
			ImageDir: filepath.Join(nd, "images"), Socket: filepath.Join(nd, "agent.sock")}
		if err := errors.Join(mkdir755(nd), mkdir755(n.ImageDir)); err != nil {
			return err
		}
		if n.Kernel, err = testguest.Install(c.opts.GuestDir, n.ImageDir); err != nil {
			return err
		}
		c.Nodes = append(c.Nodes, n)
	}
	for _, n := range c.Nodes {
		if err := c.StartNodeAgent(ctx, n); err != nil {
			return err
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, len(c.Nodes))
	for i, n := range c.Nodes {
		wg.Go(func() { errs[i] = c.WaitJoined(ctx, n) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// mkdir755 makes dir traversable by QEMU's user (Mkdir applies the
// umask).
func mkdir755(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.Chmod(dir, 0o755)
}

// reAgentStarted finds the server's "agent started" log line and the TLS
// listener it bound.
var reAgentStarted = regexp.MustCompile(`msg="agent started".* listen=(127\.0\.0\.1:[0-9]+)`)

var (
	reToken  = regexp.MustCompile(`(?m)^token: (\S+)`)
	reCAHash = regexp.MustCompile(`(?m)^ca-cert-hash: (\S+)`)
)

// StartNodeAgent makes a bootstrap token for n with the CLI and starts
// role node with it (again, after a kill): the node joins over TLS,
// pinning the server's CA. Each start logs to a file of its own.
func (c *Cluster) StartNodeAgent(ctx context.Context, n *Node) error {
	out, err := exec.CommandContext(ctx, c.opts.Agent, "--endpoint", "unix://"+c.LiveServer().Socket,
		"token", "create", "--node-name", n.Name, "--ttl", "10m").CombinedOutput()
	if err != nil {
		return fmt.Errorf("token create: %w: %s", err, out)
	}
	tok, hash := reToken.FindSubmatch(out), reCAHash.FindSubmatch(out)
	if tok == nil || hash == nil {
		return fmt.Errorf("token create printed no token or CA hash:\n%s", out)
	}
	n.Started = time.Now()
	log := filepath.Join(n.Dir, "agent.log")
	if n.Starts > 0 {
		log = filepath.Join(n.Dir, fmt.Sprintf("agent-%d.log", n.Starts))
	}
	n.Starts++
	args := []string{"serve", "--role", "node",
		"--server", strings.Join(c.ServerEndpoints(), ","), "--join-token", string(tok[1]), "--ca-cert-hash", string(hash[1]),
		"--node-name", n.Name,
		"--libvirt-uri", n.URI,
		// The node's libvirtd writes QEMU pid files under its private
		// /run/libvirt; the launchers read them from here.
		"--qemu-pid-dir", n.QEMUPidDir(),
		"--launcher-path", c.opts.Launcher,
		"--data-dir", n.DataDir,
		"--node-data-dir", n.NodeDir,
		"--image-dir", n.ImageDir,
		"--socket", n.Socket,
		// Migrations come to the host's link-local address, registered
		// with the node; the server builds the destination from it
		// (serverArgs: tcp, multinode.TCPPort).
		"--migration-address", n.Addr,
		"--log-level", "debug"}
	n.Agent, err = proc.Start(proc.DiesWithParent, "node agent "+n.Name, log, c.opts.Agent, append(args, c.opts.NodeArgs...)...)
	return err
}

// KillAgent SIGKILLs the node agent and waits until it is gone; its
// launchers and guests keep running, as they would on a real node.
func (n *Node) KillAgent() error { return n.Agent.Kill() }

// PowerOff is node n's host losing power: its node agent, its launchers
// and its libvirtd, virtlogd and QEMUs are SIGKILLed (the agent first, so
// that it reports none of the rest). Nothing of n answers afterwards;
// the other nodes and the servers go on. Close still cleans up after it.
func (c *Cluster) PowerOff(n *Node) error {
	if err := n.KillAgent(); err != nil {
		return err
	}
	for _, pid := range procfs.LauncherPidsOn(c.opts.Launcher, n.URI) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	err := wait.PollUntilContextTimeout(context.Background(), pollInterval, proc.KillWait, true, func(context.Context) (bool, error) {
		return len(procfs.LauncherPidsOn(c.opts.Launcher, n.URI)) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("launchers %v of node %s survived SIGKILL", procfs.LauncherPidsOn(c.opts.Launcher, n.URI), n.Name)
	}
	return n.Node.PowerOff(proc.KillWait)
}

// WaitJoined waits until node n is registered and schedulable.
func (c *Cluster) WaitJoined(ctx context.Context, n *Node) error {
	var (
		got *apiv1.Node
		err error
	)
	werr := wait.PollUntilContextTimeout(ctx, pollInterval, c.opts.JoinTimeout, true, func(context.Context) (bool, error) {
		got, err = c.liveAPI().Nodes.Get(ctx, &apiv1.GetNodeRequest{Name: n.Name})
		if err == nil && got.GetStatus().GetSchedulable() {
			n.Joined = time.Since(n.Started)
			return true, nil
		}
		if !n.Agent.Alive() {
			return false, fmt.Errorf("node agent %s exited: %s", n.Name, multinode.TailFile(n.Agent.Log, 4000))
		}
		return false, nil
	})
	if werr != nil {
		return fmt.Errorf("node %s not schedulable: %w (last: %v, %v)", n.Name, werr, got.GetStatus(), err)
	}
	return nil
}

// Close stops the node agents, the cluster's launchers (found by
// Options.Namespace) and guests, and the server, and removes Dir. The
// libvirt hosts stay up: multinode's Close stops them.
func (c *Cluster) Close() error {
	var errs []error
	for _, n := range c.Nodes {
		errs = append(errs, n.KillAgent())
	}
	for _, s := range c.Servers {
		if s.API != nil {
			s.API.Close()
		}
	}
	if c.opts.Namespace != "" {
		errs = append(errs, killLaunchers(c.opts.Launcher, c.opts.Namespace+"_"))
	}
	for _, n := range c.Nodes {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if err := n.DestroyAll(ctx); err != nil {
			errs = append(errs, fmt.Errorf("node %s: %w", n.Name, err))
		}
		cancel()
	}
	for _, s := range c.Servers {
		errs = append(errs, s.Proc.Stop(stopGrace))
	}
	for _, m := range c.Etcd {
		errs = append(errs, m.Proc.Stop(stopGrace))
	}
	if err := os.RemoveAll(c.Dir); err != nil {
		errs = append(errs, fmt.Errorf("removing %s: %w", c.Dir, err))
	}
	return errors.Join(errs...)
}

// killLaunchers SIGKILLs the launchers whose domains start with prefix
// and waits until they are gone. Launchers outlive their agent by design;
// a migration's source and target launchers share a domain name.
func killLaunchers(binary, prefix string) error {
	for _, pid := range procfs.LauncherPidsWithPrefix(binary, prefix) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	// Its own context: Close also runs when the caller's has ended.
	err := wait.PollUntilContextTimeout(context.Background(), pollInterval, proc.KillWait, true, func(context.Context) (bool, error) {
		return len(procfs.LauncherPidsWithPrefix(binary, prefix)) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("launchers %v of the cluster survived SIGKILL", procfs.LauncherPidsWithPrefix(binary, prefix))
	}
	return nil
}

// Logs are the cluster's log files: the servers', external etcd
// members', every node agent's and
// every launcher's.
func (c *Cluster) Logs() []string {
	logs, _ := filepath.Glob(filepath.Join(c.Dir, "*.log")) // servers', etcd members'
	for _, n := range c.Nodes {
		agents, _ := filepath.Glob(filepath.Join(n.Dir, "agent*.log"))
		logs = append(logs, agents...)
		more, _ := filepath.Glob(filepath.Join(n.NodeDir, "logs", "*.log"))
		logs = append(logs, more...)
	}
	return logs
}

// NodeNamed is the node of that name, or nil.
func (c *Cluster) NodeNamed(name string) *Node {
	for _, n := range c.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}
