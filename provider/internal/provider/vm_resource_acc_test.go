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
	k8sresource "k8s.io/apimachinery/pkg/api/resource"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/testguest"
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

// checkDestroyed verifies destroy left no VM behind, and on real nodes no
// libvirt domain either.
func checkDestroyed(agent *acctest.Agent) resource.TestCheckFunc {
	return func(s *terraform.State) error {
		ctx, cancel := context.WithTimeout(context.Background(), domainGoneTimeout+10*time.Second)
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
			if err := waitNoDomain(ctx, agent, ns, name); err != nil {
				return fmt.Errorf("after destroy: %w", err)
			}
		}
		return nil
	}
}

// domainGoneTimeout bounds how long a domain may outlive its VM in the
// API. The node agent undefines a domain as the instance ends, in the same
// moment as it reports the end; nothing orders the two, so the check
// polls, but a domain still there seconds later is a leak.
const domainGoneTimeout = 15 * time.Second

// waitNoDomain waits until libvirt has no domain whose name starts with
// that of VM ns/name's (nothing to check without real nodes).
func waitNoDomain(ctx context.Context, agent *acctest.Agent, ns, name string) error {
	deadline := time.Now().Add(domainGoneTimeout)
	for {
		ds, err := agent.Nodes.Domains(ctx, ns, name)
		if err != nil {
			return err
		}
		if len(ds) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("libvirt still has domains %v of %s/%s %v later", ds, ns, name, domainGoneTimeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// noDomain checks VM name has no libvirt domain (Halted, or its guest
// ended).
func noDomain(agent *acctest.Agent, name string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		return waitNoDomain(context.Background(), agent, "default", name)
	}
}

// guestBooted waits until the guest of the VM's current instance has
// booted (on real nodes: its serial console says so) and, when hostname
// is set, checks the guest took it from the kernel command line. Steps
// that leave a guest running use it, so that the next stop finds a guest
// that obeys the ACPI power button instead of one still booting, which
// would hold the stop for the whole termination grace period.
func guestBooted(agent *acctest.Agent, name, hostname string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		ctx := context.Background()
		_, vmi, err := apiVM(ctx, agent, "default", name)
		if err != nil {
			return err
		}
		if vmi == nil {
			return fmt.Errorf("%s has no instance", name)
		}
		booted, err := agent.Nodes.WaitBooted(ctx, vmi.GetMetadata().GetUid())
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if booted != nil && hostname != "" && booted["hostname"] != hostname {
			return fmt.Errorf("%s's guest booted with hostname %q, want %q from its boot cmdline", name, booted["hostname"], hostname)
		}
		return nil
	}
}

// domainMemory checks the memory libvirt gave VM name's domain, when the
// nodes are real.
func domainMemory(agent *acctest.Agent, name, memory string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		want := k8sresource.MustParse(memory)
		got, ok, err := agent.Nodes.DomainMemory(context.Background(), "default", name)
		switch {
		case err != nil:
			return err
		case ok && got != want.Value():
			return fmt.Errorf("%s's domain has %d bytes of memory, want %s (%d)", name, got, memory, want.Value())
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

// guestBody is the body of a VM that boots the test guest, with the
// guest's kernel command line options; extra goes first.
func guestBody(agent *acctest.Agent, memory, extra string, opts ...testguest.Option) string {
	return fmt.Sprintf("%s\n  memory = %q\n  %s\n", extra, memory, agent.Nodes.BootHCL(opts...))
}

// Guest memory: what the test guest needs under TCG, and a second amount
// to change to.
const (
	guestMemory  = "160Mi"
	guestMemory2 = "192Mi"
)

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
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProtoV6ProviderFactories,
		CheckDestroy:             checkDestroyed(agent),
		Steps: []resource.TestStep{
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
					guestBooted(agent, name, name),
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
					guestBooted(agent, name, name),
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
				Check: resource.ComposeTestCheckFunc(noInstance(agent, name), noDomain(agent, name)),
			},
			{
				Config:            cfg(guestMemory2, `run_strategy = "Always"`),
				ConfigStateChecks: running,
				Check: resource.ComposeTestCheckFunc(
					restartedWith(agent, name, &uid, guestMemory2),
					guestBooted(agent, name, name),
				),
			},
		},
	})
}

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
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProtoV6ProviderFactories,
		CheckDestroy:             checkDestroyed(agent),
		Steps: []resource.TestStep{
			{
				Config: cfg,
				Check: resource.ComposeTestCheckFunc(
					instanceUID(agent, name, &uid),
					resource.TestMatchResourceAttr(vmAddr, "status.phase", regexp.MustCompile(`^(Running|Succeeded)$`)),
					// The guest powers off; the instance stays Succeeded
					// and no new one is started.
					func(*terraform.State) error {
						ctx, cancel := context.WithTimeout(context.Background(), acctest.GuestBootTimeout+time.Minute)
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
						time.Sleep(5 * time.Second) // longer than Always's restart would take
						return sameInstance(agent, name, &uid)(nil)
					},
					noDomain(agent, name),
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
				ExpectError: errorRe(`cloud_init disk, attached as a CD-ROM, whose bus must be one of \["sata" "scsi"\]`),
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
	resource.ParallelTest(t, resource.TestCase{
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
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProtoV6ProviderFactories,
		CheckDestroy:             checkDestroyed(agent),
		Steps: []resource.TestStep{
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
		},
	})
}

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
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProtoV6ProviderFactories,
		CheckDestroy:             checkDestroyed(agent),
		Steps: []resource.TestStep{
			{
				Config:            cfg,
				ConfigStateChecks: []statecheck.StateCheck{expectStatus(apiv1.PrintableRunning)},
				Check:             guestBooted(agent, name, ""),
			},
			{
				Config:      unreachable,
				PlanOnly:    true,
				ExpectError: errorRe(`virtplane agent unreachable`, `Cannot read virtual machine default/`+name),
			},
			{
				PreConfig: func() {
					deleteVM(t, agent, name)
					if err := noDomain(agent, name)(nil); err != nil {
						t.Fatalf("deleted outside Terraform: %v", err)
					}
				},
				Config: cfg,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(vmAddr, plancheck.ResourceActionCreate),
				}},
				ConfigStateChecks: []statecheck.StateCheck{expectStatus(apiv1.PrintableRunning)},
				Check:             guestBooted(agent, name, ""),
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
	cfg := vmConfig(agent, name, guestBody(agent, guestMemory, ""))
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProtoV6ProviderFactories,
		CheckDestroy:             checkDestroyed(agent),
		Steps: []resource.TestStep{
			{
				Config:            cfg,
				ConfigStateChecks: []statecheck.StateCheck{expectStatus(apiv1.PrintableRunning)},
				Check:             guestBooted(agent, name, ""),
			},
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
				Check:             guestBooted(agent, name, ""),
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
	cfg := func(memory string) string { return vmConfig(agent, name, guestBody(agent, memory, "")) }
	start := time.Now()
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProtoV6ProviderFactories,
		CheckDestroy:             checkDestroyed(agent),
		Steps: []resource.TestStep{
			{
				// 1Ti fits no node.
				Config:      cfg("1Ti"),
				ExpectError: errorRe(`no node can run it (ErrorUnschedulable): 0/`, ` nodes are available`),
			},
			{
				PreConfig: func() {
					if d := time.Since(start); d > 2*time.Minute {
						t.Errorf("the unschedulable VM took %s to fail; it should fail fast", d)
					}
				},
				Config: cfg(guestMemory),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(vmAddr, plancheck.ResourceActionDestroyBeforeCreate),
				}},
				ConfigStateChecks: []statecheck.StateCheck{expectStatus(apiv1.PrintableRunning)},
				Check:             guestBooted(agent, name, ""),
			},
		},
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
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProtoV6ProviderFactories,
		CheckDestroy:             checkDestroyed(agent),
		Steps: []resource.TestStep{{
			Config:      vmConfig(agent, name, body),
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
		return vmConfig(agent, name, guestBody(agent, memory, fmt.Sprintf("update_policy = %q", policy)))
	}
	var uid string
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProtoV6ProviderFactories,
		CheckDestroy:             checkDestroyed(agent),
		Steps: []resource.TestStep{
			{
				Config: cfg(guestMemory, "none"),
				Check:  resource.ComposeTestCheckFunc(instanceUID(agent, name, &uid), guestBooted(agent, name, "")),
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
					guestBooted(agent, name, ""),
				),
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
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProtoV6ProviderFactories,
		CheckDestroy:             checkDestroyed(agent),
		Steps: []resource.TestStep{{
			Config: cfg,
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue("virtplane_virtual_machine.rerun", tfjsonpath.New("status").AtMapKey("printable_status"), knownvalue.StringExact("Running")),
				statecheck.ExpectKnownValue("virtplane_virtual_machine.manual", tfjsonpath.New("status").AtMapKey("ready"), knownvalue.Bool(false)),
			},
			Check: resource.ComposeTestCheckFunc(noInstance(agent, manual), noDomain(agent, manual), guestBooted(agent, rerun, "")),
		}},
	})
}
