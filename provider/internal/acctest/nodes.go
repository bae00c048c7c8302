package acctest

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/virtplane/terraform-provider-virtplane/agent/server"
	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
	"github.com/virtplane/terraform-provider-virtplane/internal/fakenode"
	"github.com/virtplane/terraform-provider-virtplane/internal/testguest"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// Environment that decides what the in-process agent's nodes are.
const (
	// EnvLibvirtURI is the libvirt the real node agent's launchers use
	// (qemu:///system); with testguest.EnvDir it selects real nodes.
	EnvLibvirtURI = "VIRTPLANE_TEST_LIBVIRT_URI"
	// EnvFakeNodes=1 runs the tests on scripted fake nodes instead: no
	// libvirt, no guest, seconds instead of minutes. For iterating on
	// the provider; `make testacc` uses real nodes.
	EnvFakeNodes = "VIRTPLANE_ACC_FAKE_NODES"
)

// Nodes are where the acceptance tests' VMs run. This file (with
// libvirt.go for the real node's host side) is the only place that knows
// what they are. chooseNodes is the one switch:
//
//   - real (the default): the real node agent runs inside the in-process
//     agent (role all), launching virtplane-launcher processes that boot
//     the test guest (internal/testguest) under libvirt, as TCG unless the
//     host has usable KVM (the node decides);
//   - fake (EnvFakeNodes=1): two scripted fake node agents
//     (internal/fakenode) next to the in-process agent;
//   - external (VIRTPLANE_ENDPOINT): whatever nodes that agent has; their
//     image directory must hold the test guest.
type Nodes struct {
	// Names of the nodes, sorted.
	Names []string
	// Labels every node carries; a VM's node_selector set to them keeps it
	// off nodes other tests register (TestAccNodesDataSource's, which no
	// agent runs).
	Labels map[string]string
	// Scripted is true when guests follow fakenode scripts, set by the VM
	// template annotation fakenode.virtplane.io/script (see ScriptAnnotation).
	Scripted bool
	// Kernel is the test guest's kernel file in the nodes' image
	// directory (Initrd is testguest.InitrdFile).
	Kernel string
	// Bridge and Network are a Linux bridge and a libvirt network every
	// node has (NodeStatus.bridges, .networks), for interfaces of those
	// kinds; "" when the nodes have none.
	Bridge, Network string

	// host is the libvirt host of real nodes; nil otherwise.
	host *libvirtHost
	// stop runs while the agent still serves; afterShutdown once it has
	// stopped, and reports what the run left behind on the host.
	stop          func()
	afterShutdown func() error
}

// ScriptAnnotation selects a fake guest's behaviour: "exit:2s" powers off
// two seconds after it started (Succeeded), "fail-start" fails before
// running, "crash:2s" fails after running.
const ScriptAnnotation = fakenode.AnnotationScript

// AddressesAnnotation scripts when a fake guest's interfaces get their
// addresses: "" at once, "after:2s", "never" or "never:<info>"; the
// address is FakeAddress of the interface's MAC.
const AddressesAnnotation = fakenode.AnnotationAddresses

// FakeAddress is the IP address a fake guest's interface with MAC mac
// gets.
func FakeAddress(mac string) string { return fakenode.AddressFor(mac) }

// The network inventory of every fake node.
const (
	fakeBridge  = "vpacc0"
	fakeNetwork = "vpacc-net"
)

// nodeLabel marks the fake nodes: one of their own labels, which a node
// registers with (an admin sets any other).
const nodeLabel = apiv1.NodeLabelPrefix + "acctest"

// Fake node timings: short, so tests are quick, but not zero, so that the
// Starting and Stopping states are really passed through.
const (
	fakeStartDelay    = 300 * time.Millisecond
	fakeShutdownDelay = 300 * time.Millisecond
)

type nodeMode int

const (
	modeReal nodeMode = iota
	modeFake
	modeExternal
)

// nodeEnv reads which nodes the environment asks for. Without
// VIRTPLANE_ENDPOINT or an explicit EnvFakeNodes, real nodes are the only
// choice, and missing settings for them are an error rather than a quiet
// fallback: `make testacc` must never pass on fake nodes by accident.
func nodeEnv() (nodeMode, error) {
	if os.Getenv(client.EnvEndpoint) != "" {
		return modeExternal, nil
	}
	if v := os.Getenv(EnvFakeNodes); v != "" {
		fake, err := strconv.ParseBool(v)
		if err != nil {
			return 0, fmt.Errorf("%s=%q: want 1 or 0", EnvFakeNodes, v)
		}
		if fake {
			return modeFake, nil
		}
	}
	var missing []string
	if os.Getenv(EnvLibvirtURI) == "" {
		missing = append(missing, EnvLibvirtURI+" is not set")
	}
	if _, err := testguest.Dir(); err != nil {
		missing = append(missing, err.Error())
	}
	if len(missing) > 0 {
		return 0, fmt.Errorf("the acceptance tests boot the test guest on the real node agent: %s.\n"+
			"Run `make testacc` (it builds the guest and sets %s=qemu:///system and %s=bin/guest), "+
			"or set %s=1 to run them on fake nodes, or VIRTPLANE_ENDPOINT to use an agent of your own",
			strings.Join(missing, "; "), EnvLibvirtURI, testguest.EnvDir, EnvFakeNodes)
	}
	return modeReal, nil
}

// nodeSetup is how an in-process agent gets its nodes.
type nodeSetup struct {
	// agentNode runs the real node agent inside the agent; nil runs none.
	agentNode *server.NodeOptions
	// nodeName and imageDir go into the agent's options with agentNode.
	nodeName, imageDir string
	// start brings the nodes up once the agent serves, reached through c.
	start func(ctx context.Context, c *client.Client, log *slog.Logger) (*Nodes, error)
}

// chooseNodes picks the nodes of the in-process agent, whose files go
// under dir.
func chooseNodes(ctx context.Context, dir string) (nodeSetup, error) {
	mode, err := nodeEnv()
	if err != nil {
		return nodeSetup{}, err
	}
	if mode == modeFake {
		return nodeSetup{start: startFakeNodes}, nil
	}
	return realNodeSetup(ctx, dir)
}

// realNodeSetup prepares one real node: the launcher binary built from
// this tree, an image directory with the test guest, and a node name no
// earlier run used (domains carry it, which is how cleanup tells ours).
func realNodeSetup(ctx context.Context, dir string) (nodeSetup, error) {
	host, err := prepareLibvirtHost(ctx, dir, os.Getenv(EnvLibvirtURI))
	if err != nil {
		return nodeSetup{}, err
	}
	name := RandomName("acc-node")
	host.node = name
	return nodeSetup{
		agentNode: &server.NodeOptions{
			LibvirtURI:   host.uri,
			LauncherPath: host.launcher,
			DataDir:      host.nodeDir,
			AdoptDirs:    []string{host.adoptDir},
			AgentVersion: "acctest",
		},
		nodeName: name,
		imageDir: host.imageDir,
		start: func(ctx context.Context, c *client.Client, _ *slog.Logger) (*Nodes, error) {
			return startRealNode(ctx, c, host)
		},
	}, nil
}

// nodeRegisterTimeout bounds the real node agent's start: it registers its
// node once it has read libvirt's capabilities.
const nodeRegisterTimeout = time.Minute

// startRealNode waits for the node agent to register its node and picks
// the label that keeps the tests' VMs on it. The node agent sets no labels
// of ours; node.virtplane.io/kvm is one it always sets and that the nodes
// other tests register lack.
func startRealNode(ctx context.Context, c *client.Client, host *libvirtHost) (*Nodes, error) {
	var (
		node    *apiv1.Node
		lastErr error
	)
	err := wait.PollUntilContextTimeout(ctx, testutil.PollInterval, nodeRegisterTimeout, true, func(ctx context.Context) (bool, error) {
		node, lastErr = c.Nodes.Get(ctx, &apiv1.GetNodeRequest{Name: host.node})
		return lastErr == nil && node.GetStatus().GetSchedulable(), nil
	})
	if err != nil {
		return nil, fmt.Errorf("real node %s did not register as schedulable (last error: %v); set %s to see the node agent's log",
			host.node, lastErr, EnvAgentLog)
	}
	kvm, ok := node.GetMetadata().GetLabels()[apiv1.LabelKVM]
	if !ok {
		return nil, fmt.Errorf("real node %s has no %s label to select it by", host.node, apiv1.LabelKVM)
	}
	// No Bridge and no Network: a real node here is the host, whose
	// bridges and libvirt networks (libvirt's NAT "default" among them)
	// lead to networks a test guest must not join. The bridge and network
	// kinds run for real in the multi-node harness (internal/e2e), on
	// bridges inside its own namespaces.
	return &Nodes{
		Names:         []string{host.node},
		Labels:        map[string]string{apiv1.LabelKVM: kvm},
		Kernel:        host.kernel,
		host:          host,
		stop:          host.drain,
		afterShutdown: host.cleanup,
	}, nil
}

// startFakeNodes registers two scripted fake node agents.
func startFakeNodes(ctx context.Context, c *client.Client, log *slog.Logger) (*Nodes, error) {
	n := &Nodes{Labels: map[string]string{nodeLabel: "fake"}, Scripted: true, Kernel: testguest.ELFKernelFile,
		Bridge: fakeBridge, Network: fakeNetwork}
	var started []*fakenode.Node
	n.stop = func() {
		for _, f := range started {
			f.Stop()
		}
	}
	n.afterShutdown = func() error { return nil }
	for i := 1; i <= 2; i++ {
		name := fmt.Sprintf("acc-node-%d", i)
		f, err := fakenode.Start(ctx, c, fakenode.Options{
			Name: name, Labels: n.Labels, CPU: "8", Memory: "16Gi",
			StartDelay: fakeStartDelay, ShutdownDelay: fakeShutdownDelay,
			Bridges: []string{fakeBridge}, Networks: []string{fakeNetwork},
			Logger: log.With("component", "fakenode"),
		})
		if err != nil {
			n.stop()
			return nil, fmt.Errorf("start fake node %s: %w", name, err)
		}
		started = append(started, f)
		n.Names = append(n.Names, name)
	}
	sort.Strings(n.Names)
	return n, nil
}

// externalNodes describes an external agent's nodes: whatever it has. The
// tests then put no node_selector on their VMs, and cannot look at the
// guests or the domains.
func externalNodes() *Nodes {
	return &Nodes{Kernel: testguest.ELFKernelFile, stop: func() {}, afterShutdown: func() error { return nil }}
}

// Real is true when the nodes boot real guests that this process can see
// on the host (libvirt domains, serial consoles).
func (n *Nodes) Real() bool { return n.host != nil }

// NodeSelectorHCL is a node_selector argument that keeps a VM on these
// nodes, or "" when any node will do.
func (n *Nodes) NodeSelectorHCL() string {
	if len(n.Labels) == 0 {
		return ""
	}
	keys := make([]string, 0, len(n.Labels))
	for k := range n.Labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString("node_selector = {\n")
	for _, k := range keys {
		fmt.Fprintf(&b, "    %q = %q\n", k, n.Labels[k])
	}
	b.WriteString("  }")
	return b.String()
}

// BootHCL is a boot block that boots the test guest with the kernel
// command line testguest.Cmdline(opts...). Fake nodes ignore it.
func (n *Nodes) BootHCL(opts ...testguest.Option) string {
	return fmt.Sprintf(`boot {
    kernel  = %q
    initrd  = %q
    cmdline = %q
  }`, n.Kernel, testguest.InitrdFile, testguest.Cmdline(opts...))
}

// GuestBootTimeout bounds a TCG boot of the test guest: about 5-10 s
// alone, several times that while the parallel tests' guests share two
// cores.
const GuestBootTimeout = 2 * time.Minute

// WaitBooted waits until the guest of VMI uid has booted far enough to
// obey the ACPI power button (testguest.MarkerBooted on its serial
// console) and returns the marker's fields; it fails tb when the guest
// does not boot within GuestBootTimeout. A stop before that would wait
// out the termination grace period. Without real nodes there is no
// console to read, and it returns nil at once.
func (n *Nodes) WaitBooted(tb testing.TB, uid string) map[string]string {
	tb.Helper()
	if n.host == nil {
		return nil
	}
	return n.host.waitMarker(tb, uid, testguest.MarkerBooted)
}

// Domains returns the libvirt domains whose names start with
// DomainName(namespace, prefix); nil without real nodes.
func (n *Nodes) Domains(ctx context.Context, namespace, prefix string) ([]string, error) {
	if n.host == nil {
		return nil, nil
	}
	return n.host.domains(ctx, apiv1.DomainName(namespace, prefix))
}

// DomainMemory returns the memory libvirt gave the domain of VM
// namespace/name (<memory>, in bytes); ok is false without real nodes.
func (n *Nodes) DomainMemory(ctx context.Context, namespace, name string) (bytes int64, ok bool, err error) {
	if n.host == nil {
		return 0, false, nil
	}
	b, err := n.host.domainMemory(ctx, apiv1.DomainName(namespace, name))
	return b, true, err
}

// ImageDir is the real node's image directory, where it stores the
// images it pulls; "" without real nodes.
func (n *Nodes) ImageDir() string {
	if n.host == nil {
		return ""
	}
	return n.host.imageDir
}
