package provider_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/virtplane/terraform-provider-virtplane/internal/testguest"
	"github.com/virtplane/terraform-provider-virtplane/provider/internal/acctest"
)

// Acceptance tests of what goes wrong: changes made outside Terraform, and
// VMs that cannot run, which fail fast with the reason.

// A VM deleted outside Terraform is planned for creation again; an agent
// that cannot be reached is an error, never taken for a deletion.
func TestAccVirtualMachine_driftDeleted(t *testing.T) {
	agent := acctest.SharedAgent(t)
	name := acctest.RandomName("gone")
	body := guestBody(agent, guestMemory, "")
	cfg := vmConfig(agent, name, body)
	unreachable := fmt.Sprintf(`
provider "virtplane" {
  endpoint = "unix://%s/no-agent.sock"
}
resource "virtplane_virtual_machine" "test" {
  name = %q
  %s
  %s
}
`, t.TempDir(), name, agent.Nodes.NodeSelectorHCL(), body)
	deleted := func() {
		deleteVM(t, agent, name)
		waitNoDomain(t, agent, "default", name)
	}
	testVMs(t, agent, []resource.TestStep{
		runningStep(t, agent, name, cfg, nil),
		{
			Config:      unreachable,
			PlanOnly:    true,
			ExpectError: errorRe(`virtplane agent unreachable`, `Cannot read virtual machine default/`+name),
		},
		runningStep(t, agent, name, cfg, deleted, plancheck.ExpectResourceAction(vmAddr, plancheck.ResourceActionCreate)),
	})
}

// A stop outside Terraform (which turns Always into Halted, as in
// KubeVirt) shows as a change back to Always, and apply starts the VM.
func TestAccVirtualMachine_driftStopped(t *testing.T) {
	agent := acctest.SharedAgent(t)
	name := acctest.RandomName("stopped")
	cfg := vmConfig(agent, name, guestBody(agent, guestMemory, ""))
	testVMs(t, agent, []resource.TestStep{
		runningStep(t, agent, name, cfg, nil),
		runningStep(t, agent, name, cfg, func() { stopVM(t, agent, name) },
			plancheck.ExpectResourceAction(vmAddr, plancheck.ResourceActionUpdate),
			plancheck.ExpectKnownValue(vmAddr, tfjsonpath.New("run_strategy"), knownvalue.StringExact("Always"))),
	})
}

// A VM no node can take fails at once with the placement message instead
// of waiting out the timeout, and is tainted rather than forgotten: the
// next apply replaces it.
func TestAccVirtualMachine_unschedulableFailsFast(t *testing.T) {
	agent := acctest.SharedAgent(t)
	name := acctest.RandomName("nofit")
	cfg := func(memory string) string { return vmConfig(agent, name, guestBody(agent, memory, "")) }
	var start time.Time // when the step starts, not when the parallel test waits its turn
	testVMs(t, agent, []resource.TestStep{
		{
			// 1Ti fits no node.
			PreConfig:   func() { start = time.Now() },
			Config:      cfg("1Ti"),
			ExpectError: errorRe(`no node can run it (ErrorUnschedulable): 0/`, ` nodes are available`),
		},
		runningStep(t, agent, name, cfg(guestMemory), func() {
			if d := time.Since(start); d > 2*time.Minute {
				t.Errorf("the unschedulable VM took %s to fail; it should fail fast", d)
			}
		}, plancheck.ExpectResourceAction(vmAddr, plancheck.ResourceActionDestroyBeforeCreate)),
	})
}

// A guest that fails before it ever runs puts the VM in CrashLoopBackOff;
// create says so instead of waiting. On real nodes the failure is
// libvirt's: the kernel is not in the image directory. (Its message is
// not asserted: the failed instance is usually deleted, and its reason
// with it, by the time the provider sees the VM's status.)
func TestAccVirtualMachine_crashLoopFailsFast(t *testing.T) {
	agent := acctest.SharedAgent(t)
	name := acctest.RandomName("crash")
	// The node has the file (placement checks the node's image list), but
	// it is no kernel: QEMU refuses to start, so every instance fails.
	body := fmt.Sprintf(`
  memory = %q
  boot {
    kernel = %q
    initrd = %q
  }
`, guestMemory, testguest.InitrdFile, testguest.InitrdFile)
	if agent.Nodes.Scripted {
		body += fmt.Sprintf("  annotations = {\n    %q = \"fail-start\"\n  }\n", acctest.ScriptAnnotation)
	}
	testVMs(t, agent, []resource.TestStep{{
		Config:      vmConfig(agent, name, body),
		ExpectError: errorRe(`it is in CrashLoopBackOff: its instance failed 1 time(s) in a row before reaching Running`),
	}})
}
