package provider_test

import (
	"fmt"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	k8sresource "k8s.io/apimachinery/pkg/api/resource"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/testguest"
	"github.com/virtplane/terraform-provider-virtplane/provider/internal/acctest"
)

// A persistent disk that grows (issue 34's bug: raising its size
// restarted the VM, left the volume as it was and ended the apply with
// "Provider produced inconsistent result after apply: .restart_required:
// was cty.False, but now cty.True"). Raising the size of a running VM's
// volume grows it online: the same instance runs on, the guest sees the
// new size, and so does qemu-img. Shrinking it is refused at plan time on
// the attribute. A change that does restart the VM (memory) leaves
// restart_required false afterwards. Raising the size of a stopped VM's
// volume grows it before its next start.
func TestAccVirtualMachine_persistentGrow(t *testing.T) {
	agent := acctest.SharedAgent(t)
	name := acctest.RandomName("grow")
	const dev = "/dev/vda" // the only disk, on virtio
	cfg := func(memory, size, extra string) string {
		return vmConfig(agent, name, guestBody(agent, memory, fmt.Sprintf(`%s
  disk {
    name = "data"
    persistent {
      size = %q
    }
  }`, extra, size), testguest.DiskSize(dev), testguest.DeviceTimeout(acctest.GuestBootTimeout)))
	}
	var uid string
	size := func(vmSize string) resource.TestCheckFunc {
		q := k8sresource.MustParse(vmSize)
		want := q.Value()
		return func(*terraform.State) error {
			vm, vmi, err := apiVM(t.Context(), agent, "default", name)
			if err != nil {
				return err
			}
			agent.Nodes.WaitDiskSize(t, vmi.GetMetadata().GetUid(), dev, want)
			got, ok, err := agent.Nodes.VolumeSize(t.Context(), vm.GetMetadata().GetUid(), "data")
			switch {
			case err != nil:
				return err
			case ok && got != want:
				return fmt.Errorf("qemu-img says volume data is %d bytes, want %d (%s)", got, want, vmSize)
			}
			return nil
		}
	}
	notRestartRequired := statecheck.ExpectKnownValue(vmAddr, tfjsonpath.New("restart_required"), knownvalue.Bool(false))
	diskSize := tfjsonpath.New("disk").AtSliceIndex(0).AtMapKey("persistent").AtMapKey("size")
	testVMs(t, agent, []resource.TestStep{
		{
			Config:            cfg(guestMemory, "64Mi", ""),
			ConfigStateChecks: []statecheck.StateCheck{expectStatus(apiv1.PrintableRunning), notRestartRequired},
			Check:             resource.ComposeTestCheckFunc(instanceUID(agent, name, &uid), guestBooted(t, agent, name, ""), size("64Mi")),
		},
		{
			// A change that needs a restart, of a VM with a persistent
			// volume. (Its new instance was pinned to the volume's node,
			// which the VM controller took for a template change: the VM
			// then said restart_required = true for good, and the next
			// apply with a change planned false and failed with the
			// issue's "inconsistent result".)
			Config:            cfg(guestMemory2, "64Mi", ""),
			ConfigStateChecks: []statecheck.StateCheck{expectStatus(apiv1.PrintableRunning)},
			Check:             resource.ComposeTestCheckFunc(restartedWith(agent, name, &uid, guestMemory2), guestBooted(t, agent, name, "")),
		},
		{
			// Online: no restart is made.
			Config: cfg(guestMemory2, "128Mi", ""),
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectResourceAction(vmAddr, plancheck.ResourceActionUpdate),
			}},
			ConfigStateChecks: []statecheck.StateCheck{
				expectStatus(apiv1.PrintableRunning), notRestartRequired,
				statecheck.ExpectKnownValue(vmAddr, diskSize, knownvalue.StringExact("128Mi")),
			},
			Check: resource.ComposeTestCheckFunc(sameInstance(agent, name, &uid), size("128Mi")),
		},
		{
			// Refused by the plan itself, not by the agent at apply (which
			// says the same words).
			Config:      cfg(guestMemory2, "64Mi", ""),
			PlanOnly:    true,
			ExpectError: errorRe(`disk[0].persistent.size`, `may not shrink from 128Mi to 64Mi`),
		},
		{
			// Grown while stopped: the next start has the new size.
			Config:            cfg(guestMemory2, "192Mi", `run_strategy = "Halted"`),
			ConfigStateChecks: []statecheck.StateCheck{expectStatus(apiv1.PrintableStopped)},
			Check:             resource.ComposeTestCheckFunc(noInstance(agent, name), noDomain(t, agent, name)),
		},
		{
			Config:            cfg(guestMemory2, "192Mi", `run_strategy = "Always"`),
			ConfigStateChecks: []statecheck.StateCheck{expectStatus(apiv1.PrintableRunning), notRestartRequired},
			Check:             resource.ComposeTestCheckFunc(restartedWith(agent, name, &uid, guestMemory2), guestBooted(t, agent, name, ""), size("192Mi")),
		},
	})
}
