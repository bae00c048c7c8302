package e2e

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/testguest"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
	mncluster "github.com/virtplane/terraform-provider-virtplane/internal/testutil/cluster"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil/multinode"
)

// mnCluster is virtplane over several private libvirt hosts
// (internal/testutil/multinode) as internal/testutil/cluster runs it: a
// server process and one joined node agent per host.
type mnCluster struct {
	nsAPI
	*mncluster.Cluster
	nodes []*mnNode
}

// mnNode is one virtplane node on one private libvirt host, with the
// consoles a test follows there.
type mnNode struct {
	*mncluster.Node
	consoles consoles
}

// mnOptions change a multi-node cluster's defaults.
type mnOptions struct {
	nodes                int // default 2
	nodeLease, heartbeat time.Duration
	serverArgs           []string // more flags for the servers
	nodeArgs             []string // more flags for the node agents
	// servers is how many servers run (default 1); more than one form a
	// cluster of embedded etcd members unless externalEtcd.
	servers      int
	externalEtcd bool // servers on a three-member cluster of Debian's etcd
	// ceph puts the nodes on the hub of the package's Ceph cluster
	// (sharedCeph), which the servers reach through its host link.
	ceph bool
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
	mo := multinode.Options{NamePrefix: "e2e"}
	if o.ceph {
		_, mo.Hub = sharedCeph.Get(t)
	}
	hosts := multinode.Start(t, o.nodes, mo)

	id := randomID(t)
	c := &mnCluster{nsAPI: nsAPI{t: t, ctx: ctx, ns: "mn-" + id}}
	began := time.Now()
	c.Cluster, err = mncluster.Start(ctx, hosts, mncluster.Options{
		Agent: env.agent, Launcher: env.launcher, GuestDir: guestDir, ServerImageDir: env.imageDir,
		// Short: launcher sockets live under it (108-byte limit).
		Dir:       filepath.Join("/tmp", "vpmne-"+id),
		Namespace: c.ns, NodeLease: o.nodeLease, Heartbeat: o.heartbeat, ServerArgs: o.serverArgs, NodeArgs: o.nodeArgs,
		JoinTimeout: stateTimeout, Servers: o.servers, ExternalEtcd: o.externalEtcd,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.cleanup)
	c.api = c.API
	for _, n := range c.Cluster.Nodes {
		c.nodes = append(c.nodes, &mnNode{Node: n})
		t.Logf("node %s joined and schedulable in %s", n.Name, n.Joined.Round(time.Millisecond))
	}
	t.Logf("cluster up in %s (servers %v)", time.Since(began).Round(time.Millisecond), c.ServerEndpoints())
	return c
}

// restartNodeAgent starts n's node agent again (after a kill) and waits
// until the node is schedulable.
func (c *mnCluster) restartNodeAgent(n *mnNode) {
	c.t.Helper()
	if err := c.StartNodeAgent(c.ctx, n.Node); err != nil {
		c.t.Fatal(err)
	}
	if err := c.WaitJoined(c.ctx, n.Node); err != nil {
		c.t.Fatal(err)
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
		n.consoles.closeAll()
	}
	if err := c.Close(); err != nil {
		c.t.Error(err)
	}
}

// dumpLogs logs the end of every log of the cluster.
func (c *mnCluster) dumpLogs() {
	for _, f := range c.Logs() {
		if s := multinode.TailFile(f, 12000); s != "" {
			c.t.Logf("--- %s (end)\n%s", f, s)
		}
	}
}

// --- VMs ---------------------------------------------------------------------

// guestVM is the test guest as a VM pinned to node n by its node-name
// label (every Node carries it).
func (c *mnCluster) guestVM(name string, n *mnNode, cmdline string) *apiv1.VirtualMachine {
	vm := guestVM(c.ns, name, apiv1.RunStrategyAlways, n.Kernel, cmdline)
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
	return n.consoles.follow(t, n.NodeDir, uid)
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
