package acctest

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/virtplane/terraform-provider-virtplane/agent/server"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
	"github.com/virtplane/terraform-provider-virtplane/internal/fakenode"
)

// Nodes are where the acceptance tests' VMs run. This file is the only
// place that knows what they are: today two scripted fake node agents
// (internal/fakenode) next to the in-process agent. chooseNodes is the
// one switch: to run the tests on the real node agent and the test guest,
// return a nodeSetup whose agentNode runs it in the agent (role all) and
// whose start returns that node.
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

	stop func()
}

// ScriptAnnotation selects a fake guest's behaviour: "exit:2s" powers off
// two seconds after it started (Succeeded), "fail-start" fails before
// running, "crash:2s" fails after running.
const ScriptAnnotation = fakenode.AnnotationScript

// nodeLabel marks the harness's nodes.
const nodeLabel = "virtplane.io/acctest-node"

// Fake node timings: short, so tests are quick, but not zero, so that the
// Starting and Stopping states are really passed through.
const (
	fakeStartDelay    = 300 * time.Millisecond
	fakeShutdownDelay = 300 * time.Millisecond
)

// nodeSetup is how an in-process agent gets its nodes.
type nodeSetup struct {
	// agentNode runs the real node agent inside the agent; nil runs none.
	agentNode *server.NodeOptions
	// start brings the nodes up once the agent serves, reached through c.
	start func(ctx context.Context, c *client.Client, log *slog.Logger) (*Nodes, error)
}

// chooseNodes picks the nodes of the in-process agent.
func chooseNodes() nodeSetup {
	return nodeSetup{start: startFakeNodes}
}

// startFakeNodes registers two scripted fake node agents.
func startFakeNodes(ctx context.Context, c *client.Client, log *slog.Logger) (*Nodes, error) {
	n := &Nodes{Labels: map[string]string{nodeLabel: "fake"}, Scripted: true}
	var started []*fakenode.Node
	n.stop = func() {
		for _, f := range started {
			f.Stop()
		}
	}
	for i := 1; i <= 2; i++ {
		name := fmt.Sprintf("acc-node-%d", i)
		f, err := fakenode.Start(ctx, c, fakenode.Options{
			Name: name, Labels: n.Labels, CPU: "8", Memory: "16Gi",
			StartDelay: fakeStartDelay, ShutdownDelay: fakeShutdownDelay,
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
// tests then put no node_selector on their VMs, and tests that need guest
// scripts skip.
func externalNodes() *Nodes {
	return &Nodes{stop: func() {}}
}

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
