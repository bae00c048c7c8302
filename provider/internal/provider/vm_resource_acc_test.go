package provider_test

import (
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
	"github.com/virtplane/terraform-provider-virtplane/internal/testguest"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
	"github.com/virtplane/terraform-provider-virtplane/provider/internal/acctest"
)

// Acceptance tests of the virtplane_virtual_machine resource's life: each run
// strategy, restarts on change and update_policy.

// The whole life of an Always VM booting the test guest: create waits for
// Running (and the guest boots, named by its kernel command line); import
// finds every attribute; a memory change restarts it (a new instance,
// whose domain has the new memory); another spelling of the same memory
// is no change; Halted stops it (no domain left) and Always starts it
// again; destroy removes it and its domain. After every step the
// framework checks that a plan is empty.
func TestAccVirtualMachine_lifecycle(t *testing.T) {
	agent := acctest.SharedAgent(t)
	name := acctest.RandomName("life")
	cfg := func(memory, extra string) string {
		return vmConfig(agent, name, guestBody(agent, memory, "labels = {\n    app = \"web\"\n  }\n"+extra, testguest.Hostname(name)))
	}
	var uid string
	nodeNames := make([]knownvalue.Check, 0, len(agent.Nodes.Names))
	for _, n := range agent.Nodes.Names {
		nodeNames = append(nodeNames, knownvalue.StringExact(n))
	}
	running := []statecheck.StateCheck{
		expectStatus(apiv1.PrintableRunning),
		statecheck.ExpectKnownValue(vmAddr, tfjsonpath.New("status").AtMapKey("ready"), knownvalue.Bool(true)),
		statecheck.ExpectKnownValue(vmAddr, tfjsonpath.New("status").AtMapKey("phase"), knownvalue.StringExact(apiv1.PhaseRunning)),
		statecheck.ExpectKnownValue(vmAddr, tfjsonpath.New("restart_required"), knownvalue.Bool(false)),
	}
	if len(nodeNames) > 0 {
		running = append(running, statecheck.ExpectKnownValue(vmAddr, tfjsonpath.New("status").AtMapKey("node"), knownvalue.StringFunc(func(s string) error {
			for _, n := range agent.Nodes.Names {
				if s == n {
					return nil
				}
			}
			return fmt.Errorf("node %q is not one of the harness's %v", s, agent.Nodes.Names)
		})))
	}
	testVMs(t, agent, []resource.TestStep{
		{
			Config: cfg(guestMemory, ""),
			ConfigStateChecks: append([]statecheck.StateCheck{
				statecheck.ExpectKnownValue(vmAddr, tfjsonpath.New("id"), knownvalue.StringExact("default/"+name)),
				statecheck.ExpectKnownValue(vmAddr, tfjsonpath.New("namespace"), knownvalue.StringExact("default")),
				statecheck.ExpectKnownValue(vmAddr, tfjsonpath.New("run_strategy"), knownvalue.StringExact("Always")),
				statecheck.ExpectKnownValue(vmAddr, tfjsonpath.New("update_policy"), knownvalue.StringExact("restart")),
				statecheck.ExpectKnownValue(vmAddr, tfjsonpath.New("termination_grace_period"), knownvalue.Int64Exact(30)),
				statecheck.ExpectKnownValue(vmAddr, tfjsonpath.New("cpu"), knownvalue.Null()),
				statecheck.ExpectKnownValue(vmAddr, tfjsonpath.New("boot").AtMapKey("kernel"), knownvalue.StringExact(agent.Nodes.Kernel)),
				statecheck.ExpectKnownValue(vmAddr, tfjsonpath.New("uid"), knownvalue.NotNull()),
			}, running...),
			Check: resource.ComposeTestCheckFunc(
				instanceUID(agent, name, &uid),
				guestBooted(t, agent, name, name),
				domainMemory(agent, name, guestMemory),
			),
		},
		{
			// terraform import, and no attribute may differ.
			ResourceName:      vmAddr,
			ImportState:       true,
			ImportStateVerify: true,
		},
		{
			// A bare name means the default namespace.
			ResourceName:      vmAddr,
			ImportState:       true,
			ImportStateId:     name,
			ImportStateVerify: true,
		},
		{
			// An import block.
			ResourceName:    vmAddr,
			ImportState:     true,
			ImportStateKind: resource.ImportBlockWithID,
		},
		{
			// Memory only takes effect at a restart: apply restarts.
			Config: cfg(guestMemory2, ""),
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectResourceAction(vmAddr, plancheck.ResourceActionUpdate),
			}},
			ConfigStateChecks: append([]statecheck.StateCheck{
				statecheck.ExpectKnownValue(vmAddr, tfjsonpath.New("memory"), knownvalue.StringExact(guestMemory2)),
			}, running...),
			Check: resource.ComposeTestCheckFunc(
				restartedWith(agent, name, &uid, guestMemory2),
				domainMemory(agent, name, guestMemory2),
				guestBooted(t, agent, name, name),
			),
		},
		{
			// The same amount spelled differently is no change at all.
			Config: cfg("196608Ki", ""),
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectEmptyPlan(),
			}},
			Check: sameInstance(agent, name, &uid),
		},
		{
			Config: cfg(guestMemory2, `run_strategy = "Halted"`),
			ConfigStateChecks: []statecheck.StateCheck{
				expectStatus(apiv1.PrintableStopped),
				statecheck.ExpectKnownValue(vmAddr, tfjsonpath.New("status").AtMapKey("phase"), knownvalue.Null()),
				statecheck.ExpectKnownValue(vmAddr, tfjsonpath.New("status").AtMapKey("ready"), knownvalue.Bool(false)),
			},
			Check: resource.ComposeTestCheckFunc(noInstance(agent, name), noDomain(t, agent, name)),
		},
		{
			Config:            cfg(guestMemory2, `run_strategy = "Always"`),
			ConfigStateChecks: running,
			Check: resource.ComposeTestCheckFunc(
				restartedWith(agent, name, &uid, guestMemory2),
				guestBooted(t, agent, name, name),
			),
		},
	})
}

// onceNoRestartWindow is how long a Once VM whose guest powered off is
// watched for a restart: longer than Always's restart of a powered-off
// guest would take to show a new instance.
const onceNoRestartWindow = 5 * time.Second

// A Once VM runs its guest until the guest powers off by itself, and is
// not started again.
func TestAccVirtualMachine_once(t *testing.T) {
	agent := acctest.SharedAgent(t)
	name := acctest.RandomName("once")
	extra := `run_strategy = "Once"`
	if agent.Nodes.Scripted {
		// Fake guests ignore the kernel command line.
		extra += fmt.Sprintf("\n  annotations = {\n    %q = \"exit:3s\"\n  }", acctest.ScriptAnnotation)
	}
	cfg := vmConfig(agent, name, guestBody(agent, guestMemory, extra, testguest.PoweroffAfter(3*time.Second)))
	var uid string
	testVMs(t, agent, []resource.TestStep{
		{
			Config: cfg,
			Check: resource.ComposeTestCheckFunc(
				instanceUID(agent, name, &uid),
				resource.TestMatchResourceAttr(vmAddr, "status.phase", regexp.MustCompile(`^(Running|Succeeded)$`)),
				// The guest powers off; the instance stays Succeeded
				// and no new one is started.
				func(*terraform.State) error {
					testutil.EventuallyNoError(t, acctest.GuestBootTimeout+time.Minute, "the guest to power off", func() error {
						vm, vmi, err := apiVM(t.Context(), agent, "default", name)
						if err != nil {
							return err
						}
						if vmi.GetStatus().GetPhase() == apiv1.PhaseSucceeded && vm.GetStatus().GetPrintableStatus() == apiv1.PrintableStopped {
							return nil
						}
						return fmt.Errorf("VM %s, instance in phase %s", vm.GetStatus().GetPrintableStatus(), vmi.GetStatus().GetPhase())
					})
					// What is tested is that nothing happens: an Always VM
					// would have a new instance within this window.
					testutil.ConsistentlyNoError(t, onceNoRestartWindow, "the powered-off Once VM keeping its instance", func() error {
						return sameInstance(agent, name, &uid)(nil)
					})
					return nil
				},
				noDomain(t, agent, name),
			),
		},
		{
			// Refresh sees the guest powered off; the plan stays empty.
			Config: cfg,
			ConfigStateChecks: []statecheck.StateCheck{
				expectStatus(apiv1.PrintableStopped),
				statecheck.ExpectKnownValue(vmAddr, tfjsonpath.New("status").AtMapKey("phase"), knownvalue.StringExact(apiv1.PhaseSucceeded)),
				statecheck.ExpectKnownValue(vmAddr, tfjsonpath.New("run_strategy"), knownvalue.StringExact("Once")),
			},
			Check: sameInstance(agent, name, &uid),
		},
	})
}

// update_policy = "none" leaves the running guest alone and reports
// restart_required; switching to "restart" then restarts it.
func TestAccVirtualMachine_updatePolicy(t *testing.T) {
	agent := acctest.SharedAgent(t)
	name := acctest.RandomName("policy")
	cfg := func(memory, policy string) string {
		return vmConfig(agent, name, guestBody(agent, memory, fmt.Sprintf("update_policy = %q", policy)))
	}
	var uid string
	testVMs(t, agent, []resource.TestStep{
		{
			Config: cfg(guestMemory, "none"),
			Check:  resource.ComposeTestCheckFunc(instanceUID(agent, name, &uid), guestBooted(t, agent, name, "")),
		},
		{
			Config: cfg(guestMemory2, "none"),
			ConfigStateChecks: []statecheck.StateCheck{
				expectStatus(apiv1.PrintableRunning),
				statecheck.ExpectKnownValue(vmAddr, tfjsonpath.New("restart_required"), knownvalue.Bool(true)),
			},
			Check: resource.ComposeTestCheckFunc(sameInstance(agent, name, &uid), domainMemory(agent, name, guestMemory)),
		},
		{
			Config: cfg(guestMemory2, "restart"),
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectResourceAction(vmAddr, plancheck.ResourceActionUpdate),
				plancheck.ExpectKnownValue(vmAddr, tfjsonpath.New("restart_required"), knownvalue.Bool(false)),
			}},
			ConfigStateChecks: []statecheck.StateCheck{
				expectStatus(apiv1.PrintableRunning),
				statecheck.ExpectKnownValue(vmAddr, tfjsonpath.New("restart_required"), knownvalue.Bool(false)),
			},
			Check: resource.ComposeTestCheckFunc(
				restartedWith(agent, name, &uid, guestMemory2),
				domainMemory(agent, name, guestMemory2),
				guestBooted(t, agent, name, ""),
			),
		},
	})
}

// Manual VMs are created without being started, and apply does not wait;
// RerunOnFailure ones run.
func TestAccVirtualMachine_manualAndRerunOnFailure(t *testing.T) {
	agent := acctest.SharedAgent(t)
	manual, rerun := acctest.RandomName("manual"), acctest.RandomName("rerun")
	cfg := agent.ProviderConfig() + fmt.Sprintf(`
resource "virtplane_virtual_machine" "manual" {
  name         = %q
  run_strategy = "Manual"
  %[3]s
  %[4]s
}
resource "virtplane_virtual_machine" "rerun" {
  name         = %[2]q
  run_strategy = "RerunOnFailure"
  %[3]s
  %[4]s
}
`, manual, rerun, agent.Nodes.NodeSelectorHCL(), guestBody(agent, guestMemory, ""))
	testVMs(t, agent, []resource.TestStep{{
		Config: cfg,
		ConfigStateChecks: []statecheck.StateCheck{
			statecheck.ExpectKnownValue("virtplane_virtual_machine.rerun", tfjsonpath.New("status").AtMapKey("printable_status"), knownvalue.StringExact("Running")),
			statecheck.ExpectKnownValue("virtplane_virtual_machine.manual", tfjsonpath.New("status").AtMapKey("ready"), knownvalue.Bool(false)),
		},
		Check: resource.ComposeTestCheckFunc(noInstance(agent, manual), noDomain(t, agent, manual), guestBooted(t, agent, rerun, "")),
	}})
}

// eviction_strategy reads back as configured, unset included (null, the
// cluster's default), and a change reaches the running instance without a
// restart. After every step the framework checks that a plan is empty.
func TestAccVirtualMachine_evictionStrategy(t *testing.T) {
	agent := acctest.SharedAgent(t)
	name := acctest.RandomName("evict")
	cfg := func(extra string) string { return vmConfig(agent, name, guestBody(agent, guestMemory, extra)) }
	strategy := func(want knownvalue.Check) statecheck.StateCheck {
		return statecheck.ExpectKnownValue(vmAddr, tfjsonpath.New("eviction_strategy"), want)
	}
	noRestart := statecheck.ExpectKnownValue(vmAddr, tfjsonpath.New("restart_required"), knownvalue.Bool(false))
	var uid string
	testVMs(t, agent, []resource.TestStep{
		{
			Config:            cfg(`eviction_strategy = "LiveMigrate"`),
			ConfigStateChecks: []statecheck.StateCheck{strategy(knownvalue.StringExact("LiveMigrate")), expectStatus(apiv1.PrintableRunning)},
			Check: resource.ComposeTestCheckFunc(
				instanceUID(agent, name, &uid),
				guestBooted(t, agent, name, ""),
				evictionStrategyIs(t, agent, name, "LiveMigrate"),
			),
		},
		{
			ResourceName:      vmAddr,
			ImportState:       true,
			ImportStateVerify: true,
		},
		{
			Config: cfg(`eviction_strategy = "None"`),
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectResourceAction(vmAddr, plancheck.ResourceActionUpdate),
			}},
			ConfigStateChecks: []statecheck.StateCheck{strategy(knownvalue.StringExact("None")), noRestart},
			Check:             resource.ComposeTestCheckFunc(sameInstance(agent, name, &uid), evictionStrategyIs(t, agent, name, "None")),
		},
		{
			// Unset: stored as "", read back as null.
			Config:            cfg(""),
			ConfigStateChecks: []statecheck.StateCheck{strategy(knownvalue.Null()), noRestart},
			Check:             resource.ComposeTestCheckFunc(sameInstance(agent, name, &uid), evictionStrategyIs(t, agent, name, "")),
		},
		{
			ResourceName:      vmAddr,
			ImportState:       true,
			ImportStateVerify: true,
		},
	})
}

// evictionStrategyIs checks that VM name's template has the eviction
// strategy want ("" for unset) and waits for its running instance to get
// it too: the server passes a change on without a restart.
func evictionStrategyIs(t *testing.T, agent *acctest.Agent, name, want string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		testutil.EventuallyNoError(t, apiChangeTimeout, fmt.Sprintf("%s's eviction strategy to be %q", name, want), func() error {
			vm, vmi, err := apiVM(t.Context(), agent, "default", name)
			switch {
			case err != nil:
				return err
			case vm.GetSpec().GetTemplate().GetSpec().GetEvictionStrategy() != want:
				return fmt.Errorf("the VM's template has %q", vm.GetSpec().GetTemplate().GetSpec().GetEvictionStrategy())
			case vmi == nil:
				return fmt.Errorf("%s has no instance", name)
			case vmi.GetSpec().GetEvictionStrategy() != want:
				return fmt.Errorf("instance %s has %q", vmi.GetMetadata().GetUid(), vmi.GetSpec().GetEvictionStrategy())
			}
			return nil
		})
		return nil
	}
}
