package provider_test

import (
	"fmt"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/provider/internal/acctest"
)

// Acceptance tests of configurations: what plan refuses, what the agent
// refuses, and configurations that read back unchanged.

// Typos fail at plan time, naming the attribute and what is allowed.
func TestAccVirtualMachine_planTimeValidation(t *testing.T) {
	agent := acctest.SharedAgent(t)
	cfg := func(body string) string { return vmConfig(agent, "invalid", body) }
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config:      cfg(`memory = "1Gi"` + "\n" + `run_strategy = "always"`),
				PlanOnly:    true,
				ExpectError: errorRe(`Invalid run_strategy`, `run_strategy must be one of "Always", "RerunOnFailure", "Manual", "Halted", "Once" (case-sensitive), got "always".`, `Did you mean "Always"?`),
			},
			{
				Config:      cfg(`memory = "1GB"`),
				PlanOnly:    true,
				ExpectError: errorRe(`Invalid quantity`, `memory "1GB" is not valid: it must be a Kubernetes quantity such as 512Mi or 1Gi`, `Did you mean "1Gi"?`),
			},
			{
				Config:      cfg(`memory = "8Mi"`),
				PlanOnly:    true,
				ExpectError: errorRe(`memory "8Mi" must be at least 16Mi`),
			},
			{
				Config: cfg(`memory = "1Gi"
  disk {
    name  = "root"
    image = "a.qcow2"
    persistent {
      size = "1Gi"
    }
  }`),
				PlanOnly:    true,
				ExpectError: errorRe(`disk[0] must set exactly one of image, persistent or cloud_init; it sets image and persistent`),
			},
			{
				Config: cfg(`memory = "1Gi"
  disk {
    name = "seed"
    bus  = "virtio"
    cloud_init {
      user_data = "#cloud-config"
    }
  }`),
				PlanOnly:    true,
				ExpectError: errorRe(`cloud_init disk, attached as a CD-ROM, whose bus must be one of "sata", "scsi"`),
			},
			{
				Config:      cfg(`memory = "1Gi"` + "\n" + `node_failure_policy = "wait"`),
				PlanOnly:    true,
				ExpectError: errorRe(`node_failure_policy must be one of "Wait", "RestartElsewhere"`, `Did you mean "Wait"?`),
			},
			{
				Config:      cfg(`memory = "1Gi"` + "\n" + `eviction_strategy = "liveMigrate"`),
				PlanOnly:    true,
				ExpectError: errorRe(`eviction_strategy must be one of "None", "LiveMigrate", "LiveMigrateIfPossible", "External"`, `Did you mean "LiveMigrate"?`),
			},
			{
				Config:      cfg(`memory = "1Gi"` + "\n" + `labels = { "bad key!" = "x" }`),
				PlanOnly:    true,
				ExpectError: errorRe(`Invalid labels key`),
			},
			{
				Config: cfg(`memory = "1Gi"
  disk {
    name = "data"
    persistent {}
  }
  boot {}`),
				PlanOnly:    true,
				ExpectError: errorRe(`Missing disk size`, `Missing kernel`),
			},
			{
				Config: cfg(`memory = "1Gi"
  disk {
    name  = "root"
    image = "a.qcow2"
  }
  disk {
    name  = "root"
    image = "../b.qcow2"
  }`),
				PlanOnly: true,
				ExpectError: errorRe(`Duplicate disk name`, `disk[0] is also named "root"`,
					`Invalid image`, `disk[1].image "../b.qcow2": must not contain ".." elements`),
			},
			{
				Config: cfg(`memory = "1Gi"
  interface {
    name = "lan"
    bridge {
      name = "br0"
    }
    port_forward {
      host_port  = 8080
      guest_port = 80
    }
  }
  wait_for_ip {
    interface = "wan"
  }`),
				PlanOnly: true,
				ExpectError: errorRe(`Invalid Attribute Combination`,
					`Attribute "interface[0].bridge" cannot be specified when "interface[0].port_forward[0]" is specified`,
					`Unknown interface`, `wait_for_ip.interface is "wan", but the VM's interfaces are "lan".`),
			},
			{
				Config: cfg(`memory = "1Gi"
  bootloader {
    bios {}
    efi {}
  }`),
				PlanOnly:    true,
				ExpectError: errorRe(`Invalid Attribute Combination`, `"bootloader.efi" cannot be specified when "bootloader.bios" is specified`),
			},
			{
				Config: cfg(`memory = "1Gi"
  boot {
    kernel = "vmlinuz"
  }
  bootloader {
    efi {
      secure_boot = true
    }
  }`),
				PlanOnly:    true,
				ExpectError: errorRe(`Invalid Attribute Combination`, `Attribute "boot" cannot be specified when "bootloader.efi" is specified`),
			},
		},
	})
}

// What only the agent can check (absolute image paths must be inside its
// image directory) comes back on the attribute that set it, with the
// agent's message, and nothing is created.
func TestAccVirtualMachine_agentErrorsNameAttributes(t *testing.T) {
	agent := acctest.SharedAgent(t)
	name := acctest.RandomName("rejected")
	testVMs(t, agent, []resource.TestStep{{
		Config: vmConfig(agent, name, `
  memory = "128Mi"
  disk {
    name  = "root"
    image = "/etc/passwd"
  }`),
		// Terraform quotes the configuration line of the attribute.
		ExpectError: errorRe(`Invalid image`, `image = "/etc/passwd"`,
			`the agent rejected spec.template.spec.volumes[0].image.name: Invalid value: "/etc/passwd": must be inside the image directory`),
	}})
}

// terraform plan -generate-config-out writes a configuration for an import
// block; that configuration must plan no change (the framework fails the
// step otherwise). A VM with every kind of block shows that each
// attribute reads back as configured, the sensitive user data included.
// It is Halted: what is tested is the configuration's round trip through
// the agent, which needs no guest, and the node agent cannot run
// persistent or cloud-init volumes yet.
func TestAccVirtualMachine_generateConfig(t *testing.T) {
	agent := acctest.SharedAgent(t)
	name := acctest.RandomName("gen")
	cfg := func(memory string) string {
		return vmConfig(agent, name, fmt.Sprintf(`
  memory                   = %q
  run_strategy             = "Halted"
  node_failure_policy      = "RestartElsewhere"
  eviction_strategy        = "External"
  termination_grace_period = 5
  annotations = {
    "example.com/owner" = "team-a"
  }
  cpu {
    cores   = 2
    sockets = 1
  }
  disk {
    name = "root"
    persistent {
      size  = "1Gi"
      image = "tiny.qcow2"
    }
    boot_order = 1
  }
  disk {
    name  = "scratch"
    bus   = "scsi"
    image = "scratch.qcow2"
  }
  disk {
    name = "seed"
    cloud_init {
      user_data    = "#cloud-config\nhostname: gen\n"
      network_data = "version: 2\n"
    }
  }
  boot {
    kernel  = "vmlinuz"
    initrd  = "initrd.img"
    cmdline = "console=ttyS0"
  }
  bootloader {
    bios {}
  }
  interface {
    name        = "default"
    model       = "e1000"
    mac_address = "02:00:00:00:00:01"
    port_forward {
      host_port  = 2222
      guest_port = 22
    }
    port_forward {
      host_port    = 5353
      guest_port   = 53
      protocol     = "udp"
      host_address = "0.0.0.0"
    }
  }
  interface {
    name = "lan"
    bridge {
      name = "br0"
      vlan = 42
    }
  }
  interface {
    name = "nat"
    network {
      name = "default"
    }
  }
`, memory))
	}
	testVMs(t, agent, []resource.TestStep{
		{
			Config:            cfg("1Gi"),
			ConfigStateChecks: []statecheck.StateCheck{expectStatus(apiv1.PrintableStopped)},
		},
		{
			ResourceName:      vmAddr,
			ImportState:       true,
			ImportStateVerify: true,
		},
		{
			ResourceName:    vmAddr,
			ImportState:     true,
			ImportStateKind: resource.ImportBlockWithID,
			GenerateConfig:  true,
		},
		{
			// The agent stores "1Gi"; the user's spelling is no change.
			Config: cfg("1024Mi"),
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectEmptyPlan(),
			}},
		},
		{
			// Importing into that configuration plans no change either,
			// although the imported state says "1Gi".
			ResourceName:    vmAddr,
			ImportState:     true,
			ImportStateKind: resource.ImportBlockWithID,
		},
	})
}
