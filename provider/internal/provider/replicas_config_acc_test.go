package provider_test

import (
	"fmt"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/virtplane/terraform-provider-virtplane/provider/internal/acctest"
)

// Acceptance tests of pool and replica set configurations that need no
// guest: what plan refuses, and paused objects read back by the data
// sources.

// Plan refuses what the API would, naming the attribute: a MAC address
// in a template, a persistent disk in a replica set, a selector the
// template's labels do not match, no labels to select by, a bad
// max_unavailable, and a missing template.
func TestAccPoolAndReplicaSet_invalidConfigs(t *testing.T) {
	agent := acctest.SharedAgent(t)
	pool := func(top, tmpl string) string {
		return agent.ProviderConfig() + fmt.Sprintf(`
resource "virtplane_virtual_machine_pool" "test" {
  name = "invalid"
  %s
  virtual_machine_template {
    memory = "160Mi"
    %s
  }
}
`, top, tmpl)
	}
	labels := "labels = {\n      app = \"db\"\n    }\n"
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config:      pool("", labels+"interface {\n      name = \"default\"\n      mac_address = \"02:00:00:00:00:01\"\n    }"),
				PlanOnly:    true,
				ExpectError: errorRe(`MAC address in a template`, `virtual_machine_template.interface[0].mac_address`, `every replica`),
			},
			{
				Config:      pool(`selector = { app = "web" }`, labels),
				PlanOnly:    true,
				ExpectError: errorRe(`Selector does not match the template`, `selector app=web is not among virtual_machine_template.labels app=db`),
			},
			{
				Config:      pool("", ""),
				PlanOnly:    true,
				ExpectError: errorRe(`Missing labels`, `virtual_machine_template.labels needs at least one label`),
			},
			{
				Config:      pool(`max_unavailable = "0"`, labels),
				PlanOnly:    true,
				ExpectError: errorRe(`Invalid max_unavailable`, `must be a whole number of at least 1`),
			},
			{
				Config:      pool("", labels+"disk {\n      name = \"d\"\n      image = \"a.qcow2\"\n      persistent {\n        size = \"1Gi\"\n      }\n    }"),
				PlanOnly:    true,
				ExpectError: errorRe(`Disk needs exactly one source`, `virtual_machine_template.disk[0] must set exactly one of image, persistent or cloud_init`),
			},
			{
				Config: agent.ProviderConfig() + `
resource "virtplane_virtual_machine_pool" "test" {
  name = "invalid"
}
`,
				PlanOnly:    true,
				ExpectError: errorRe(`Invalid Block`, `Block virtual_machine_template must have a configuration value`),
			},
			{
				Config: agent.ProviderConfig() + `
resource "virtplane_virtual_machine_replica_set" "test" {
  name = "invalid"
  template {
    labels = {
      app = "web"
    }
    memory = "160Mi"
    disk {
      name = "data"
      persistent {
        size = "1Gi"
      }
    }
  }
}
`,
				PlanOnly:    true,
				ExpectError: errorRe(`Persistent disk in a replica set`, `Use virtplane_virtual_machine_pool`),
			},
		},
	})
}

// A paused pool and replica set are created without making anything (the
// controllers stand still; apply waits only for them to have seen the
// objects), every setting reads back without a diff, and the data sources
// read them with the agent's defaults.
func TestAccPoolAndReplicaSet_pausedAndDataSources(t *testing.T) {
	agent := acctest.SharedAgent(t)
	name := acctest.RandomName("paused")
	cfg := agent.ProviderConfig() + fmt.Sprintf(`
resource "virtplane_virtual_machine_pool" "test" {
  name           = %[1]q
  replicas       = 2
  paused         = true
  scale_in_order = "Oldest"
  virtual_machine_template {
    labels = {
      pool = %[1]q
    }
    annotations = {
      "example.com/owner" = "team-a"
    }
    run_strategy        = "RerunOnFailure"
    node_failure_policy = "RestartElsewhere"
    memory              = "1024Mi"
    cpu {
      cores = 2
    }
    disk {
      name  = "root"
      image = "root.qcow2"
    }
    disk {
      name = "data"
      persistent {
        size = "1Gi"
      }
    }
    interface {
      name = "default"
      port_forward {
        host_port  = 2222
        guest_port = 22
      }
    }
  }
}

resource "virtplane_virtual_machine_replica_set" "test" {
  name     = %[1]q
  replicas = 3
  paused   = true
  selector = {
    rs = %[1]q
  }
  template {
    labels = {
      rs   = %[1]q
      tier = "web"
    }
    memory = "0.5Gi"
    disk {
      name = "seed"
      cloud_init {
        user_data = "#cloud-config\n"
      }
    }
  }
}

data "virtplane_virtual_machine_pool" "test" {
  name = virtplane_virtual_machine_pool.test.name
}

data "virtplane_virtual_machine_replica_set" "test" {
  name = virtplane_virtual_machine_replica_set.test.name
}
`, name)
	const dp, drs = "data.virtplane_virtual_machine_pool.test", "data.virtplane_virtual_machine_replica_set.test"
	tmpl := tfjsonpath.New("virtual_machine_template")
	testReplicas(t, agent, []resource.TestStep{
		{
			Config: cfg,
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(poolAddr, tfjsonpath.New("status").AtMapKey("replicas"), knownvalue.Int64Exact(0)),
				statecheck.ExpectKnownValue(poolAddr, tfjsonpath.New("status").AtMapKey("vm_names"), knownvalue.ListExact(nil)),
				statecheck.ExpectKnownValue(rsAddr, tfjsonpath.New("status").AtMapKey("instance_names"), knownvalue.ListExact(nil)),
				statecheck.ExpectKnownValue(dp, tfjsonpath.New("id"), knownvalue.StringExact("default/"+name)),
				statecheck.ExpectKnownValue(dp, tfjsonpath.New("replicas"), knownvalue.Int64Exact(2)),
				statecheck.ExpectKnownValue(dp, tfjsonpath.New("paused"), knownvalue.Bool(true)),
				statecheck.ExpectKnownValue(dp, tfjsonpath.New("max_unavailable"), knownvalue.StringExact("100%")),
				statecheck.ExpectKnownValue(dp, tfjsonpath.New("scale_in_order"), knownvalue.StringExact("Oldest")),
				statecheck.ExpectKnownValue(dp, tfjsonpath.New("selector"), knownvalue.MapExact(map[string]knownvalue.Check{"pool": knownvalue.StringExact(name)})),
				statecheck.ExpectKnownValue(dp, tmpl.AtMapKey("memory"), knownvalue.StringExact("1Gi")),
				statecheck.ExpectKnownValue(dp, tmpl.AtMapKey("run_strategy"), knownvalue.StringExact("RerunOnFailure")),
				statecheck.ExpectKnownValue(dp, tmpl.AtMapKey("cpu").AtMapKey("cores"), knownvalue.Int64Exact(2)),
				statecheck.ExpectKnownValue(dp, tmpl.AtMapKey("disk").AtSliceIndex(1).AtMapKey("persistent").AtMapKey("size"), knownvalue.StringExact("1Gi")),
				statecheck.ExpectKnownValue(dp, tmpl.AtMapKey("interface").AtSliceIndex(0).AtMapKey("mac_address"), knownvalue.Null()),
				statecheck.ExpectKnownValue(dp, tmpl.AtMapKey("node_selector"), knownvalue.MapExact(map[string]knownvalue.Check{})),
				statecheck.ExpectKnownValue(dp, tfjsonpath.New("status").AtMapKey("replicas"), knownvalue.Int64Exact(0)),
				statecheck.ExpectKnownValue(dp, tfjsonpath.New("status").AtMapKey("conditions").AtSliceIndex(0).AtMapKey("type"), knownvalue.StringExact("ReplicaPaused")),
				statecheck.ExpectKnownValue(drs, tfjsonpath.New("replicas"), knownvalue.Int64Exact(3)),
				statecheck.ExpectKnownValue(drs, tfjsonpath.New("template").AtMapKey("memory"), knownvalue.StringExact("512Mi")),
				statecheck.ExpectKnownValue(drs, tfjsonpath.New("template").AtMapKey("labels").AtMapKey("tier"), knownvalue.StringExact("web")),
				statecheck.ExpectKnownValue(drs, tfjsonpath.New("template").AtMapKey("disk").AtSliceIndex(0).AtMapKey("bus"), knownvalue.StringExact("sata")),
				statecheck.ExpectKnownValue(drs, tfjsonpath.New("status").AtMapKey("instance_names"), knownvalue.ListExact(nil)),
			},
		},
		// Import reads memory in the agent's spelling; the configuration's
		// is the same amount, which plans no change (the next step).
		{
			ResourceName:            poolAddr,
			ImportState:             true,
			ImportStateVerify:       true,
			ImportStateVerifyIgnore: []string{"virtual_machine_template.memory"},
		},
		{
			ResourceName:            rsAddr,
			ImportState:             true,
			ImportStateVerify:       true,
			ImportStateVerifyIgnore: []string{"template.memory"},
		},
		{
			ResourceName:    poolAddr,
			ImportState:     true,
			ImportStateKind: resource.ImportBlockWithID,
		},
		{
			ResourceName:    rsAddr,
			ImportState:     true,
			ImportStateKind: resource.ImportBlockWithID,
		},
	})
}
