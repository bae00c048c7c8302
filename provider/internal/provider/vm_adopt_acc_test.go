package provider_test

import (
	"fmt"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/testguest"
	"github.com/virtplane/terraform-provider-virtplane/provider/internal/acctest"
)

// Adopting a domain with `terraform import ... adopt:NODE/DOMAIN/NS/NAME`
// (docs/adopt.md), on the real node with the real terraform CLI: a domain
// made with virsh define and start is imported with the same QEMU
// process, the configuration written from its mapping plans no change,
// and destroy removes the VM and the domain. An import id naming no
// domain fails with the node's word, importing nothing.
func TestAccVirtualMachine_adopt(t *testing.T) {
	agent := acctest.SharedAgent(t)
	if !agent.Nodes.CanAdopt() {
		t.Skip("adopting a domain needs the real node (libvirt)")
	}
	name := acctest.RandomName("adopt")
	domain := "acc-" + name
	const mac = "52:54:00:5a:00:01"
	pid := agent.Nodes.StartAdoptable(t, domain, mac)
	node := agent.Nodes.Names[0]
	cfg := agent.ProviderConfig() + fmt.Sprintf(`
resource "virtplane_virtual_machine" "test" {
  name   = %q
  memory = "160Mi"
  boot {
    kernel  = %q
    initrd  = %q
    cmdline = %q
  }
  disk {
    name = "vda"
    persistent {
      size = "64Mi"
    }
  }
  interface {
    name        = "nic0"
    model       = "virtio"
    mac_address = %q
  }
}
`, name, agent.Nodes.Kernel, testguest.InitrdFile, testguest.Cmdline(testguest.Persist("/dev/vda"), testguest.Hostname(domain)), mac)
	samePid := func(*terraform.State) error {
		if got := agent.Nodes.QEMUPid(t, domain); got != pid {
			return fmt.Errorf("QEMU pid %d after the import, %d before: the guest was restarted", got, pid)
		}
		return nil
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config:        cfg,
				ResourceName:  vmAddr,
				ImportState:   true,
				ImportStateId: "adopt:" + node + "/nonexistent-" + name + "/default/" + name + "-x",
				ExpectError:   regexp.MustCompile(`(?s)Cannot adopt domain.*could not read domain`),
			},
			{
				Config:             cfg,
				ResourceName:       vmAddr,
				ImportState:        true,
				ImportStateId:      "adopt:" + node + "/" + domain + "/default/" + name,
				ImportStatePersist: true,
				ImportStateCheck: func(states []*terraform.InstanceState) error {
					if len(states) != 1 || states[0].ID != "default/"+name {
						return fmt.Errorf("imported %v", states)
					}
					return samePid(nil)
				},
			},
			{
				// The configuration is what the domain maps to: no change.
				Config: cfg,
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
				},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(vmAddr, tfjsonpath.New("status").AtMapKey("printable_status"), knownvalue.StringExact(apiv1.PrintableRunning)),
				},
				Check: samePid,
			},
		},
	})
}
