package server

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/clock"

	"github.com/virtplane/terraform-provider-virtplane/internal/client"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/console"
	"github.com/virtplane/terraform-provider-virtplane/internal/pki"
)

// LauncherBinary is the launcher's file name, looked for next to the agent.
const LauncherBinary = "virtplane-launcher"

// NodeOptions configure the node agent (KubeVirt's virt-handler) that
// roles all and node run.
type NodeOptions struct {
	// Server is the API a role-node agent talks to (--server,
	// --server-ca-file); an empty endpoint is the local socket. Over TLS
	// the node authenticates with the certificate it joined with
	// (<data-dir>/identity). Role all uses the agent's own socket instead.
	Server client.Config
	// JoinToken and JoinCAHash join the node on its first start when it
	// has no identity yet (as `virtplane-agent node join` does).
	JoinToken, JoinCAHash string
	// Clock times certificate renewal; nil is the real clock.
	Clock clock.WithTicker
	// LibvirtURI is what launchers connect to; default qemu:///system.
	LibvirtURI string
	// Migration is where this node receives live migrations
	// (--migration-address).
	Migration nodeagent.MigrationOptions
	// ExportAddress is where this node serves VM exports
	// (--export-address); empty serves none.
	ExportAddress string
	// QEMUPidDir is where that libvirtd writes QEMU pid files, as seen
	// from here; default /run/libvirt/qemu (launcher.DefaultQEMUPidDir).
	// A libvirtd in a private mount namespace writes them elsewhere.
	QEMUPidDir string
	// BridgeNetNS is the network namespace whose Linux bridges the node
	// advertises; empty: the agent's own (nodeagent.Options.BridgeNetNS).
	BridgeNetNS string
	// LauncherPath is the launcher binary; default: virtplane-launcher
	// next to the agent executable, else from PATH.
	LauncherPath string
	// DataDir holds the node's state database and per-VMI files;
	// default <data-dir>/node.
	DataDir string
	// ImageSourceDirs are the directories Images' file:// URLs may name
	// on this node; none refuses file:// sources.
	ImageSourceDirs []string
	// AdoptDirs are the directories whose files adopted libvirt domains'
	// disks may be (docs/adopt.md); none refuses every disk.
	AdoptDirs []string
	// ReservedMemory is kept from guests; nil means 512Mi.
	ReservedMemory *resource.Quantity
	// Workers is how many VMIs the node agent handles at once; 0 means
	// nodeagent.DefaultWorkers.
	Workers int
	// StorageStartTimeout bounds the start of a domain with an rbd disk;
	// 0 means nodeagent.DefaultStorageStartTimeout.
	StorageStartTimeout time.Duration
	AgentVersion        string
	// Labels are the node's own labels it registers with besides
	// node.virtplane.io/kvm (--node-labels): only under node.virtplane.io/
	// (nodeagent.CheckLabels, at start).
	Labels map[string]string

	// Launchers replaces the launcher manager (tests).
	Launchers launcher.Manager
	// Tools replaces the launcher binary's probe and list-domains (tests).
	Tools nodeagent.LauncherTools
	// Host replaces the facts read from the host (tests).
	Host *nodeagent.HostFacts
}

func (n *NodeOptions) complete(o *Options) {
	if n.LibvirtURI == "" {
		n.LibvirtURI = launcher.DefaultLibvirtURI
	}
	if n.QEMUPidDir == "" {
		n.QEMUPidDir = launcher.DefaultQEMUPidDir
	}
	if n.LauncherPath == "" {
		n.LauncherPath = defaultLauncherPath()
	}
	if n.DataDir == "" {
		n.DataDir = filepath.Join(o.DataDir, "node")
	}
}

// defaultLauncherPath prefers the launcher installed with the agent, so a
// node runs the launcher of its own version.
func defaultLauncherPath() string {
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), LauncherBinary)
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p
		}
	}
	if p, err := exec.LookPath(LauncherBinary); err == nil {
		return p
	}
	return LauncherBinary
}

// newLauncherManager returns the go-plugin launcher manager. Launcher
// sockets live next to the agent's socket (under /run by default): they
// must outlive agent restarts, and a reboot ends their launchers anyway.
func newLauncherManager(o Options, n NodeOptions) launcher.Manager {
	return launcher.NewManager(launcher.ManagerOptions{
		LauncherPath: n.LauncherPath,
		LibvirtURI:   n.LibvirtURI,
		QEMUPidDir:   n.QEMUPidDir,
		LogDir:       filepath.Join(n.DataDir, "logs"),
		SocketDir:    filepath.Join(filepath.Dir(o.Socket), "launchers"),
		Logger:       o.Logger.With("component", "launcher"),
	})
}

// startNodeAgent runs the node agent against the API at cfg until
// stopNodeAgent. Its failure stops the agent like a listener's.
func (a *Agent) startNodeAgent(ctx context.Context, cfg client.Config, kp *pki.KeyPair) error {
	o := a.opts
	n := *o.Node
	n.complete(&o)
	imageDir, err := filepath.Abs(o.ImageDir)
	if err != nil {
		return fmt.Errorf("--image-dir: %w", err)
	}
	nodeDir, err := filepath.Abs(n.DataDir)
	if err != nil {
		return fmt.Errorf("--node-data-dir: %w", err)
	}
	if err := launcher.CheckQEMUPidDir(n.QEMUPidDir); err != nil {
		return fmt.Errorf("--qemu-pid-dir: %w", err)
	}
	mgr := n.Launchers
	if mgr == nil {
		mgr = newLauncherManager(o, n)
	}
	c, err := client.Dial(ctx, cfg)
	if err != nil {
		return fmt.Errorf("node agent: %w", err)
	}
	consoles, closeConsoles, err := consoleClients(ctx, cfg, c)
	if err != nil {
		c.Close()
		return fmt.Errorf("node agent: %w", err)
	}
	na, err := nodeagent.New(nodeagent.Options{
		NodeName: o.NodeName,
		API: nodeagent.API{VMIs: c.VMIs, Nodes: c.Nodes, VMs: c.VMs, Consoles: consoles, Images: c.Images,
			SnapshotContents: c.SnapshotContents, Restores: c.Restores, StorageClasses: c.StorageClasses, Exports: c.Exports,
			ImageUploads: c.ImageUploads,
			Backups:      c.Backups, BackupRestores: c.BackupRestores, BackupTargets: c.BackupTargets,
			Adoptions: c.Adoptions},
		ExportAddress:   n.ExportAddress,
		Launchers:       mgr,
		Tools:           n.Tools,
		NodeDataDir:     nodeDir,
		ImageDir:        imageDir,
		LibvirtURI:      n.LibvirtURI,
		BridgeNetNS:     n.BridgeNetNS,
		Migration:       n.Migration,
		ImageSourceDirs: n.ImageSourceDirs,
		AdoptDirs:       n.AdoptDirs,
		LauncherPath:    n.LauncherPath,
		QEMUPidDir:      n.QEMUPidDir,
		ReservedMemory:  n.ReservedMemory,
		AgentVersion:    n.AgentVersion,
		Labels:          n.Labels,
		Workers:         n.Workers,
		Timing:          nodeagent.Timing{StorageStartTimeout: n.StorageStartTimeout},
		Host:            n.Host,
		Logger:          o.Logger,
	})
	if err != nil {
		c.Close()
		closeConsoles()
		return err
	}
	// Its own context: the node agent stops first on shutdown, while the
	// API still serves its last heartbeat.
	nctx, cancel := context.WithCancel(context.Background())
	a.nodeCancel, a.nodeDone = cancel, make(chan struct{})
	if kp != nil {
		clk := n.Clock
		if clk == nil {
			clk = clock.RealClock{}
		}
		r := &renewer{api: c.Bootstrap, id: pki.IdentityDir(o.DataDir), kp: kp, node: o.NodeName, clock: clk,
			log: o.Logger.With("component", "identity")}
		go r.run(nctx)
	}
	go func() {
		defer close(a.nodeDone)
		defer c.Close()
		defer closeConsoles()
		if err := na.Run(nctx); err != nil {
			a.errOnce.Do(func() { a.err = fmt.Errorf("node agent: %w", err) })
			a.log.Error("node agent failed", "err", err)
			a.stopOnce.Do(func() { close(a.done) })
		}
	}()
	return nil
}

// consoleClients are the console services the node keeps a sessions
// stream with: c's for a single server; with several, one connection to
// each, since a server hands a console session only to the nodes
// connected to it (calls of one connection go to one server at a time).
func consoleClients(ctx context.Context, cfg client.Config, c *client.Client) ([]console.API, func(), error) {
	eps, err := client.SplitEndpoints(cfg.Endpoint)
	if err != nil {
		return nil, nil, err
	}
	if len(eps) == 1 {
		return []console.API{c.Consoles}, func() {}, nil
	}
	var (
		out    []console.API
		extras []*client.Client
	)
	closeAll := func() {
		for _, x := range extras {
			x.Close()
		}
	}
	for _, ep := range eps {
		one := cfg
		one.Endpoint = ep
		x, err := client.Dial(ctx, one)
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("console connection to %s: %w", ep, err)
		}
		extras = append(extras, x)
		out = append(out, x.Consoles)
	}
	return out, closeAll, nil
}

// stopNodeAgent stops the node agent, which detaches from its launchers
// and leaves them and their guests running.
func (a *Agent) stopNodeAgent(ctx context.Context) {
	if a.nodeCancel == nil {
		return
	}
	a.nodeCancel()
	select {
	case <-a.nodeDone:
	case <-ctx.Done():
		a.log.Warn("node agent did not stop in time")
	case <-time.After(30 * time.Second):
		a.log.Warn("node agent did not stop in time")
	}
}

// startNodeOnly runs role node: no store, API or controllers, only the
// node agent against a remote server.
func startNodeOnly(ctx context.Context, o Options) (*Agent, error) {
	a := &Agent{opts: o, log: o.Logger, done: make(chan struct{})}
	if err := ensureDataDir(o.DataDir); err != nil {
		return nil, err
	}
	cfg, kp, err := a.nodeClientConfig(ctx)
	if err != nil {
		return nil, err
	}
	if err := a.startNodeAgent(ctx, cfg, kp); err != nil {
		return nil, err
	}
	a.log.Info("node agent started", "role", o.Role, "server", o.Node.Server.Endpoint, "node", o.NodeName)
	return a, nil
}

// ensureDataDir creates the agent's data directory with mode 0711: QEMU
// runs as its own user under qemu:///system and must traverse it to the
// guests' disks below <data-dir>/node, while the secrets (pki, etcd) sit
// in 0700 subdirectories and a listing is refused.
func ensureDataDir(dir string) error {
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return fmt.Errorf("creating data dir: %w", err)
	}
	if err := os.Chmod(dir, 0o711); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	return nil
}
