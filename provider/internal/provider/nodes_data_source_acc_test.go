package provider_test

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/provider/internal/acctest"
)

// testNode is a node the test registers and the attributes it expects back.
type testNode struct {
	name        string
	labels      map[string]string
	schedulable bool
	capacity    map[string]string
	allocatable map[string]string
	info        *apiv1.NodeInfo
	// bridges and networks are the node's network inventory, sorted.
	bridges, networks []string
	heartbeat         string // filled from the Register answer
}

func (n *testNode) register(ctx context.Context, t *testing.T, agent *acctest.Agent) {
	t.Helper()
	// Reversed: the data source lists them sorted.
	bridges := slices.Clone(n.bridges)
	slices.Reverse(bridges)
	// The node registers with its own labels; an admin sets the others.
	own, admins := map[string]string{}, map[string]string{}
	for k, v := range n.labels {
		if validation.NodeOwnedLabel(k) {
			own[k] = v
		} else {
			admins[k] = v
		}
	}
	out, err := agent.Client.Nodes.Register(ctx, &apiv1.RegisterNodeRequest{Node: &apiv1.Node{
		Metadata: &apiv1.ObjectMeta{Name: n.name, Labels: own},
		Status: &apiv1.NodeStatus{
			Capacity:    n.capacity,
			Allocatable: n.allocatable,
			Schedulable: n.schedulable,
			NodeInfo:    n.info,
			Bridges:     bridges,
			Networks:    n.networks,
		},
	}})
	if err != nil {
		t.Fatalf("register node %s: %v", n.name, err)
	}
	if len(admins) > 0 {
		if _, err := agent.Client.Nodes.Label(ctx, &apiv1.LabelNodeRequest{Name: n.name, Set: admins}); err != nil {
			t.Fatalf("label node %s: %v", n.name, err)
		}
	}
	n.heartbeat = out.GetStatus().GetHeartbeat().AsTime().UTC().Format(time.RFC3339)
}

// attrs are the flatmap attributes of the node inside "nodes.*".
func (n *testNode) attrs() map[string]string {
	a := map[string]string{
		"name":            n.name,
		"ready":           "true", // Register records a heartbeat
		"schedulable":     fmt.Sprint(n.schedulable),
		"unschedulable":   "false",
		"draining":        "false",
		"drained":         "false",
		"cpu":             n.allocatable["cpu"],
		"memory":          n.allocatable["memory"],
		"capacity_cpu":    n.capacity["cpu"],
		"capacity_memory": n.capacity["memory"],
		"kvm_usable":      fmt.Sprint(n.info.GetKvmUsable()),
		"agent_version":   n.info.GetAgentVersion(),
		"libvirt_version": n.info.GetLibvirtVersion(),
		"qemu_version":    n.info.GetQemuVersion(),
		"heartbeat":       n.heartbeat,
		// The API adds the node-name label to every node.
		"labels.%":                      fmt.Sprint(len(n.labels) + 1),
		"labels." + apiv1.LabelNodeName: n.name,
		"images.#":                      "0",
	}
	for k, v := range n.labels {
		a["labels."+k] = v
	}
	a["bridges.#"], a["networks.#"] = fmt.Sprint(len(n.bridges)), fmt.Sprint(len(n.networks))
	for i, b := range n.bridges {
		a[fmt.Sprintf("bridges.%d", i)] = b
	}
	for i, nw := range n.networks {
		a[fmt.Sprintf("networks.%d", i)] = nw
	}
	return a
}

func TestAccNodesDataSource(t *testing.T) {
	agent := acctest.SharedAgent(t)
	// Parallel before the nodes are registered, not in the middle of
	// resource.ParallelTest: a test paused there for longer than the node
	// lease (40 s) would find its nodes marked not ready.
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// A per-run label keeps the filtered steps exact on an external agent
	// that has nodes of its own (or of earlier runs).
	run := acctest.RandomName("tfacc")
	a := &testNode{
		name:   run + "-a",
		labels: map[string]string{"virtplane.io/test-run": run, "zone": "a", "gpu": "true", "node.virtplane.io/test-disk": "ssd"},
		// Fake nodes must not attract real work on a shared agent.
		schedulable: !agent.External,
		capacity:    map[string]string{"cpu": "8", "memory": "32Gi"},
		allocatable: map[string]string{"cpu": "7", "memory": "30Gi"},
		info: &apiv1.NodeInfo{
			Hostname: run + "-a", AgentVersion: "v0.1.0-acc", LibvirtVersion: "10.0.0",
			QemuVersion: "8.2.2", KvmUsable: true,
		},
		bridges:  []string{"br0", "br1"},
		networks: []string{"default"},
	}
	b := &testNode{
		name:        run + "-b",
		labels:      map[string]string{"virtplane.io/test-run": run, "zone": "b"},
		capacity:    map[string]string{"cpu": "4", "memory": "8Gi"},
		allocatable: map[string]string{"cpu": "3500m", "memory": "7Gi"},
		info: &apiv1.NodeInfo{
			Hostname: run + "-b", AgentVersion: "v0.1.0-acc", LibvirtVersion: "9.0.0",
			QemuVersion: "7.2.0", KvmUsable: false,
		},
	}
	a.register(ctx, t, agent)
	b.register(ctx, t, agent)

	allChecks := []resource.TestCheckFunc{
		resource.TestCheckResourceAttr("data.virtplane_nodes.all", "id", "*"),
		resource.TestCheckNoResourceAttr("data.virtplane_nodes.all", "label_selector"),
		resource.TestCheckTypeSetElemNestedAttrs("data.virtplane_nodes.all", "nodes.*", a.attrs()),
		resource.TestCheckTypeSetElemNestedAttrs("data.virtplane_nodes.all", "nodes.*", b.attrs()),
	}
	var allStateChecks []statecheck.StateCheck
	if !agent.External {
		// Our own agent holds exactly these two and the harness's nodes,
		// in name order.
		names := append([]string{a.name, b.name}, agent.Nodes.Names...)
		sort.Strings(names)
		bIndex := sort.SearchStrings(names, b.name)
		allChecks = append(allChecks,
			resource.TestCheckResourceAttr("data.virtplane_nodes.all", "nodes.#", fmt.Sprint(len(names))))
		for i, n := range names {
			allChecks = append(allChecks,
				resource.TestCheckResourceAttr("data.virtplane_nodes.all", fmt.Sprintf("nodes.%d.name", i), n))
			// The harness's nodes list the bridge and network the VM
			// tests connect to.
			if !slices.Contains(agent.Nodes.Names, n) {
				continue
			}
			if agent.Nodes.Bridge != "" {
				allChecks = append(allChecks, resource.TestCheckTypeSetElemAttr("data.virtplane_nodes.all",
					fmt.Sprintf("nodes.%d.bridges.*", i), agent.Nodes.Bridge))
			}
			if agent.Nodes.Network != "" {
				allChecks = append(allChecks, resource.TestCheckTypeSetElemAttr("data.virtplane_nodes.all",
					fmt.Sprintf("nodes.%d.networks.*", i), agent.Nodes.Network))
			}
		}
		allStateChecks = append(allStateChecks,
			statecheck.ExpectKnownValue("data.virtplane_nodes.all", tfjsonpath.New("nodes").AtSliceIndex(bIndex),
				knownvalue.ObjectExact(map[string]knownvalue.Check{
					"name":            knownvalue.StringExact(b.name),
					"ready":           knownvalue.Bool(true),
					"schedulable":     knownvalue.Bool(false),
					"unschedulable":   knownvalue.Bool(false),
					"draining":        knownvalue.Bool(false),
					"drained":         knownvalue.Bool(false),
					"cpu":             knownvalue.StringExact("3500m"),
					"memory":          knownvalue.StringExact("7Gi"),
					"capacity_cpu":    knownvalue.StringExact("4"),
					"capacity_memory": knownvalue.StringExact("8Gi"),
					"kvm_usable":      knownvalue.Bool(false),
					"agent_version":   knownvalue.StringExact("v0.1.0-acc"),
					"libvirt_version": knownvalue.StringExact("9.0.0"),
					"qemu_version":    knownvalue.StringExact("7.2.0"),
					"heartbeat":       knownvalue.StringExact(b.heartbeat),
					"labels": knownvalue.MapExact(map[string]knownvalue.Check{
						"virtplane.io/test-run": knownvalue.StringExact(run),
						"zone":                  knownvalue.StringExact("b"),
						apiv1.LabelNodeName:     knownvalue.StringExact(b.name),
					}),
					"images": knownvalue.ListExact([]knownvalue.Check{}),
					// Empty, not null, for a node without any.
					"bridges":  knownvalue.ListExact([]knownvalue.Check{}),
					"networks": knownvalue.ListExact([]knownvalue.Check{}),
				})),
		)
	}

	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config:            agent.ProviderConfig() + `data "virtplane_nodes" "all" {}`,
				Check:             resource.ComposeAggregateTestCheckFunc(allChecks...),
				ConfigStateChecks: allStateChecks,
			},
			{
				Config: agent.ProviderConfig() + fmt.Sprintf(`
data "virtplane_nodes" "zone_b" {
  label_selector = "zone in (b), virtplane.io/test-run=%s"
}`, run),
				Check: resource.ComposeAggregateTestCheckFunc(
					// Canonical form: sorted by key, no spaces.
					resource.TestCheckResourceAttr("data.virtplane_nodes.zone_b", "id", "virtplane.io/test-run="+run+",zone in (b)"),
					resource.TestCheckResourceAttr("data.virtplane_nodes.zone_b", "nodes.#", "1"),
					resource.TestCheckResourceAttr("data.virtplane_nodes.zone_b", "nodes.0.name", b.name),
					resource.TestCheckResourceAttr("data.virtplane_nodes.zone_b", "nodes.0.cpu", "3500m"),
				),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("data.virtplane_nodes.zone_b", tfjsonpath.New("nodes"), knownvalue.ListSizeExact(1)),
				},
			},
			{
				// Set-based selectors and negation: only a has a GPU label.
				Config: agent.ProviderConfig() + fmt.Sprintf(`
data "virtplane_nodes" "gpu" {
  label_selector = "virtplane.io/test-run=%s,gpu"
}
data "virtplane_nodes" "no_gpu" {
  label_selector = "virtplane.io/test-run=%s,!gpu"
}`, run, run),
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr("data.virtplane_nodes.gpu", "nodes.#", "1"),
					resource.TestCheckResourceAttr("data.virtplane_nodes.gpu", "nodes.0.name", a.name),
					resource.TestCheckResourceAttr("data.virtplane_nodes.gpu", "nodes.0.labels.gpu", "true"),
					resource.TestCheckResourceAttr("data.virtplane_nodes.no_gpu", "nodes.#", "1"),
					resource.TestCheckResourceAttr("data.virtplane_nodes.no_gpu", "nodes.0.name", b.name),
				),
			},
			{
				// Not the last step: the post-test destroy reuses the
				// last configuration, which must be valid.
				Config: agent.ProviderConfig() + `
data "virtplane_nodes" "bad" {
  label_selector = "zone in ((a)"
}`,
				ExpectError: regexp.MustCompile(`Invalid label_selector`),
			},
			{
				Config: agent.ProviderConfig() + fmt.Sprintf(`
data "virtplane_nodes" "none" {
  label_selector = "virtplane.io/test-run=%s,zone=nowhere"
}`, run),
				ConfigStateChecks: []statecheck.StateCheck{
					// An empty match is an empty list, not null.
					statecheck.ExpectKnownValue("data.virtplane_nodes.none", tfjsonpath.New("nodes"), knownvalue.ListExact([]knownvalue.Check{})),
				},
			},
		},
	})
}
