package provider_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/testguest"
	"github.com/virtplane/terraform-provider-virtplane/provider/internal/acctest"
)

const nodeLabelsAddr = "virtplane_node_labels.test"

// Keys of the test's labels: no other test sets them.
const (
	accTier   = "acctest.example.com/tier"
	accRack   = "acctest.example.com/rack"
	accZone   = "acctest.example.com/zone"
	accByHand = "acctest.example.com/by-hand"
)

// virtplane_node_labels labels the first of the harness's nodes (on fake
// nodes, one of two), and a VM selecting the label runs there and only
// there. Keys the node owns (node.virtplane.io/) and the server's
// node-name are refused at plan time, naming the key; a label set by hand
// is left alone throughout, and so are the node's own labels. A label
// changed or removed outside Terraform is planned again; import adopts
// every admin label of the node; destroy removes only the keys the
// resource set.
func TestAccNodeLabels(t *testing.T) {
	agent := acctest.SharedAgent(t)
	if len(agent.Nodes.Names) == 0 {
		t.Skip("an external agent's nodes are not the test's to label")
	}
	t.Parallel()
	ctx := t.Context()
	node, run := agent.Nodes.Names[0], acctest.RandomName("lbl")
	vmName := run
	nodeLabels := func() map[string]string {
		t.Helper()
		n, err := agent.Client.Nodes.Get(ctx, &apiv1.GetNodeRequest{Name: node})
		if err != nil {
			t.Fatal(err)
		}
		return n.GetMetadata().GetLabels()
	}
	own := func(l map[string]string) map[string]string {
		out := maps.Clone(l)
		maps.DeleteFunc(out, func(k, _ string) bool { return validation.AdminNodeLabel(k) })
		return out
	}
	before := nodeLabels()
	if _, err := agent.Client.Nodes.Label(ctx, &apiv1.LabelNodeRequest{Name: node, Set: map[string]string{accByHand: run}, Overwrite: true}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = agent.Client.Nodes.Label(context.Background(), &apiv1.LabelNodeRequest{Name: node, Remove: []string{accByHand, accTier, accRack, accZone}})
	})
	// onNode checks the test's keys on the node: want's, and none of the
	// others; the label set by hand and the node's own are as they were.
	onNode := func(want map[string]string) resource.TestCheckFunc {
		return func(*terraform.State) error {
			l := nodeLabels()
			for _, k := range []string{accTier, accRack, accZone} {
				if w, ok := want[k]; l[k] != w || (!ok && l[k] != "") {
					return fmt.Errorf("node %s: %s=%q, want %q (labels %v)", node, k, l[k], w, l)
				}
			}
			if l[accByHand] != run || !maps.Equal(own(l), own(before)) {
				return fmt.Errorf("node %s: labels %v: the one set by hand or the node's own changed (were %v)", node, l, before)
			}
			return nil
		}
	}
	labelsCfg := func(nodeName string, labels map[string]string) string {
		var b strings.Builder
		for _, k := range slices.Sorted(maps.Keys(labels)) {
			fmt.Fprintf(&b, "    %q = %q\n", k, labels[k])
		}
		return fmt.Sprintf(`
resource "virtplane_node_labels" "test" {
  node   = %q
  labels = {
%s  }
}
`, nodeName, b.String())
	}
	// withVM adds a VM that selects the harness's labels and tier=<run>,
	// read from the resource so that it is placed after the label is set.
	withVM := func(labels string) string {
		var sel strings.Builder
		for _, k := range slices.Sorted(maps.Keys(agent.Nodes.Labels)) {
			fmt.Fprintf(&sel, "    %q = %q\n", k, agent.Nodes.Labels[k])
		}
		fmt.Fprintf(&sel, "    %q = virtplane_node_labels.test.labels[%q]\n", accTier, accTier)
		return agent.ProviderConfig() + labels + fmt.Sprintf(`
resource "virtplane_virtual_machine" "test" {
  name          = %q
  node_selector = {
%s  }
%s
}
`, vmName, sel.String(), guestBody(agent, guestMemory, "", testguest.Hostname(vmName)))
	}
	first := map[string]string{accTier: run, accRack: "r1"}
	second := map[string]string{accTier: run, accZone: "z1"}
	stateLabels := func(want map[string]string) statecheck.StateCheck {
		checks := map[string]knownvalue.Check{}
		for k, v := range want {
			checks[k] = knownvalue.StringExact(v)
		}
		return statecheck.ExpectKnownValue(nodeLabelsAddr, tfjsonpath.New("labels"), knownvalue.MapExact(checks))
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProtoV6ProviderFactories,
		CheckDestroy:             resource.ComposeTestCheckFunc(onNode(nil), checkDestroyed(t, agent)),
		Steps: []resource.TestStep{
			{
				// The node's own label: refused at plan time, naming the key.
				Config: agent.ProviderConfig() + labelsCfg(node, map[string]string{apiv1.LabelKVM: "true", accTier: run}),
				ExpectError: errorRe(`Invalid labels key`, `labels key "node.virtplane.io/kvm" cannot be set:`,
					`labels under node.virtplane.io/ are the node's own`),
			},
			{
				Config:      agent.ProviderConfig() + labelsCfg(node, map[string]string{apiv1.LabelNodeName: "other"}),
				ExpectError: errorRe(`labels key "virtplane.io/node-name" cannot be set: the server sets it`),
			},
			{
				Config:      agent.ProviderConfig() + labelsCfg("no-such-node", first),
				ExpectError: errorRe(`No node called "no-such-node" has registered`),
			},
			{
				Config: withVM(labelsCfg(node, first)),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(nodeLabelsAddr, tfjsonpath.New("id"), knownvalue.StringExact(node)),
					stateLabels(first),
					// Placed on the labelled node, of the harness's.
					statecheck.ExpectKnownValue(vmAddr, tfjsonpath.New("status").AtMapKey("node"), knownvalue.StringExact(node)),
				},
				Check: onNode(first),
			},
			{
				// Changed and removed behind Terraform's back: planned again.
				PreConfig: func() {
					if _, err := agent.Client.Nodes.Label(ctx, &apiv1.LabelNodeRequest{Name: node,
						Set: map[string]string{accTier: "changed"}, Remove: []string{accRack}, Overwrite: true}); err != nil {
						t.Fatal(err)
					}
				},
				Config: withVM(labelsCfg(node, first)),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(nodeLabelsAddr, plancheck.ResourceActionUpdate),
				}},
				ConfigStateChecks: []statecheck.StateCheck{stateLabels(first)},
				Check:             onNode(first),
			},
			{
				// A key dropped from the configuration is removed; one added is set.
				Config: withVM(labelsCfg(node, second)),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(nodeLabelsAddr, plancheck.ResourceActionUpdate),
				}},
				ConfigStateChecks: []statecheck.StateCheck{stateLabels(second)},
				Check:             onNode(second),
			},
			{
				// Import adopts every admin label of the node: the label
				// set by hand too, never the node's own or its name.
				ResourceName:  nodeLabelsAddr,
				ImportState:   true,
				ImportStateId: node,
				ImportStateCheck: func(states []*terraform.InstanceState) error {
					if len(states) != 1 {
						return fmt.Errorf("imported %d states", len(states))
					}
					a := states[0].Attributes
					want := map[string]string{"id": node, "node": node, "labels." + accTier: run, "labels." + accZone: "z1",
						"labels." + accByHand: run}
					for k, v := range want {
						if a[k] != v {
							return fmt.Errorf("imported %s = %q, want %q (attributes %v)", k, a[k], v, a)
						}
					}
					for k := range a {
						if l, ok := strings.CutPrefix(k, "labels."); ok && l != "%" && !validation.AdminNodeLabel(l) {
							return fmt.Errorf("import adopted %s, which is not an admin's label", l)
						}
					}
					return nil
				},
			},
			{
				Config:           withVM(labelsCfg(node, second)),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
			},
		},
	})
}
