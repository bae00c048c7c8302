package provider_test

import (
	"fmt"
	"testing"
	"time"

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

// A disk with hotpluggable = true added to and removed from a running VM
// changes it in place (issue 35): the plan is an update, apply restarts
// nothing (the same instance, restart_required false), the guest sees
// the disk appear and vanish, and the instance's volume status follows.
// A hotpluggable disk that cannot be plugged (SATA) is refused at plan
// time on its attribute.
func TestAccVirtualMachine_hotplug(t *testing.T) {
	agent := acctest.SharedAgent(t)
	name := acctest.RandomName("hotplug")
	cfg := func(extra string) string {
		return vmConfig(agent, name, guestBody(agent, guestMemory, `
  disk {
    name = "data"
    persistent {
      size = "32Mi"
    }
  }`+extra, testguest.BlockWatch()))
	}
	const hot = `
  disk {
    name = "scratch"
    bus  = %q
    persistent {
      size         = "16Mi"
      hotpluggable = true
    }
  }`
	var uid string
	guestHas := func(present bool) resource.TestCheckFunc {
		return func(*terraform.State) error {
			agent.Nodes.WaitGuestDisk(t, uid, "scratch", present)
			return nil
		}
	}
	volumeStatus := func(want string) resource.TestCheckFunc {
		return instanceCheck(agent, name, func(vmi *apiv1.VirtualMachineInstance) error {
			got := apiv1.FindVolumeStatus(vmi.GetStatus().GetVolumeStatus(), "scratch").GetPhase()
			if got != want {
				return fmt.Errorf("volume status of scratch %q, want %q: %v", got, want, vmi.GetStatus().GetVolumeStatus())
			}
			return nil
		})
	}
	notRestartRequired := statecheck.ExpectKnownValue(vmAddr, tfjsonpath.New("restart_required"), knownvalue.Bool(false))
	inPlace := resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(vmAddr, plancheck.ResourceActionUpdate)}}
	testVMs(t, agent, []resource.TestStep{
		{
			Config:            cfg(""),
			ConfigStateChecks: []statecheck.StateCheck{expectStatus(apiv1.PrintableRunning), notRestartRequired},
			Check:             resource.ComposeTestCheckFunc(instanceUID(agent, name, &uid), guestBooted(t, agent, name, "")),
		},
		{
			Config:           cfg(fmt.Sprintf(hot, "virtio")),
			ConfigPlanChecks: inPlace,
			ConfigStateChecks: []statecheck.StateCheck{
				expectStatus(apiv1.PrintableRunning), notRestartRequired,
				statecheck.ExpectKnownValue(vmAddr, tfjsonpath.New("disk").AtSliceIndex(1).AtMapKey("persistent").AtMapKey("hotpluggable"), knownvalue.Bool(true)),
			},
			Check: resource.ComposeTestCheckFunc(sameInstance(agent, name, &uid), guestHas(true), eventually(volumeStatus(apiv1.VolumeReady))),
		},
		{
			// Refused by the plan itself.
			Config:      cfg(fmt.Sprintf(hot, "sata")),
			PlanOnly:    true,
			ExpectError: errorRe(`Invalid bus for a hotpluggable disk`, `disk[1] is hotpluggable`, `SATA cannot be plugged`),
		},
		{
			Config:            cfg(""),
			ConfigPlanChecks:  inPlace,
			ConfigStateChecks: []statecheck.StateCheck{expectStatus(apiv1.PrintableRunning), notRestartRequired},
			Check:             resource.ComposeTestCheckFunc(sameInstance(agent, name, &uid), guestHas(false), eventually(volumeStatus(""))),
		},
	})
}

// eventually retries check until it passes or the guest boot timeout
// ends: what the node does after apply returns (a volume's status) is
// not there at once.
func eventually(check resource.TestCheckFunc) resource.TestCheckFunc {
	return func(s *terraform.State) error {
		deadline := time.Now().Add(acctest.GuestBootTimeout)
		for {
			err := check(s)
			if err == nil || time.Now().After(deadline) {
				return err
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}
