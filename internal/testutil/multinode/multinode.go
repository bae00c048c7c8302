package multinode

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/virtplane/terraform-provider-virtplane/internal/testutil/proc"
)

// Options change Start's defaults.
type Options struct {
	// NamePrefix starts every node's Name (default "vpmn"): names are
	// <prefix>-<run id>-<index>.
	NamePrefix string
	// StartTimeout bounds the daemons of all nodes coming up (default 2
	// minutes: a few seconds with the capabilities cache, ~20 s per node
	// without it, more on a loaded two-core host).
	StartTimeout time.Duration
	// HostLink joins the host's network namespace to the hub's br0 by a
	// veth pair with HostAddr on the host's side, so that processes
	// there reach services in the hub at HubAddr: the virtplane server
	// (the storage controller's ceph and rbd calls), a test's own CLI
	// calls and the system libvirtd's QEMUs reach a Ceph cluster in the
	// hub (internal/testutil/ceph). Without it the run adds no interface
	// and no route to the host's namespace.
	HostLink bool
	// Hub puts the nodes on that run's hub instead of one of their own:
	// its bridges, its subnet (each node an address of its own in it)
	// and what runs there, such as a test package's shared Ceph cluster
	// (ceph.Shared). The run of Hub must outlive this one, and only it
	// has a host link (HostLink is refused here).
	Hub *Run
}

func (o *Options) complete() {
	if o.NamePrefix == "" {
		o.NamePrefix = "vpmn"
	}
	o.StartTimeout = o.startTimeout()
}

func (o Options) startTimeout() time.Duration {
	if o.StartTimeout <= 0 {
		return 2 * time.Minute
	}
	return o.StartTimeout
}

// Node is one private libvirt host.
type Node struct {
	// Index is the node's position in what Start returned, from 0.
	Index int
	// Name is unique to this run: the node's hostname in its UTS
	// namespace, and a fine virtplane node name.
	Name string
	// URI reaches the node's libvirtd over its unix socket, from the
	// host's namespaces (node agents, virsh, the test).
	URI string
	// TCPURI reaches the node's libvirtd from the other nodes' network
	// namespaces only (qemu+tcp://Addr:TCPPort/system, no auth): the
	// destination of a peer-to-peer migration.
	TCPURI string
	// Addr is the node's link-local IPv4 address in its network
	// namespace; migration_host and migration_address are this.
	Addr string
	// HubAddr is the hub's address on the nodes' network (169.254.S.254,
	// on its br0): where services in the hub listen (Hub).
	HubAddr string
	// MigrationPortMin and MigrationPortMax are the node's incoming
	// migration port range (qemu.conf).
	MigrationPortMin, MigrationPortMax int
	// HostUUID is the node's libvirtd host_uuid.
	HostUUID string
	// NetNS is the node's network namespace, under /run/netns.
	NetNS string
	// HubNetNS is the run's hub namespace: it holds the bridges the
	// nodes' veths join, and sits on the guests' segment (HubExec).
	HubNetNS string
	// Root is the node's private directory (0755): etc, run, lib, log
	// and cache are bind-mounted over libvirt's directories in the
	// node's mount namespace; the daemons' output and pid files are
	// here too. Tests may put the node agent's dirs under it.
	Root string

	runDir                     string
	hub                        Hub
	host                       int // the last byte of Addr
	holder, virtlogd, libvirtd *proc.Proc
	// poweredOff is set by PowerOff: no daemon answers any more.
	poweredOff atomic.Bool
}

// RunDir is a directory (0755) shared by the nodes of one Start and
// removed with them (also by the sweep of a run whose test died): a place
// for files every node's QEMU opens at one path, such as a kernel or a
// disk on "shared storage" for migrations.
func (n *Node) RunDir() string { return n.runDir }

// Socket is the node's libvirtd socket (in the host's view).
func (n *Node) Socket() string { return filepath.Join(n.Root, "run", "libvirt-sock") }

// QEMUPidDir is where the node's libvirtd writes <domain>.pid for running
// QEMUs (the node's /run/libvirt/qemu, seen from the host).
func (n *Node) QEMUPidDir() string { return filepath.Join(n.Root, "run", "qemu") }

// LibvirtdLog is the node's libvirtd log file (levels warning and up).
func (n *Node) LibvirtdLog() string { return filepath.Join(n.Root, "log", "libvirtd.log") }

// LibvirtdPid and VirtlogdPid are the daemons' processes.
func (n *Node) LibvirtdPid() int { return n.libvirtd.Pid() }

// VirtlogdPid is the node's virtlogd process.
func (n *Node) VirtlogdPid() int { return n.virtlogd.Pid() }

const (
	// runBase holds the runs' dirs: /tmp, not $TMPDIR, so that every
	// test process finds (and sweeps) every run, and socket paths stay
	// short.
	runBase      = "/tmp"
	runDirPrefix = "vpmn-" // /tmp/vpmn-<id>
	nsPrefix     = "vpmn-" // /run/netns/vpmn-<id>-<i>, vpmn-<id>-hub
	runIDLen     = 6       // hex digits
	baseMigPort  = 49152
	migPorts     = 64
	// MaxNodes bounds the nodes on one hub: addresses are .1 to .249 of
	// one /24 (.250 is the host link's, .254 the hub's).
	MaxNodes     = 249
	hostLinkHost = 250
	hubHost      = 254
)

// TCPPort is where every node's libvirtd listens for the other nodes
// (libvirt's tcp_port): one port for all, as a cluster's libvirtds have
// (the server's --migration-libvirt-port), since each listens on its own
// address in its own network namespace.
const TCPPort = 16509

// Run is one Launch: its nodes and the namespaces and dirs they share.
type Run struct {
	id     string
	dir    string
	subnet int    // 169.254.<subnet>.0/24
	hub    string // the hub's network namespace
	// hubRun is the run whose hub this one's nodes joined (Options.Hub);
	// nil when the hub is this run's own.
	hubRun   *Run
	hostLink bool
	nodes    []*Node

	mu     sync.Mutex
	hosts  int  // node addresses handed out on this run's hub
	closed bool // Close has begun
}

// Logger is where the harness reports what it did; a *testing.T is one.
type Logger interface {
	Logf(format string, args ...any)
}

// Start creates n private libvirt hosts and returns them once every
// node's libvirtd answers on its URI. t.Cleanup removes all of it and
// fails the test if anything is left behind.
func Start(t testing.TB, n int, opts Options) []*Node {
	t.Helper()
	if reason := Unavailable(); reason != "" {
		t.Skip(reason)
	}
	ctx, cancel := context.WithTimeout(context.Background(), opts.startTimeout())
	defer cancel()
	r, err := Launch(ctx, n, opts, t)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Close(t, t.Failed()); err != nil {
			t.Error(err)
		}
	})
	return r.Nodes()
}

// Launch is Start outside a test: it creates n private libvirt hosts
// (undoing what it made if that fails) and returns them running; Close
// removes them. ctx bounds the start. n may be 0: a hub alone, a place
// for services that later runs join (Options.Hub).
func Launch(ctx context.Context, n int, opts Options, log Logger) (*Run, error) {
	if reason := Unavailable(); reason != "" {
		return nil, errors.New(reason)
	}
	if n < 0 || n > MaxNodes {
		return nil, fmt.Errorf("multinode: n = %d: want 0 to %d nodes", n, MaxNodes)
	}
	if opts.Hub != nil && opts.HostLink {
		return nil, errors.New("multinode: HostLink with Hub: a host link belongs to the hub's own run")
	}
	opts.complete()
	sweepStale(log)
	r, err := newRun(n, opts)
	if err != nil {
		return nil, fmt.Errorf("multinode: %w", err)
	}
	began := time.Now()
	ctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()
	if err := r.start(ctx); err != nil {
		err = fmt.Errorf("multinode: starting %d nodes (run %s): %w", n, r.id, err)
		return nil, errors.Join(err, r.Close(log, true))
	}
	hub := r.Hub()
	log.Logf("multinode: %d nodes up in %s (run %s, 169.254.%d.0/24, hub %s at %s, host link %q)",
		n, time.Since(began).Round(time.Millisecond), r.id, r.subnet, hub.NetNS, hub.Addr, hub.HostAddr)
	return r, nil
}

// Unavailable says why Start would skip on this host, "" when it would
// not: it needs root and libvirt's daemons and tools.
func Unavailable() string {
	if os.Geteuid() != 0 {
		return fmt.Sprintf("multinode: needs root to create namespaces and run libvirtd (euid %d)", os.Geteuid())
	}
	for _, bin := range []string{"libvirtd", "virtlogd", "unshare", "nsenter", "ip", "mount", "umount", "hostname", "virsh", "sleep", "cp"} {
		if _, err := exec.LookPath(bin); err != nil {
			return "multinode: " + bin + " not found (libvirt-daemon-system, libvirt-clients, util-linux, iproute2, hostname): " + err.Error()
		}
	}
	if _, err := user.Lookup(qemuUser); err != nil {
		return "multinode: QEMU's user " + qemuUser + " not found (libvirt-daemon-system makes it): " + err.Error()
	}
	return ""
}

// qemuUser is who libvirt's QEMU driver runs guests as on Debian; the
// nodes' qemu.conf leaves it at that default.
const qemuUser = "libvirt-qemu"

func newRun(n int, opts Options) (*Run, error) {
	b := make([]byte, 3)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	id := hex.EncodeToString(b[:runIDLen/2])
	r := &Run{
		id:       id,
		dir:      filepath.Join(runBase, runDirPrefix+id),
		hub:      nsPrefix + id + "-hub",
		hostLink: opts.HostLink,
	}
	if err := r.pickSubnet(); err != nil {
		return nil, err
	}
	hubRun := r
	if opts.Hub != nil {
		hubRun, r.hubRun, r.hub, r.subnet = opts.Hub, opts.Hub, opts.Hub.hub, opts.Hub.subnet
	}
	hosts, err := hubRun.takeHosts(n)
	if err != nil {
		return nil, err
	}
	for i := range n {
		uuid, err := newUUID()
		if err != nil {
			return nil, err
		}
		root := filepath.Join(r.dir, strconv.Itoa(i))
		r.nodes = append(r.nodes, &Node{
			Index:            i,
			Name:             fmt.Sprintf("%s-%s-%d", opts.NamePrefix, id, i),
			URI:              "qemu+unix:///system?socket=" + filepath.Join(root, "run", "libvirt-sock"),
			MigrationPortMin: baseMigPort + i*migPorts,
			MigrationPortMax: baseMigPort + (i+1)*migPorts - 1,
			HostUUID:         uuid,
			NetNS:            fmt.Sprintf("%s%s-%d", nsPrefix, id, i),
			HubNetNS:         r.hub,
			Root:             root,
			runDir:           r.dir,
			host:             hosts[i],
		})
	}
	r.setSubnet(r.subnet)
	return r, nil
}

// metadataSubnet holds 169.254.169.254, the cloud metadata service: a
// host link routing it into a hub would cut a cloud VM off from it.
const metadataSubnet = 169

// pickSubnet picks a random subnet byte for the run's own hub.
func (r *Run) pickSubnet() error {
	b := make([]byte, 1)
	for {
		if _, err := rand.Read(b); err != nil {
			return err
		}
		if s := 1 + int(b[0])%254; s != metadataSubnet {
			r.subnet = s
			return nil
		}
	}
}

// setSubnet puts the run (its nodes' addresses and URIs) on subnet s.
func (r *Run) setSubnet(s int) {
	r.subnet = s
	hub := r.hubAddrs()
	for _, n := range r.nodes {
		n.Addr = fmt.Sprintf("169.254.%d.%d", s, n.host)
		n.TCPURI = fmt.Sprintf("qemu+tcp://%s:%d/system", n.Addr, TCPPort)
		n.HubAddr = hub.Addr
		n.hub = hub
	}
}

// takeHosts hands out the last bytes of n node addresses on r's hub,
// never one twice: runs that join the hub get addresses of their own.
func (r *Run) takeHosts(n int) ([]int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, fmt.Errorf("the hub's run %s is closed", r.id)
	}
	if r.hosts+n > MaxNodes {
		return nil, fmt.Errorf("%d more nodes on the hub of run %s, which has %d: at most %d per hub", n, r.id, r.hosts, MaxNodes)
	}
	out := make([]int, n)
	for i := range out {
		r.hosts++
		out[i] = r.hosts
	}
	return out, nil
}

func newUUID() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:], nil
}

// start makes the run's dir, its network and every node.
func (r *Run) start(ctx context.Context) error {
	if err := os.Mkdir(r.dir, 0o755); err != nil {
		return err
	}
	// Mkdir applies the umask.
	if err := os.Chmod(r.dir, 0o755); err != nil {
		return err
	}
	// Before any namespace exists: a sweeper that finds namespaces of
	// this run also finds who owns them.
	if err := writeOwner(r.dir); err != nil {
		return err
	}
	if err := r.makeNetwork(ctx); err != nil {
		return err
	}
	var wg sync.WaitGroup
	errs := make([]error, len(r.nodes))
	for i, n := range r.nodes {
		wg.Go(func() {
			if err := n.start(ctx); err != nil {
				errs[i] = fmt.Errorf("node %s: %w", n.Name, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Nodes are the run's hosts, by Index.
func (r *Run) Nodes() []*Node { return r.nodes }

// Hub is where a run's shared services live (a Ceph cluster): the hub's
// network namespace and its address on the nodes' network.
type Hub struct {
	// NetNS is the hub's network namespace, under /run/netns.
	NetNS string
	// Addr is the hub's address on its br0 (169.254.S.254): every node
	// of the hub reaches it, and the host's namespace with HostLink.
	Addr string
	// HostAddr is the host's end of the host link (169.254.S.250), ""
	// without one: the source address of what the host's namespace
	// sends to the hub.
	HostAddr string
	// Dir is the hub's run's directory (0755), removed with it (also by
	// the sweep of a run whose test died).
	Dir string
}

// Hub is the hub the run's nodes are on: its own, or the one of
// Options.Hub.
func (r *Run) Hub() Hub { return r.hubAddrs() }

func (r *Run) hubAddrs() Hub {
	owner := r
	if r.hubRun != nil {
		owner = r.hubRun
	}
	h := Hub{NetNS: owner.hub, Addr: fmt.Sprintf("169.254.%d.%d", owner.subnet, hubHost), Dir: owner.dir}
	if owner.hostLink {
		h.HostAddr = fmt.Sprintf("169.254.%d.%d", owner.subnet, hostLinkHost)
	}
	return h
}

// Hub is the hub of the node's run.
func (n *Node) Hub() Hub { return n.hub }

// Close undoes Launch, whatever state it got to, and reports anything
// left behind; with dumpLogs it first logs the end of every node's
// daemon logs.
func (r *Run) Close(log Logger, dumpLogs bool) error {
	began := time.Now()
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	if dumpLogs {
		for _, n := range r.nodes {
			n.dumpLogs(log)
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, len(r.nodes))
	for i, n := range r.nodes {
		wg.Go(func() { errs[i] = n.stop() })
	}
	wg.Wait()
	var out []error
	if err := errors.Join(append(errs, r.removeNetwork(log), removeRunDir(r.dir))...); err != nil {
		out = append(out, fmt.Errorf("multinode: cleaning up run %s: %w", r.id, err))
	}
	for _, n := range r.nodes {
		for _, p := range []*proc.Proc{n.holder, n.virtlogd, n.libvirtd} {
			if p.Alive() {
				out = append(out, fmt.Errorf("multinode: %s of node %s (pid %d) still runs after cleanup", p.Name, n.Name, p.Pid()))
			}
		}
	}
	log.Logf("multinode: run %s cleaned up in %s", r.id, time.Since(began).Round(time.Millisecond))
	return errors.Join(out...)
}

// removeRunDir removes a run's dir; already gone is fine.
func removeRunDir(dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("removing %s: %w", dir, err)
	}
	return nil
}
