package provider_test

import (
	"context"
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
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/provider/internal/acctest"
)

// vmConfig renders a virtplane_virtual_machine "test" block; body goes
// inside it after name and the harness's node_selector.
func vmConfig(agent *acctest.Agent, name, body string) string {
	return agent.ProviderConfig() + fmt.Sprintf(`
resource "virtplane_virtual_machine" "test" {
  name = %q
  %s
%s
}
`, name, agent.Nodes.NodeSelectorHCL(), body)
}

const vmAddr = "virtplane_virtual_machine.test"

// errorRe matches the given parts of an error message in order, whatever
// line wrapping terraform applied: each space matches any whitespace.
func errorRe(parts ...string) *regexp.Regexp {
	for i, p := range parts {
		parts[i] = strings.ReplaceAll(regexp.QuoteMeta(p), " ", `\s+`)
	}
	return regexp.MustCompile(`(?s)` + strings.Join(parts, ".*"))
}

// apiVM reads a VM and its instance (nil when none) straight from the agent.
func apiVM(ctx context.Context, agent *acctest.Agent, ns, name string) (*apiv1.VirtualMachine, *apiv1.VirtualMachineInstance, error) {
	key := &apiv1.ObjectKey{Namespace: ns, Name: name}
	vm, err := agent.Client.VMs.Get(ctx, &apiv1.GetVirtualMachineRequest{Key: key})
	if err != nil {
		return nil, nil, err
	}
	vmi, err := agent.Client.VMIs.Get(ctx, &apiv1.GetVirtualMachineInstanceRequest{Key: key})
	if status.Code(err) == codes.NotFound {
		return vm, nil, nil
	}
	return vm, vmi, err
}

// checkDestroyed verifies destroy left no VM behind.
func checkDestroyed(agent *acctest.Agent) resource.TestCheckFunc {
	return func(s *terraform.State) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, rs := range s.RootModule().Resources {
			if rs.Type != "virtplane_virtual_machine" {
				continue
			}
			ns, name := rs.Primary.Attributes["namespace"], rs.Primary.Attributes["name"]
			_, err := agent.Client.VMs.Get(ctx, &apiv1.GetVirtualMachineRequest{Key: &apiv1.ObjectKey{Namespace: ns, Name: name}})
			if status.Code(err) != codes.NotFound {
				return fmt.Errorf("virtual machine %s/%s still exists after destroy (err %v)", ns, name, err)
			}
		}
		return nil
	}
}

// instanceUID records the UID of the VM's current instance into *uid.
func instanceUID(agent *acctest.Agent, name string, uid *string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		_, vmi, err := apiVM(context.Background(), agent, "default", name)
		if err != nil {
			return err
		}
		if vmi == nil {
			return fmt.Errorf("%s has no instance", name)
		}
		*uid = vmi.GetMetadata().GetUid()
		return nil
	}
}

// restartedWith checks that the VM runs a new instance (not *oldUID) with
// the given guest memory, then records the new UID.
func restartedWith(agent *acctest.Agent, name string, oldUID *string, memory string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		_, vmi, err := apiVM(context.Background(), agent, "default", name)
		if err != nil {
			return err
		}
		switch {
		case vmi == nil:
			return fmt.Errorf("%s has no instance after the restart", name)
		case vmi.GetMetadata().GetUid() == *oldUID:
			return fmt.Errorf("%s still runs instance %s: it was not restarted", name, *oldUID)
		case vmi.GetStatus().GetPhase() != apiv1.PhaseRunning:
			return fmt.Errorf("%s's new instance is %s, want Running", name, vmi.GetStatus().GetPhase())
		case vmi.GetSpec().GetDomain().GetMemory().GetGuest() != memory:
			return fmt.Errorf("%s's new instance has memory %s, want %s", name, vmi.GetSpec().GetDomain().GetMemory().GetGuest(), memory)
		}
		*oldUID = vmi.GetMetadata().GetUid()
		return nil
	}
}

// sameInstance checks the VM still runs instance *uid.
func sameInstance(agent *acctest.Agent, name string, uid *string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		_, vmi, err := apiVM(context.Background(), agent, "default", name)
		if err != nil {
			return err
		}
		if vmi == nil || vmi.GetMetadata().GetUid() != *uid {
			return fmt.Errorf("%s's instance changed (want %s): it was restarted", name, *uid)
		}
		return nil
	}
}

// noInstance checks the VM has no instance (Halted).
func noInstance(agent *acctest.Agent, name string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		_, vmi, err := apiVM(context.Background(), agent, "default", name)
		if err != nil {
			return err
		}
		if vmi != nil {
			return fmt.Errorf("%s still has instance %s in phase %s", name, vmi.GetMetadata().GetUid(), vmi.GetStatus().GetPhase())
		}
		return nil
	}
}

func expectStatus(printable string) statecheck.StateCheck {
	return statecheck.ExpectKnownValue(vmAddr, tfjsonpath.New("status").AtMapKey("printable_status"), knownvalue.StringExact(printable))
}

const lifecycleBody = `
  labels = {
    app = "web"
  }
  memory = %q
  %s
  disk {
    name       = "root"
    image      = "tiny.qcow2"
    boot_order = 1
  }
  disk {
    name = "seed"
    cloud_init {
      user_data = <<-EOT
        #cloud-config
        hostname: web
      EOT
    }
  }
  interface {
    name = "default"
  }
`

// The whole life of an Always VM: create waits for Running; import finds
// every attribute; a memory change restarts it (new instance with the new
// memory); another spelling of the same memory is no change; Halted stops
// it and Always starts it again; destroy removes it. After every step the
// framework checks that a plan is empty.
func TestAccVirtualMachine_lifecycle(t *testing.T) {
	agent := acctest.SharedAgent(t)
	name := acctest.RandomName("life")
	cfg := func(memory, extra string) string {
		return vmConfig(agent, name, fmt.Sprintf(lifecycleBody, memory, extra))
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
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProtoV6ProviderFactories,
		CheckDestroy:             checkDestroyed(agent),
		Steps: []resource.TestStep{
			{
				Config: cfg("256Mi", ""),
				ConfigStateChecks: append([]statecheck.StateCheck{
					statecheck.ExpectKnownValue(vmAddr, tfjsonpath.New("id"), knownvalue.StringExact("default/"+name)),
					statecheck.ExpectKnownValue(vmAddr, tfjsonpath.New("namespace"), knownvalue.StringExact("default")),
					statecheck.ExpectKnownValue(vmAddr, tfjsonpath.New("run_strategy"), knownvalue.StringExact("Always")),
					statecheck.ExpectKnownValue(vmAddr, tfjsonpath.New("update_policy"), knownvalue.StringExact("restart")),
					statecheck.ExpectKnownValue(vmAddr, tfjsonpath.New("termination_grace_period"), knownvalue.Int64Exact(30)),
					statecheck.ExpectKnownValue(vmAddr, tfjsonpath.New("cpu"), knownvalue.Null()),
					// Server defaults read back as the schema's defaults.
					statecheck.ExpectKnownValue(vmAddr, tfjsonpath.New("disk").AtSliceIndex(0).AtMapKey("bus"), knownvalue.StringExact("virtio")),
					statecheck.ExpectKnownValue(vmAddr, tfjsonpath.New("disk").AtSliceIndex(1).AtMapKey("bus"), knownvalue.StringExact("sata")),
					statecheck.ExpectKnownValue(vmAddr, tfjsonpath.New("interface").AtSliceIndex(0).AtMapKey("model"), knownvalue.StringExact("virtio")),
					statecheck.ExpectKnownValue(vmAddr, tfjsonpath.New("uid"), knownvalue.NotNull()),
				}, running...),
				Check: instanceUID(agent, name, &uid),
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
				Config: cfg("512Mi", ""),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(vmAddr, plancheck.ResourceActionUpdate),
				}},
				ConfigStateChecks: append([]statecheck.StateCheck{
					statecheck.ExpectKnownValue(vmAddr, tfjsonpath.New("memory"), knownvalue.StringExact("512Mi")),
				}, running...),
				Check: restartedWith(agent, name, &uid, "512Mi"),
			},
			{
				// The same amount spelled differently is no change at all.
				Config: cfg("0.5Gi", ""),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectEmptyPlan(),
				}},
				Check: sameInstance(agent, name, &uid),
			},
			{
				Config: cfg("512Mi", `run_strategy = "Halted"`),
				ConfigStateChecks: []statecheck.StateCheck{
					expectStatus(apiv1.PrintableStopped),
					statecheck.ExpectKnownValue(vmAddr, tfjsonpath.New("status").AtMapKey("phase"), knownvalue.Null()),
					statecheck.ExpectKnownValue(vmAddr, tfjsonpath.New("status").AtMapKey("ready"), knownvalue.Bool(false)),
				},
				Check: noInstance(agent, name),
			},
			{
				Config:            cfg("512Mi", `run_strategy = "Always"`),
				ConfigStateChecks: running,
			},
		},
	})
}

// A Once VM runs its guest until the guest powers off by itself, and is
// not started again.
func TestAccVirtualMachine_once(t *testing.T) {
	agent := acctest.SharedAgent(t)
	if !agent.Nodes.Scripted {
		t.Skip("needs scripted guests (fake nodes) to power a guest off on cue")
	}
	name := acctest.RandomName("once")
	cfg := vmConfig(agent, name, fmt.Sprintf(`
  run_strategy = "Once"
  memory       = "128Mi"
  annotations = {
    %q = "exit:2s"
  }
`, acctest.ScriptAnnotation))
	var uid string
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProtoV6ProviderFactories,
		CheckDestroy:             checkDestroyed(agent),
		Steps: []resource.TestStep{
			{
				Config: cfg,
				Check: resource.ComposeAggregateTestCheckFunc(
					instanceUID(agent, name, &uid),
					resource.TestMatchResourceAttr(vmAddr, "status.phase", regexp.MustCompile(`^(Running|Succeeded)$`)),
					// The guest powers off; the instance stays Succeeded
					// and no new one is started.
					func(*terraform.State) error {
						ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
						defer cancel()
						for {
							vm, vmi, err := apiVM(ctx, agent, "default", name)
							if err != nil {
								return err
							}
							if vmi.GetStatus().GetPhase() == apiv1.PhaseSucceeded && vm.GetStatus().GetPrintableStatus() == apiv1.PrintableStopped {
								break
							}
							select {
							case <-ctx.Done():
								return fmt.Errorf("guest did not power off: %s / %s", vm.GetStatus().GetPrintableStatus(), vmi.GetStatus().GetPhase())
							case <-time.After(200 * time.Millisecond):
							}
						}
						time.Sleep(3 * time.Second) // longer than Always's restart would take
						return sameInstance(agent, name, &uid)(nil)
					},
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
		},
	})
}

// Typos fail at plan time, naming the attribute and what is allowed.
func TestAccVirtualMachine_planTimeValidation(t *testing.T) {
	agent := acctest.SharedAgent(t)
	cfg := func(body string) string { return vmConfig(agent, "invalid", body) }
	resource.Test(t, resource.TestCase{
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
				ExpectError: errorRe(`cloud_init disk, attached as a CD-ROM, whose bus must be "sata" or "scsi"`),
			},
			{
				Config:      cfg(`memory = "1Gi"` + "\n" + `node_failure_policy = "wait"`),
				PlanOnly:    true,
				ExpectError: errorRe(`node_failure_policy must be one of "Wait", "RestartElsewhere"`, `Did you mean "Wait"?`),
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
		},
	})
}

// What only the agent can check (absolute image paths must be inside its
// image directory) comes back on the attribute that set it, with the
// agent's message, and nothing is created.
func TestAccVirtualMachine_agentErrorsNameAttributes(t *testing.T) {
	agent := acctest.SharedAgent(t)
	name := acctest.RandomName("rejected")
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProtoV6ProviderFactories,
		CheckDestroy:             checkDestroyed(agent),
		Steps: []resource.TestStep{{
			Config: vmConfig(agent, name, `
  memory = "128Mi"
  disk {
    name  = "root"
    image = "/etc/passwd"
  }`),
			// Terraform quotes the configuration line of the attribute.
			ExpectError: errorRe(`Invalid image`, `image = "/etc/passwd"`,
				`the agent rejected spec.template.spec.volumes[0].image.name: Invalid value: "/etc/passwd": must be inside the image directory`),
		}},
	})
}

// terraform plan -generate-config-out writes a configuration for an import
// block; that configuration must plan no change (the framework fails the
// step otherwise). A VM with every kind of block shows that each
// attribute reads back as configured, the sensitive user data included.
func TestAccVirtualMachine_generateConfig(t *testing.T) {
	agent := acctest.SharedAgent(t)
	name := acctest.RandomName("gen")
	cfg := func(memory string) string {
		return vmConfig(agent, name, fmt.Sprintf(`
  memory                   = %q
  run_strategy             = "RerunOnFailure"
  node_failure_policy      = "RestartElsewhere"
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
  interface {
    name        = "default"
    model       = "e1000"
    mac_address = "02:00:00:00:00:01"
  }
`, memory))
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProtoV6ProviderFactories,
		CheckDestroy:             checkDestroyed(agent),
		Steps: []resource.TestStep{
			{
				Config:            cfg("1Gi"),
				ConfigStateChecks: []statecheck.StateCheck{expectStatus(apiv1.PrintableRunning)},
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
		},
	})
}

// A VM deleted outside Terraform is planned for creation again; an agent
// that cannot be reached is an error, never taken for a deletion.
func TestAccVirtualMachine_driftDeleted(t *testing.T) {
	agent := acctest.SharedAgent(t)
	name := acctest.RandomName("gone")
	cfg := vmConfig(agent, name, `memory = "128Mi"`)
	unreachable := fmt.Sprintf(`
provider "virtplane" {
  endpoint = "unix://%s/no-agent.sock"
}
resource "virtplane_virtual_machine" "test" {
  name   = %q
  memory = "128Mi"
  %s
}
`, t.TempDir(), name, agent.Nodes.NodeSelectorHCL())
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProtoV6ProviderFactories,
		CheckDestroy:             checkDestroyed(agent),
		Steps: []resource.TestStep{
			{Config: cfg, ConfigStateChecks: []statecheck.StateCheck{expectStatus(apiv1.PrintableRunning)}},
			{
				Config:      unreachable,
				PlanOnly:    true,
				ExpectError: errorRe(`virtplane agent unreachable`, `Cannot read virtual machine default/`+name),
			},
			{
				PreConfig: func() { deleteVM(t, agent, name) },
				Config:    cfg,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(vmAddr, plancheck.ResourceActionCreate),
				}},
				ConfigStateChecks: []statecheck.StateCheck{expectStatus(apiv1.PrintableRunning)},
			},
		},
	})
}

func deleteVM(t *testing.T, agent *acctest.Agent, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	key := &apiv1.ObjectKey{Namespace: "default", Name: name}
	if _, err := agent.Client.VMs.Delete(ctx, &apiv1.DeleteVirtualMachineRequest{Key: key}); err != nil {
		t.Fatalf("delete %s: %v", name, err)
	}
	for {
		_, err := agent.Client.VMs.Get(ctx, &apiv1.GetVirtualMachineRequest{Key: key})
		if status.Code(err) == codes.NotFound {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("%s was not deleted: %v", name, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// A stop outside Terraform (which turns Always into Halted, as in
// KubeVirt) shows as a change back to Always, and apply starts the VM.
func TestAccVirtualMachine_driftStopped(t *testing.T) {
	agent := acctest.SharedAgent(t)
	name := acctest.RandomName("stopped")
	cfg := vmConfig(agent, name, `memory = "128Mi"`)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProtoV6ProviderFactories,
		CheckDestroy:             checkDestroyed(agent),
		Steps: []resource.TestStep{
			{Config: cfg, ConfigStateChecks: []statecheck.StateCheck{expectStatus(apiv1.PrintableRunning)}},
			{
				PreConfig: func() {
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					key := &apiv1.ObjectKey{Namespace: "default", Name: name}
					if _, err := agent.Client.VMs.Stop(ctx, &apiv1.StopVirtualMachineRequest{Key: key}); err != nil {
						t.Fatalf("stop %s: %v", name, err)
					}
					for {
						vm, vmi, err := apiVM(ctx, agent, "default", name)
						if err == nil && vmi == nil && vm.GetStatus().GetPrintableStatus() == apiv1.PrintableStopped {
							return
						}
						if ctx.Err() != nil {
							t.Fatalf("%s did not stop: %v", name, err)
						}
						time.Sleep(100 * time.Millisecond)
					}
				},
				Config: cfg,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(vmAddr, plancheck.ResourceActionUpdate),
					plancheck.ExpectKnownValue(vmAddr, tfjsonpath.New("run_strategy"), knownvalue.StringExact("Always")),
				}},
				ConfigStateChecks: []statecheck.StateCheck{expectStatus(apiv1.PrintableRunning)},
			},
		},
	})
}

// A VM no node can take fails at once with the placement message instead
// of waiting out the timeout, and is tainted rather than forgotten: the
// next apply replaces it.
func TestAccVirtualMachine_unschedulableFailsFast(t *testing.T) {
	agent := acctest.SharedAgent(t)
	name := acctest.RandomName("nofit")
	cfg := func(extra string) string {
		return vmConfig(agent, name, `memory = "128Mi"`+"\n"+extra)
	}
	start := time.Now()
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProtoV6ProviderFactories,
		CheckDestroy:             checkDestroyed(agent),
		Steps: []resource.TestStep{
			{
				// 1Ti fits no node.
				Config:      strings.Replace(cfg(""), `memory = "128Mi"`, `memory = "1Ti"`, 1),
				ExpectError: errorRe(`no node can run it (ErrorUnschedulable): 0/`, ` nodes are available`),
			},
			{
				PreConfig: func() {
					if d := time.Since(start); d > 2*time.Minute {
						t.Errorf("the unschedulable VM took %s to fail; it should fail fast", d)
					}
				},
				Config: cfg(""),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(vmAddr, plancheck.ResourceActionDestroyBeforeCreate),
				}},
				ConfigStateChecks: []statecheck.StateCheck{expectStatus(apiv1.PrintableRunning)},
			},
		},
	})
}

// A guest that fails before it ever runs puts the VM in CrashLoopBackOff;
// create says so instead of waiting.
func TestAccVirtualMachine_crashLoopFailsFast(t *testing.T) {
	agent := acctest.SharedAgent(t)
	if !agent.Nodes.Scripted {
		t.Skip("needs scripted guests (fake nodes) to fail a start on cue")
	}
	name := acctest.RandomName("crash")
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProtoV6ProviderFactories,
		CheckDestroy:             checkDestroyed(agent),
		Steps: []resource.TestStep{{
			Config: vmConfig(agent, name, fmt.Sprintf(`
  memory = "128Mi"
  annotations = {
    %q = "fail-start"
  }
`, acctest.ScriptAnnotation)),
			ExpectError: errorRe(`it is in CrashLoopBackOff: its instance failed 1 time(s) in a row before reaching Running`),
		}},
	})
}

// update_policy = "none" leaves the running guest alone and reports
// restart_required; switching to "restart" then restarts it.
func TestAccVirtualMachine_updatePolicy(t *testing.T) {
	agent := acctest.SharedAgent(t)
	name := acctest.RandomName("policy")
	cfg := func(memory, policy string) string {
		return vmConfig(agent, name, fmt.Sprintf("memory = %q\n  update_policy = %q", memory, policy))
	}
	var uid string
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProtoV6ProviderFactories,
		CheckDestroy:             checkDestroyed(agent),
		Steps: []resource.TestStep{
			{Config: cfg("128Mi", "none"), Check: instanceUID(agent, name, &uid)},
			{
				Config: cfg("256Mi", "none"),
				ConfigStateChecks: []statecheck.StateCheck{
					expectStatus(apiv1.PrintableRunning),
					statecheck.ExpectKnownValue(vmAddr, tfjsonpath.New("restart_required"), knownvalue.Bool(true)),
				},
				Check: sameInstance(agent, name, &uid),
			},
			{
				Config: cfg("256Mi", "restart"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(vmAddr, plancheck.ResourceActionUpdate),
					plancheck.ExpectKnownValue(vmAddr, tfjsonpath.New("restart_required"), knownvalue.Bool(false)),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					expectStatus(apiv1.PrintableRunning),
					statecheck.ExpectKnownValue(vmAddr, tfjsonpath.New("restart_required"), knownvalue.Bool(false)),
				},
				Check: restartedWith(agent, name, &uid, "256Mi"),
			},
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
  memory       = "128Mi"
  %[3]s
}
resource "virtplane_virtual_machine" "rerun" {
  name         = %[2]q
  run_strategy = "RerunOnFailure"
  memory       = "128Mi"
  %[3]s
}
`, manual, rerun, agent.Nodes.NodeSelectorHCL())
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProtoV6ProviderFactories,
		CheckDestroy:             checkDestroyed(agent),
		Steps: []resource.TestStep{{
			Config: cfg,
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue("virtplane_virtual_machine.rerun", tfjsonpath.New("status").AtMapKey("printable_status"), knownvalue.StringExact("Running")),
				statecheck.ExpectKnownValue("virtplane_virtual_machine.manual", tfjsonpath.New("status").AtMapKey("ready"), knownvalue.Bool(false)),
			},
			Check: noInstance(agent, manual),
		}},
	})
}
