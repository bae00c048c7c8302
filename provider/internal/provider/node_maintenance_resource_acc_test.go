package provider_test

import (
	"context"
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/provider/internal/acctest"
)

const maintAddr = "virtplane_node_maintenance.window"

// A maintenance window cordons its node while it exists: uncordoned
// outside Terraform it is planned again, it imports by node name, and
// destroy uncordons. With drain = true it drains the node and waits until
// it is drained; a drain canceled outside Terraform is planned again.
// virtplane_nodes shows both. It registers a node of its own, which holds
// no instances (never cordoning the harness's, which run the other tests'
// VMs), runs before the parallel tests, which count the nodes, and
// deletes it again.
func TestAccNodeMaintenance(t *testing.T) {
	agent := acctest.SharedAgent(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	node := &testNode{
		name:        acctest.RandomName("maint"),
		capacity:    map[string]string{"cpu": "2", "memory": "4Gi"},
		allocatable: map[string]string{"cpu": "2", "memory": "4Gi"},
		info:        &apiv1.NodeInfo{AgentVersion: "v0.1.0-acc"},
	}
	node.register(ctx, t, agent)
	t.Cleanup(func() {
		if _, err := agent.Client.Nodes.Delete(context.Background(), &apiv1.DeleteNodeRequest{Name: node.name}); err != nil {
			t.Errorf("deleting node %s: %v", node.name, err)
		}
	})
	// nodeSpec checks the node's cordon and drain in the agent.
	nodeSpec := func(unschedulable, drain bool) resource.TestCheckFunc {
		return func(*terraform.State) error {
			n, err := agent.Client.Nodes.Get(ctx, &apiv1.GetNodeRequest{Name: node.name})
			if err != nil {
				return err
			}
			if s := n.GetSpec(); s.GetUnschedulable() != unschedulable || s.GetDrain() != drain {
				return fmt.Errorf("node %s: unschedulable %v drain %v, want %v %v",
					node.name, s.GetUnschedulable(), s.GetDrain(), unschedulable, drain)
			}
			return nil
		}
	}
	// cfg is the window on node name, with body, and the node as
	// virtplane_nodes lists it once the window is applied.
	cfg := func(name, body string) string {
		return agent.ProviderConfig() + fmt.Sprintf(`
resource "virtplane_node_maintenance" "window" {
  node = %q
  %s
}

data "virtplane_nodes" "maint" {
  label_selector = "%s=%s"
  depends_on     = [virtplane_node_maintenance.window]
}
`, name, body, apiv1.LabelNodeName, node.name)
	}
	const drain = "drain = true\n  timeouts {\n    create = \"2m\"\n  }"
	listed := func(unschedulable, draining, drained bool) statecheck.StateCheck {
		return statecheck.ExpectKnownValue("data.virtplane_nodes.maint", tfjsonpath.New("nodes").AtSliceIndex(0),
			knownvalue.ObjectPartial(map[string]knownvalue.Check{
				"name":          knownvalue.StringExact(node.name),
				"unschedulable": knownvalue.Bool(unschedulable),
				"draining":      knownvalue.Bool(draining),
				"drained":       knownvalue.Bool(drained),
			}))
	}
	uncordon := func() {
		if _, err := agent.Client.Nodes.Uncordon(ctx, &apiv1.CordonNodeRequest{Name: node.name}); err != nil {
			t.Fatal(err)
		}
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProtoV6ProviderFactories,
		CheckDestroy:             nodeSpec(false, false),
		Steps: []resource.TestStep{
			{
				Config:      cfg("no-such-node", ""),
				ExpectError: regexp.MustCompile(`No node called "no-such-node" has registered`),
			},
			{
				Config: cfg(node.name, ""),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(maintAddr, tfjsonpath.New("id"), knownvalue.StringExact(node.name)),
					statecheck.ExpectKnownValue(maintAddr, tfjsonpath.New("drain"), knownvalue.Bool(false)),
					statecheck.ExpectKnownValue(maintAddr, tfjsonpath.New("drained"), knownvalue.Bool(false)),
					listed(true, false, false),
				},
				Check: nodeSpec(true, false),
			},
			{
				// Uncordoned behind Terraform's back: the window is planned again.
				PreConfig: uncordon,
				Config:    cfg(node.name, ""),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(maintAddr, plancheck.ResourceActionCreate),
				}},
				Check: nodeSpec(true, false),
			},
			{
				ResourceName:      maintAddr,
				ImportState:       true,
				ImportStateId:     node.name,
				ImportStateVerify: true,
			},
			{
				Config:           cfg(node.name, ""),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
			},
			{
				// Draining replaces the cordon; the node holds nothing, so
				// the drain ends at once.
				Config: cfg(node.name, drain),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(maintAddr, plancheck.ResourceActionDestroyBeforeCreate),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(maintAddr, tfjsonpath.New("drain"), knownvalue.Bool(true)),
					statecheck.ExpectKnownValue(maintAddr, tfjsonpath.New("drained"), knownvalue.Bool(true)),
					listed(true, true, true),
				},
				Check: nodeSpec(true, true),
			},
			{
				// Uncordoned and cordoned again behind Terraform's back: the
				// drain was canceled, so it is planned again.
				PreConfig: func() {
					uncordon()
					if _, err := agent.Client.Nodes.Cordon(ctx, &apiv1.CordonNodeRequest{Name: node.name}); err != nil {
						t.Fatal(err)
					}
				},
				Config: cfg(node.name, drain),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(maintAddr, plancheck.ResourceActionCreate),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(maintAddr, tfjsonpath.New("drained"), knownvalue.Bool(true)),
				},
				Check: nodeSpec(true, true),
			},
			{
				// Import finds the drain; timeouts are not imported.
				ResourceName:            maintAddr,
				ImportState:             true,
				ImportStateId:           node.name,
				ImportStateVerify:       true,
				ImportStateVerifyIgnore: []string{"timeouts"},
			},
			{
				Config:           cfg(node.name, drain),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
			},
		},
	})
}
