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

// The single-VM data source returns what the resource has; the list data
// source filters by namespace, labels and printable status. web runs the
// test guest with one interface, whose status the data sources show; db,
// Halted, carries the disks and interfaces of every kind, which the node
// agent cannot all provide yet.
func TestAccVirtualMachineDataSources(t *testing.T) {
	agent := acctest.SharedAgent(t)
	run := acctest.RandomName("ds")
	cfg := agent.ProviderConfig() + fmt.Sprintf(`
resource "virtplane_virtual_machine" "web" {
  name   = "%[1]s-web"
  labels = {
    run  = %[1]q
    tier = "web"
  }
  %[2]s
  cpu {
    cores = 2
  }
  interface {
    name = "default"
  }
  %[3]s
}

resource "virtplane_virtual_machine" "db" {
  name         = "%[1]s-db"
  memory       = "128Mi"
  run_strategy = "Halted"
  labels = {
    run  = %[1]q
    tier = "db"
  }
  %[2]s
  disk {
    name  = "root"
    image = "tiny.qcow2"
  }
  disk {
    name = "seed"
    cloud_init {
      user_data = "#cloud-config\n"
    }
  }
  interface {
    name = "default"
    port_forward {
      host_port  = 15432
      guest_port = 5432
    }
  }
  interface {
    name = "lan"
    bridge {
      name = "br0"
      vlan = 7
    }
  }
}

data "virtplane_virtual_machine" "web" {
  name = virtplane_virtual_machine.web.name
}

data "virtplane_virtual_machine" "db" {
  name = virtplane_virtual_machine.db.name
}

data "virtplane_virtual_machines" "run" {
  label_selector = "run=%[1]s"
  depends_on     = [virtplane_virtual_machine.web, virtplane_virtual_machine.db]
}

data "virtplane_virtual_machines" "running" {
  namespace        = "default"
  label_selector   = "run=%[1]s"
  printable_status = "Running"
  depends_on       = [virtplane_virtual_machine.web, virtplane_virtual_machine.db]
}

data "virtplane_virtual_machines" "db" {
  label_selector = "run=%[1]s,tier in (db)"
  depends_on     = [virtplane_virtual_machine.web, virtplane_virtual_machine.db]
}
`, run, agent.Nodes.NodeSelectorHCL(), guestBody(agent, guestMemory, ""))
	ds, dbDS := "data.virtplane_virtual_machine.web", "data.virtplane_virtual_machine.db"
	testVMs(t, agent, []resource.TestStep{{
		Config: cfg,
		Check: resource.ComposeAggregateTestCheckFunc(
			// Everything the resource knows, the data source says.
			resource.TestCheckResourceAttrPair(ds, "id", "virtplane_virtual_machine.web", "id"),
			resource.TestCheckResourceAttrPair(ds, "uid", "virtplane_virtual_machine.web", "uid"),
			resource.TestCheckResourceAttrPair(ds, "boot.cmdline", "virtplane_virtual_machine.web", "boot.cmdline"),
			resource.TestCheckResourceAttrPair(ds, "status.node", "virtplane_virtual_machine.web", "status.node"),
			resource.TestCheckResourceAttrPair(dbDS, "disk.1.cloud_init.user_data", "virtplane_virtual_machine.db", "disk.1.cloud_init.user_data"),
			resource.TestCheckResourceAttrPair(dbDS, "interface.1.mac_address", "virtplane_virtual_machine.db", "interface.1.mac_address"),
			// The running instance's interface, as the node reports it.
			resource.TestCheckResourceAttrPair(ds, "status.interfaces.0.mac_address", "virtplane_virtual_machine.web", "interface.0.mac_address"),
			guestBooted(t, agent, run+"-web", ""),
		),
		ConfigStateChecks: []statecheck.StateCheck{
			statecheck.ExpectKnownValue(ds, tfjsonpath.New("namespace"), knownvalue.StringExact("default")),
			statecheck.ExpectKnownValue(ds, tfjsonpath.New("run_strategy"), knownvalue.StringExact("Always")),
			statecheck.ExpectKnownValue(ds, tfjsonpath.New("memory"), knownvalue.StringExact(guestMemory)),
			statecheck.ExpectKnownValue(ds, tfjsonpath.New("cpu"), knownvalue.ObjectExact(map[string]knownvalue.Check{
				"cores": knownvalue.Int64Exact(2), "sockets": knownvalue.Int64Exact(1), "threads": knownvalue.Int64Exact(1),
			})),
			statecheck.ExpectKnownValue(ds, tfjsonpath.New("boot").AtMapKey("kernel"), knownvalue.StringExact(agent.Nodes.Kernel)),
			statecheck.ExpectKnownValue(ds, tfjsonpath.New("disk"), knownvalue.ListExact([]knownvalue.Check{})),
			statecheck.ExpectKnownValue(dbDS, tfjsonpath.New("disk").AtSliceIndex(0), knownvalue.ObjectExact(map[string]knownvalue.Check{
				"name": knownvalue.StringExact("root"), "bus": knownvalue.StringExact("virtio"),
				"boot_order": knownvalue.Null(), "image": knownvalue.StringExact("tiny.qcow2"),
				"persistent": knownvalue.Null(), "cloud_init": knownvalue.Null(),
			})),
			statecheck.ExpectKnownValue(dbDS, tfjsonpath.New("disk").AtSliceIndex(1).AtMapKey("bus"), knownvalue.StringExact("sata")),
			statecheck.ExpectKnownValue(dbDS, tfjsonpath.New("interface").AtSliceIndex(0).AtMapKey("model"), knownvalue.StringExact("virtio")),
			statecheck.ExpectKnownValue(dbDS, tfjsonpath.New("interface").AtSliceIndex(0).AtMapKey("port_forward"), knownvalue.ListExact([]knownvalue.Check{
				knownvalue.ObjectExact(map[string]knownvalue.Check{
					"host_port": knownvalue.Int64Exact(15432), "guest_port": knownvalue.Int64Exact(5432),
					"protocol": knownvalue.StringExact("tcp"), "host_address": knownvalue.StringExact("127.0.0.1"),
				}),
			})),
			statecheck.ExpectKnownValue(dbDS, tfjsonpath.New("interface").AtSliceIndex(0).AtMapKey("bridge"), knownvalue.Null()),
			statecheck.ExpectKnownValue(dbDS, tfjsonpath.New("interface").AtSliceIndex(1).AtMapKey("bridge"), knownvalue.ObjectExact(map[string]knownvalue.Check{
				"name": knownvalue.StringExact("br0"), "vlan": knownvalue.Int64Exact(7),
			})),
			statecheck.ExpectKnownValue(dbDS, tfjsonpath.New("interface").AtSliceIndex(1).AtMapKey("port_forward"), knownvalue.ListExact([]knownvalue.Check{})),
			statecheck.ExpectKnownValue(dbDS, tfjsonpath.New("status").AtMapKey("interfaces"), knownvalue.ListExact([]knownvalue.Check{})),
			statecheck.ExpectKnownValue(ds, tfjsonpath.New("status").AtMapKey("interfaces").AtSliceIndex(0).AtMapKey("name"), knownvalue.StringExact("default")),
			statecheck.ExpectKnownValue(ds, tfjsonpath.New("annotations"), knownvalue.MapExact(map[string]knownvalue.Check{})),
			statecheck.ExpectKnownValue(ds, tfjsonpath.New("status").AtMapKey("printable_status"), knownvalue.StringExact("Running")),
			statecheck.ExpectKnownValue(ds, tfjsonpath.New("termination_grace_period"), knownvalue.Int64Exact(30)),

			statecheck.ExpectKnownValue("data.virtplane_virtual_machines.run", tfjsonpath.New("id"), knownvalue.StringExact("label_selector=run="+run)),
			statecheck.ExpectKnownValue("data.virtplane_virtual_machines.run", tfjsonpath.New("virtual_machines"), knownvalue.ListExact([]knownvalue.Check{
				knownvalue.ObjectPartial(map[string]knownvalue.Check{
					"id": knownvalue.StringExact("default/" + run + "-db"), "run_strategy": knownvalue.StringExact("Halted"),
					"printable_status": knownvalue.StringExact("Stopped"), "ready": knownvalue.Bool(false), "node": knownvalue.Null(),
					"labels":     knownvalue.MapExact(map[string]knownvalue.Check{"run": knownvalue.StringExact(run), "tier": knownvalue.StringExact("db")}),
					"interfaces": knownvalue.ListExact([]knownvalue.Check{}),
				}),
				knownvalue.ObjectPartial(map[string]knownvalue.Check{
					"id": knownvalue.StringExact("default/" + run + "-web"), "namespace": knownvalue.StringExact("default"),
					"name": knownvalue.StringExact(run + "-web"), "run_strategy": knownvalue.StringExact("Always"),
					"printable_status": knownvalue.StringExact("Running"), "ready": knownvalue.Bool(true), "node": knownvalue.NotNull(),
					"interfaces": knownvalue.ListSizeExact(1),
				}),
			})),
			statecheck.ExpectKnownValue("data.virtplane_virtual_machines.running", tfjsonpath.New("virtual_machines"), knownvalue.ListExact([]knownvalue.Check{
				knownvalue.ObjectPartial(map[string]knownvalue.Check{"name": knownvalue.StringExact(run + "-web")}),
			})),
			statecheck.ExpectKnownValue("data.virtplane_virtual_machines.db", tfjsonpath.New("virtual_machines"), knownvalue.ListExact([]knownvalue.Check{
				knownvalue.ObjectPartial(map[string]knownvalue.Check{"name": knownvalue.StringExact(run + "-db")}),
			})),
		},
	}})
}
