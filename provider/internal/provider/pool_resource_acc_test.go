package provider_test

import (
	"fmt"
	"slices"
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

// Acceptance tests of the virtplane_virtual_machine_pool resource.

const poolAddr = "virtplane_virtual_machine_pool.test"

// poolConfig renders a virtplane_virtual_machine_pool "test" block with
// replicas VMs booting the test guest with memory; top goes after the
// pool's name, tmpl into its template after its labels.
func poolConfig(agent *acctest.Agent, name string, replicas int, memory, top, tmpl string) string {
	return agent.ProviderConfig() + fmt.Sprintf(`
resource "virtplane_virtual_machine_pool" "test" {
  name     = %q
  replicas = %d
  %s
  virtual_machine_template {
    labels = {
      pool = %q
    }
    memory = %q
    %s
    %s
    %s
  }
}
`, name, replicas, top, name, memory, agent.Nodes.NodeSelectorHCL(), agent.Nodes.BootHCL(), tmpl)
}

// poolVMNames expects status.vm_names to be name-0 ... in order.
func poolVMNames(name string, ordinals ...int) statecheck.StateCheck {
	names := make([]knownvalue.Check, len(ordinals))
	for i, o := range ordinals {
		names[i] = knownvalue.StringExact(fmt.Sprintf("%s-%d", name, o))
	}
	return statecheck.ExpectKnownValue(poolAddr, tfjsonpath.New("status").AtMapKey("vm_names"), knownvalue.ListExact(names))
}

// poolCounts expects the status counts of a pool that has settled at n.
func poolCounts(n int64) []statecheck.StateCheck {
	var out []statecheck.StateCheck
	for _, k := range []string{"replicas", "ready_replicas", "updated_replicas"} {
		out = append(out, statecheck.ExpectKnownValue(poolAddr, tfjsonpath.New("status").AtMapKey(k), knownvalue.Int64Exact(n)))
	}
	return out
}

// poolVMsBooted checks, straight from the agent, that the pool's VMs are
// exactly name-<ordinals>, each running an instance with memory, and
// waits for their guests to boot (on real nodes), so that the next step's
// stops find guests that obey the power button.
func poolVMsBooted(t *testing.T, agent *acctest.Agent, name, memory string, ordinals ...int) resource.TestCheckFunc {
	return func(*terraform.State) error {
		list, err := agent.Client.VMs.List(t.Context(), &apiv1.ListVirtualMachinesRequest{Options: &apiv1.ListOptions{
			Namespace: "default", LabelSelector: "pool=" + name,
		}})
		if err != nil {
			return err
		}
		var got, want []string
		for _, vm := range list.GetItems() {
			if vm.GetMetadata().GetDeletionTimestamp() == nil {
				got = append(got, vm.GetMetadata().GetName())
			}
		}
		for _, o := range ordinals {
			want = append(want, fmt.Sprintf("%s-%d", name, o))
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			return fmt.Errorf("the pool's VMs are %v, want %v", got, want)
		}
		for _, vm := range want {
			if err := instanceCheck(agent, vm, func(vmi *apiv1.VirtualMachineInstance) error {
				switch {
				case vmi == nil:
					return fmt.Errorf("%s has no instance", vm)
				case vmi.GetStatus().GetPhase() != apiv1.PhaseRunning:
					return fmt.Errorf("%s's instance is %s", vm, vmi.GetStatus().GetPhase())
				case vmi.GetSpec().GetDomain().GetMemory().GetGuest() != memory:
					return fmt.Errorf("%s's instance has memory %s, want %s", vm, vmi.GetSpec().GetDomain().GetMemory().GetGuest(), memory)
				}
				return nil
			})(nil); err != nil {
				return err
			}
			if err := guestBooted(t, agent, vm, "")(nil); err != nil {
				return err
			}
		}
		return nil
	}
}

// A pool's life: create 2 VMs (each with a persistent volume of its own),
// scale to 3 and to 1 (the highest ordinals go), roll a template change
// out one VM at a time (apply waits until every VM runs the new memory),
// import, destroy (the pool's VMs and domains go too). After every step
// the framework checks that a plan is empty.
func TestAccVirtualMachinePool_lifecycle(t *testing.T) {
	agent := acctest.SharedAgent(t)
	name := acctest.RandomName("pool")
	tmpl := `termination_grace_period = 10
    disk {
      name = "data"
      persistent {
        size = "16Mi"
      }
    }`
	cfg := func(replicas int, memory, top string) string {
		return poolConfig(agent, name, replicas, memory, top, tmpl)
	}
	var uid string
	testReplicas(t, agent, []resource.TestStep{
		{
			Config: cfg(2, guestMemory, ""),
			ConfigStateChecks: append(poolCounts(2),
				poolVMNames(name, 0, 1),
				statecheck.ExpectKnownValue(poolAddr, tfjsonpath.New("id"), knownvalue.StringExact("default/"+name)),
				statecheck.ExpectKnownValue(poolAddr, tfjsonpath.New("selector"), knownvalue.MapExact(map[string]knownvalue.Check{
					"pool": knownvalue.StringExact(name),
				})),
				statecheck.ExpectKnownValue(poolAddr, tfjsonpath.New("max_unavailable"), knownvalue.StringExact("100%")),
				statecheck.ExpectKnownValue(poolAddr, tfjsonpath.New("scale_in_order"), knownvalue.StringExact("DescendingOrder")),
				statecheck.ExpectKnownValue(poolAddr, tfjsonpath.New("virtual_machine_template").AtMapKey("run_strategy"), knownvalue.StringExact("Always")),
				statecheck.ExpectKnownValue(poolAddr, tfjsonpath.New("virtual_machine_template").AtMapKey("cpu"), knownvalue.Null()),
			),
			Check: resource.ComposeTestCheckFunc(
				resource.TestCheckResourceAttrWith(poolAddr, "uid", func(v string) error { uid = v; return nil }),
				poolVMsBooted(t, agent, name, guestMemory, 0, 1),
			),
		},
		{
			Config:            cfg(3, guestMemory, ""),
			ConfigPlanChecks:  resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(poolAddr, plancheck.ResourceActionUpdate)}},
			ConfigStateChecks: append(poolCounts(3), poolVMNames(name, 0, 1, 2)),
			Check:             poolVMsBooted(t, agent, name, guestMemory, 0, 1, 2),
		},
		{
			Config:            cfg(1, guestMemory, ""),
			ConfigStateChecks: append(poolCounts(1), poolVMNames(name, 0)),
			Check:             poolVMsBooted(t, agent, name, guestMemory, 0),
		},
		{
			// A template change is rolled out: apply returns once the VM
			// runs the new memory.
			Config: cfg(1, guestMemory2, `max_unavailable = "1"`),
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectResourceAction(poolAddr, plancheck.ResourceActionUpdate),
			}},
			ConfigStateChecks: append(poolCounts(1), poolVMNames(name, 0),
				statecheck.ExpectKnownValue(poolAddr, tfjsonpath.New("max_unavailable"), knownvalue.StringExact("1"))),
			Check: resource.ComposeTestCheckFunc(
				poolVMsBooted(t, agent, name, guestMemory2, 0),
				domainMemory(agent, name+"-0", guestMemory2),
				resource.TestCheckResourceAttrWith(poolAddr, "uid", func(v string) error {
					if v != uid {
						return fmt.Errorf("uid %s, was %s: the pool was replaced", v, uid)
					}
					return nil
				}),
			),
		},
		{
			// The same memory spelled otherwise is no change.
			Config:           cfg(1, "196608Ki", `max_unavailable = "1"`),
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
		},
		{
			ResourceName:      poolAddr,
			ImportState:       true,
			ImportStateVerify: true,
		},
		{
			ResourceName:    poolAddr,
			ImportState:     true,
			ImportStateKind: resource.ImportBlockWithID,
		},
	})
}

// poolFailFast bounds how long a pool that cannot run may take to fail:
// far below the default timeout it would otherwise sit out.
const poolFailFast = time.Minute

// A pool whose VMs no node can take fails within seconds with the
// placement message, not at the timeout; fixing the template makes the
// next apply replace the tainted pool. No guest starts until then, so this
// runs on real nodes too.
func TestAccVirtualMachinePool_unschedulableFailsFast(t *testing.T) {
	agent := acctest.SharedAgent(t)
	name := acctest.RandomName("nopool")
	nowhere := `node_selector = {
      "example.com/no-such-node" = "true"
    }`
	var start time.Time
	testReplicas(t, agent, []resource.TestStep{
		{
			PreConfig: func() { start = time.Now() },
			Config: agent.ProviderConfig() + fmt.Sprintf(`
resource "virtplane_virtual_machine_pool" "test" {
  name     = %q
  replicas = 2
  virtual_machine_template {
    labels = {
      pool = %q
    }
    memory = %q
    %s
    %s
  }
}
`, name, name, guestMemory, nowhere, agent.Nodes.BootHCL()),
			// Whichever VM the controller judged first.
			ExpectError: errorRe(`cannot get its VMs running`, `VM `+name+`-`, ` cannot run: no node can run it (ErrorUnschedulable): 0/`,
				`node(s) didn't match node selector`),
		},
		{
			PreConfig: func() {
				if d := time.Since(start); d > poolFailFast {
					t.Errorf("the unschedulable pool took %s to fail; it should fail fast", d)
				}
			},
			Config: poolConfig(agent, name, 1, guestMemory, "", ""),
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectResourceAction(poolAddr, plancheck.ResourceActionDestroyBeforeCreate),
			}},
			ConfigStateChecks: append(poolCounts(1), poolVMNames(name, 0)),
			Check:             poolVMsBooted(t, agent, name, guestMemory, 0),
		},
	})
}

// A template change rolls out to every VM, one at a time with
// max_unavailable "1": apply returns only once all three run the new
// template. Fake nodes only: real ones would boot six guests for what
// the lifecycle test shows with one.
func TestAccVirtualMachinePool_rolloutWaitsForEveryVM(t *testing.T) {
	agent := acctest.SharedAgent(t)
	if !agent.Nodes.Scripted {
		t.Skip("boots six guests; the lifecycle test rolls a template out on real nodes")
	}
	name := acctest.RandomName("roll")
	top := `max_unavailable = "1"`
	testReplicas(t, agent, []resource.TestStep{
		{
			Config:            poolConfig(agent, name, 3, guestMemory, top, ""),
			ConfigStateChecks: append(poolCounts(3), poolVMNames(name, 0, 1, 2)),
			Check:             poolVMsBooted(t, agent, name, guestMemory, 0, 1, 2),
		},
		{
			Config:            poolConfig(agent, name, 3, guestMemory2, top, ""),
			ConfigStateChecks: append(poolCounts(3), poolVMNames(name, 0, 1, 2)),
			Check:             poolVMsBooted(t, agent, name, guestMemory2, 0, 1, 2),
		},
	})
}

// A pool whose VMs' guests fail before they run (the kernel is no kernel;
// on fake nodes, scripted) fails with the VM's CrashLoopBackOff instead of
// waiting.
func TestAccVirtualMachinePool_crashLoopFailsFast(t *testing.T) {
	agent := acctest.SharedAgent(t)
	name := acctest.RandomName("crashpool")
	tmpl := fmt.Sprintf(`boot {
      kernel = %q
      initrd = %q
    }`, testguest.InitrdFile, testguest.InitrdFile)
	if agent.Nodes.Scripted {
		tmpl += fmt.Sprintf("\n    annotations = {\n      %q = \"fail-start\"\n    }", acctest.ScriptAnnotation)
	}
	// Set when the step starts: testReplicas runs in parallel, and the
	// time this test waits for its turn is not the apply's.
	var start time.Time
	testReplicas(t, agent, []resource.TestStep{{
		PreConfig: func() { start = time.Now() },
		Config: agent.ProviderConfig() + fmt.Sprintf(`
resource "virtplane_virtual_machine_pool" "test" {
  name = %q
  virtual_machine_template {
    labels = {
      pool = %q
    }
    memory = %q
    %s
    %s
  }
}
`, name, name, guestMemory, agent.Nodes.NodeSelectorHCL(), tmpl),
		ExpectError: errorRe(`cannot get its VMs running`, `VM `+name+`-0 cannot run: it is in CrashLoopBackOff`),
	}})
	if d := time.Since(start); d > 2*poolFailFast {
		t.Errorf("the crash-looping pool took %s to fail and be destroyed; it should fail fast", d)
	}
}
