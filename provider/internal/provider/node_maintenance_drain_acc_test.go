package provider_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/fakenode"
	"github.com/virtplane/terraform-provider-virtplane/provider/internal/acctest"
)

// A drain that cannot finish fails create after timeouts.create, naming
// the instance that holds it and why, and the window is saved all the
// same, so that removing it uncordons the node. The node is a fake node
// agent of the test's own (the harness's nodes run the other tests' VMs
// and are never cordoned), and the VM on it holds the drain: LiveMigrate
// and paused, which cannot migrate (EFI guests migrate since issue 34: a
// paused instance is the one that is not live-migratable). Like
// TestAccNodeMaintenance it runs before the parallel tests and deletes its
// node.
func TestAccNodeMaintenance_drainTimeout(t *testing.T) {
	agent := acctest.SharedAgent(t)
	ctx := t.Context()
	node, vm := acctest.RandomName("drain"), acctest.RandomName("held")
	labels := map[string]string{"node.virtplane.io/acctest-drain": node}
	f, err := fakenode.Start(ctx, agent.Client, fakenode.Options{Name: node, Labels: labels, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		f.Stop()
		if _, err := agent.Client.Nodes.Delete(context.Background(), &apiv1.DeleteNodeRequest{Name: node}); err != nil {
			t.Errorf("deleting node %s: %v", node, err)
		}
	})
	vmCfg := agent.ProviderConfig() + fmt.Sprintf(`
resource "virtplane_virtual_machine" "test" {
  name              = %q
  memory            = "128Mi"
  eviction_strategy = "LiveMigrate"
  node_selector     = { "node.virtplane.io/acctest-drain" = %q }
  disk {
    name  = "root"
    image = "root.qcow2"
  }
}
`, vm, node)
	maintCfg := vmCfg + fmt.Sprintf(`
resource "virtplane_node_maintenance" "window" {
  node  = %q
  drain = true
  timeouts {
    create = "10s"
  }
}
`, node)
	uncordoned := func(*terraform.State) error {
		n, err := agent.Client.Nodes.Get(ctx, &apiv1.GetNodeRequest{Name: node})
		if err != nil {
			return err
		}
		if s := n.GetSpec(); s.GetUnschedulable() || s.GetDrain() {
			return fmt.Errorf("node %s: unschedulable %v drain %v after the window was removed", node, s.GetUnschedulable(), s.GetDrain())
		}
		return nil
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProtoV6ProviderFactories,
		CheckDestroy:             checkDestroyed(t, agent),
		Steps: []resource.TestStep{
			{
				Config:            vmCfg,
				ConfigStateChecks: []statecheck.StateCheck{expectStatus(apiv1.PrintableRunning)},
			},
			{
				PreConfig: func() {
					key := &apiv1.ObjectKey{Namespace: "default", Name: vm}
					if _, err := agent.Client.VMs.Pause(ctx, &apiv1.PauseVirtualMachineRequest{Key: key}); err != nil {
						t.Fatalf("pausing %s: %v", vm, err)
					}
				},
				Config: maintCfg,
				ExpectError: errorRe("Node "+node+" not drained",
					"node "+node+" not drained after 10s: default/"+vm+" (LiveMigrate, Blocked:", "not live-migratable: the instance is paused"),
			},
			{
				// The window was saved (tainted) despite the error: removing
				// it destroys it, which uncordons the node.
				Config: vmCfg,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(maintAddr, plancheck.ResourceActionDestroy),
				}},
				Check: uncordoned,
			},
		},
	})
}
