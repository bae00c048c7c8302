package provider_test

import (
	"fmt"
	"regexp"
	"strings"
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

// Acceptance tests of the virtplane_virtual_machine_replica_set resource.

const rsAddr = "virtplane_virtual_machine_replica_set.test"

// replicaSetConfig renders a virtplane_virtual_machine_replica_set "test"
// block with replicas instances booting the test guest; tmpl goes into its
// template after its labels.
func replicaSetConfig(agent *acctest.Agent, name string, replicas int, tmpl string) string {
	return agent.ProviderConfig() + fmt.Sprintf(`
resource "virtplane_virtual_machine_replica_set" "test" {
  name     = %q
  replicas = %d
  template {
    labels = {
      rs = %q
    }
    memory = %q
    %s
  }
}
`, name, replicas, name, guestMemory, tmpl)
}

// guestTemplate is what a template needs to boot the test guest on the
// harness's nodes.
func guestTemplate(agent *acctest.Agent) string {
	return agent.Nodes.NodeSelectorHCL() + "\n    " + agent.Nodes.BootHCL()
}

// rsCounts expects the status of a replica set settled at n instances,
// named <name>-<5 characters>.
func rsCounts(name string, n int) []statecheck.StateCheck {
	names := make([]knownvalue.Check, n)
	for i := range names {
		names[i] = knownvalue.StringRegexp(regexp.MustCompile(`^` + regexp.QuoteMeta(name) + `-[a-z0-9]{5}$`))
	}
	return []statecheck.StateCheck{
		statecheck.ExpectKnownValue(rsAddr, tfjsonpath.New("status").AtMapKey("replicas"), knownvalue.Int64Exact(int64(n))),
		statecheck.ExpectKnownValue(rsAddr, tfjsonpath.New("status").AtMapKey("ready_replicas"), knownvalue.Int64Exact(int64(n))),
		statecheck.ExpectKnownValue(rsAddr, tfjsonpath.New("status").AtMapKey("instance_names"), knownvalue.ListExact(names)),
	}
}

// rsInstancesBooted checks, straight from the agent, that the replica set
// has n running instances, and waits for their guests to boot (on real
// nodes), so that the next step's stops find guests that obey the power
// button.
func rsInstancesBooted(t *testing.T, agent *acctest.Agent, name string, n int) resource.TestCheckFunc {
	return func(*terraform.State) error {
		list, err := agent.Client.VMIs.List(t.Context(), &apiv1.ListVirtualMachineInstancesRequest{Options: &apiv1.ListOptions{
			Namespace: "default", LabelSelector: "rs=" + name,
		}})
		if err != nil {
			return err
		}
		var running []*apiv1.VirtualMachineInstance
		for _, vmi := range list.GetItems() {
			if vmi.GetMetadata().GetDeletionTimestamp() == nil && vmi.GetStatus().GetPhase() == apiv1.PhaseRunning {
				running = append(running, vmi)
			}
		}
		if len(running) != n {
			return fmt.Errorf("replica set %s has %d running instances of %d, want %d", name, len(running), len(list.GetItems()), n)
		}
		for _, vmi := range running {
			if !strings.HasPrefix(vmi.GetMetadata().GetName(), name+"-") {
				return fmt.Errorf("instance %s is not named after %s", vmi.GetMetadata().GetName(), name)
			}
			agent.Nodes.WaitBooted(t, vmi.GetMetadata().GetUid())
		}
		return nil
	}
}

// A replica set's life: create 2 instances, scale to 3, import, destroy
// (its instances and domains go too). After every step the framework
// checks that a plan is empty.
func TestAccVirtualMachineReplicaSet_lifecycle(t *testing.T) {
	agent := acctest.SharedAgent(t)
	name := acctest.RandomName("rs")
	cfg := func(replicas int) string {
		return replicaSetConfig(agent, name, replicas, "termination_grace_period = 10\n    "+guestTemplate(agent))
	}
	testReplicas(t, agent, []resource.TestStep{
		{
			Config: cfg(2),
			ConfigStateChecks: append(rsCounts(name, 2),
				statecheck.ExpectKnownValue(rsAddr, tfjsonpath.New("id"), knownvalue.StringExact("default/"+name)),
				statecheck.ExpectKnownValue(rsAddr, tfjsonpath.New("selector"), knownvalue.MapExact(map[string]knownvalue.Check{
					"rs": knownvalue.StringExact(name),
				})),
				statecheck.ExpectKnownValue(rsAddr, tfjsonpath.New("paused"), knownvalue.Bool(false)),
				statecheck.ExpectKnownValue(rsAddr, tfjsonpath.New("wait_for_ready"), knownvalue.Bool(true)),
				statecheck.ExpectKnownValue(rsAddr, tfjsonpath.New("template").AtMapKey("cpu"), knownvalue.Null()),
			),
			Check: rsInstancesBooted(t, agent, name, 2),
		},
		{
			Config:            cfg(3),
			ConfigPlanChecks:  resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(rsAddr, plancheck.ResourceActionUpdate)}},
			ConfigStateChecks: rsCounts(name, 3),
			Check:             rsInstancesBooted(t, agent, name, 3),
		},
		{
			ResourceName:      rsAddr,
			ImportState:       true,
			ImportStateVerify: true,
		},
		{
			ResourceName:    rsAddr,
			ImportState:     true,
			ImportStateKind: resource.ImportBlockWithID,
		},
	})
}

// A replica set whose instances no node can take fails within seconds
// with the placement message, not at the timeout. No guest starts.
func TestAccVirtualMachineReplicaSet_unschedulableFailsFast(t *testing.T) {
	agent := acctest.SharedAgent(t)
	name := acctest.RandomName("nors")
	// Set when the step starts: testReplicas runs in parallel, and the
	// time this test waits for its turn is not the apply's.
	var start time.Time
	testReplicas(t, agent, []resource.TestStep{{
		PreConfig: func() { start = time.Now() },
		Config: replicaSetConfig(agent, name, 2, `node_selector = {
      "example.com/no-such-node" = "true"
    }
    `+agent.Nodes.BootHCL()),
		ExpectError: errorRe(`cannot get its instances running`, `no node can run instance `+name+`-`, `(Unschedulable): 0/`,
			`node(s) didn't match node selector`),
	}})
	if d := time.Since(start); d > poolFailFast {
		t.Errorf("the unschedulable replica set took %s to fail and be destroyed; it should fail fast", d)
	}
}

// On fake nodes, an instance whose guest fails to start fails the apply
// with the instance's reason, although the replica set would replace it
// forever.
func TestAccVirtualMachineReplicaSet_failingInstanceFailsFast(t *testing.T) {
	agent := acctest.SharedAgent(t)
	if !agent.Nodes.Scripted {
		t.Skip("needs scripted guests (VIRTPLANE_ACC_FAKE_NODES=1)")
	}
	name := acctest.RandomName("failrs")
	var start time.Time // when the step starts, not when the parallel test waits its turn
	testReplicas(t, agent, []resource.TestStep{{
		PreConfig: func() { start = time.Now() },
		Config: replicaSetConfig(agent, name, 1, fmt.Sprintf(`annotations = {
      %q = "fail-start"
    }
    %s`, acctest.ScriptAnnotation, guestTemplate(agent))),
		ExpectError: errorRe(`cannot get its instances running`, `instance `+name+`-`, `failed (`),
	}})
	if d := time.Since(start); d > poolFailFast {
		t.Errorf("the failing replica set took %s to fail and be destroyed; it should fail fast", d)
	}
}
