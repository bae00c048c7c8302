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

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/testguest"
	"github.com/virtplane/terraform-provider-virtplane/provider/internal/acctest"
)

// Acceptance tests of wait_for_ip: apply waits for the address and
// records it (real and fake nodes); on fake nodes, whose guests get their
// addresses when a script says (acctest.AddressesAnnotation), it fails
// with the node's reason when none comes, and refresh and plan never
// wait.

// skipUnlessScripted skips tests whose guests must get (or not get) their
// addresses on cue.
func skipUnlessScripted(t *testing.T, agent *acctest.Agent) {
	t.Helper()
	if !agent.Nodes.Scripted {
		t.Skip("needs scripted guest addresses (fake nodes: " + acctest.EnvFakeNodes + "=1)")
	}
}

// addressVM is a VM with one user-mode interface whose address comes as
// script says on fake nodes, with extra in its body. A real guest asks
// QEMU's user-mode DHCP for its address and runs a guest agent, which
// tells the node.
func addressVM(agent *acctest.Agent, name, memory, script, extra string) string {
	return vmConfig(agent, name, guestBody(agent, memory, fmt.Sprintf(`
  annotations = {
    %q = %q
  }
  interface {
    name = "default"
  }
%s`, acctest.AddressesAnnotation, script, extra), testguest.Network(), testguest.GuestAgent())) + `
output "ip" {
  value = virtplane_virtual_machine.test.status.interfaces[0].ip_address
}
`
}

// hasAddress checks that the state and output "ip" hold the address the
// guest has on interface[0]: apply waited for it, since it comes a while
// after the guest runs. A fake guest has the one its MAC gives; a real
// one the one QEMU's user-mode DHCP server hands out.
func hasAddress(agent *acctest.Agent) resource.TestCheckFunc {
	return func(s *terraform.State) error {
		a := s.RootModule().Resources[vmAddr].Primary.Attributes
		want := slirpGuestAddress
		if agent.Nodes.Scripted {
			want = acctest.FakeAddress(a["interface.0.mac_address"])
		}
		return addressIs(s, want)
	}
}

// slirpGuestAddress is the address QEMU's user-mode network gives its
// guest by DHCP.
const slirpGuestAddress = "10.0.2.15"

func addressIs(s *terraform.State, want string) error {
	a := s.RootModule().Resources[vmAddr].Primary.Attributes
	if got := a["status.interfaces.0.ip_address"]; want == "" || got != want {
		return fmt.Errorf("status.interfaces[0].ip_address = %q, want %q (source %q, info %q)", got, want,
			a["status.interfaces.0.source"], a["status.interfaces.0.info"])
	}
	if out := s.RootModule().Outputs["ip"]; out == nil || out.Value != want {
		return fmt.Errorf("output ip = %v, want %q", out, want)
	}
	return nil
}

// Create waits for the address, which comes a while after the guest runs
// (on fake nodes a second; a real guest first boots and asks DHCP, then
// its guest agent answers the node); so does an update that restarts the
// guest, for the new instance's address.
func TestAccVirtualMachine_waitForIP(t *testing.T) {
	agent := acctest.SharedAgent(t)
	name := acctest.RandomName("ip")
	body := func(memory string) string {
		return addressVM(agent, name, memory, "after:1s", fmt.Sprintf("  wait_for_ip {\n    timeout = %q\n  }\n", acctest.GuestBootTimeout))
	}
	var uid string
	testVMs(t, agent, []resource.TestStep{
		{
			Config: body(guestMemory),
			ConfigStateChecks: []statecheck.StateCheck{
				expectStatus(apiv1.PrintableRunning),
				statecheck.ExpectKnownValue(vmAddr, statusIface("source"), knownvalue.StringExact(apiv1.InterfaceSourceAgent)),
				statecheck.ExpectKnownValue(vmAddr, statusIface("info"), knownvalue.Null()),
				statecheck.ExpectKnownValue(vmAddr, statusIface("interface_name"), knownvalue.StringExact("eth0")),
			},
			Check: resource.ComposeTestCheckFunc(hasAddress(agent), instanceUID(agent, name, &uid), guestBooted(t, agent, name, "")),
		},
		{
			Config: body(guestMemory2),
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectResourceAction(vmAddr, plancheck.ResourceActionUpdate),
			}},
			Check: resource.ComposeTestCheckFunc(restartedWith(agent, name, &uid, guestMemory2), hasAddress(agent), guestBooted(t, agent, name, "")),
		},
	})
}

// A guest that never gets an address fails create after wait_for_ip's
// timeout, with the interface and the node's reason; the VM is tainted
// and the next apply replaces it.
func TestAccVirtualMachine_waitForIPTimeout(t *testing.T) {
	agent := acctest.SharedAgent(t)
	skipUnlessScripted(t, agent)
	name := acctest.RandomName("noip")
	var start time.Time // when the step starts, not when the parallel test waits its turn
	testVMs(t, agent, []resource.TestStep{
		{
			PreConfig: func() { start = time.Now() },
			Config:    addressVM(agent, name, guestMemory, "never:no DHCP lease for the test's guest", "  wait_for_ip {\n    timeout = \"2s\"\n  }\n"),
			ExpectError: errorRe(`Timed out waiting for an IP address of virtual machine default/`+name,
				`interface "default" has no IP address after 2s: no DHCP lease for the test's guest`),
		},
		{
			PreConfig: func() {
				if d := time.Since(start); d > time.Minute {
					t.Errorf("create took %s to fail; wait_for_ip.timeout is 2s", d)
				}
			},
			Config: addressVM(agent, name, guestMemory, "", "  wait_for_ip {}\n"),
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectResourceAction(vmAddr, plancheck.ResourceActionDestroyBeforeCreate),
			}},
			Check: hasAddress(agent),
		},
	})
}

// wait_for_ip never makes refresh or plan wait, and an update that
// neither restarts the guest nor changes the block does not wait either;
// adding the block does, within timeouts.update.
func TestAccVirtualMachine_waitForIPNeverOnRefresh(t *testing.T) {
	agent := acctest.SharedAgent(t)
	skipUnlessScripted(t, agent)
	name := acctest.RandomName("refresh")
	const never = "never:the guest agent is not connected"
	// The block's timeout is long and the update's short: a wait where
	// there should be none fails the step (apply) or outlasts the test's
	// bound (refresh, plan).
	waiting := "  wait_for_ip {\n    timeout = \"10m\"\n  }\n  timeouts {\n    update = \"3s\"\n  }\n"
	var refreshStart time.Time
	testVMs(t, agent, []resource.TestStep{
		{
			Config: addressVM(agent, name, guestMemory, never, ""),
			ConfigStateChecks: []statecheck.StateCheck{
				expectStatus(apiv1.PrintableRunning),
				statecheck.ExpectKnownValue(vmAddr, statusIface("ip_address"), knownvalue.Null()),
				statecheck.ExpectKnownValue(vmAddr, statusIface("info"), knownvalue.StringExact("the guest agent is not connected")),
			},
		},
		{
			// Adding the block waits, and the update's timeout ends it.
			Config:      addressVM(agent, name, guestMemory, never, waiting),
			ExpectError: errorRe(`interface "default" has no IP address after`, `when timeouts.update ended: the guest agent is not connected`),
		},
		{
			PreConfig:    func() { refreshStart = time.Now() },
			RefreshState: true,
		},
		{
			// The state has the block now: the plan is empty, and made
			// without waiting.
			Config:   addressVM(agent, name, guestMemory, never, waiting),
			PlanOnly: true,
		},
		{
			PreConfig: func() {
				if d := time.Since(refreshStart); d > time.Minute {
					t.Errorf("refresh and plan took %s with wait_for_ip set and no address; they must not wait", d)
				}
			},
			// A label change applies at once, without waiting.
			Config: addressVM(agent, name, guestMemory, never, waiting+"  labels = {\n    app = \"web\"\n  }\n"),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(vmAddr, statusIface("ip_address"), knownvalue.Null()),
			},
		},
	})
}
