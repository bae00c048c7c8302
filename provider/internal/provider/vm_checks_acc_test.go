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
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
	"github.com/virtplane/terraform-provider-virtplane/provider/internal/acctest"
)

// What the virtplane_virtual_machine acceptance tests share: configurations,
// and checks that read the VM, its instance and its libvirt domain back.

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

// testVMs runs steps in parallel with the other tests and checks that
// destroy leaves no VM behind.
func testVMs(t *testing.T, agent *acctest.Agent, steps []resource.TestStep) {
	t.Helper()
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProtoV6ProviderFactories,
		CheckDestroy:             checkDestroyed(t, agent),
		Steps:                    steps,
	})
}

// checkDestroyed verifies destroy left no VM behind, and on real nodes no
// libvirt domain either.
func checkDestroyed(t *testing.T, agent *acctest.Agent) resource.TestCheckFunc {
	return func(s *terraform.State) error {
		for _, rs := range s.RootModule().Resources {
			if rs.Type != "virtplane_virtual_machine" {
				continue
			}
			ns, name := rs.Primary.Attributes["namespace"], rs.Primary.Attributes["name"]
			_, err := agent.Client.VMs.Get(t.Context(), &apiv1.GetVirtualMachineRequest{Key: &apiv1.ObjectKey{Namespace: ns, Name: name}})
			if status.Code(err) != codes.NotFound {
				return fmt.Errorf("virtual machine %s/%s still exists after destroy (err %v)", ns, name, err)
			}
			waitNoDomain(t, agent, ns, name)
		}
		return nil
	}
}

// domainGoneTimeout bounds how long a domain may outlive its VM in the
// API. The node agent undefines a domain as the instance ends, in the same
// moment as it reports the end; nothing orders the two, so the check
// waits, but a domain still there seconds later is a leak.
const domainGoneTimeout = 15 * time.Second

// waitNoDomain waits until libvirt has no domain whose name starts with
// that of VM ns/name's (nothing to check without real nodes).
func waitNoDomain(t *testing.T, agent *acctest.Agent, ns, name string) {
	t.Helper()
	// Each check lists libvirt's domains: every 200 ms, not every 20.
	testutil.Every(200*time.Millisecond).EventuallyNoError(t, domainGoneTimeout, "libvirt to have no domain of "+ns+"/"+name, func() error {
		ds, err := agent.Nodes.Domains(t.Context(), ns, name)
		if err != nil {
			return err
		}
		if len(ds) > 0 {
			return fmt.Errorf("libvirt still has domains %v", ds)
		}
		return nil
	})
}

// noDomain checks VM name has no libvirt domain (Halted, or its guest
// ended).
func noDomain(t *testing.T, agent *acctest.Agent, name string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		waitNoDomain(t, agent, "default", name)
		return nil
	}
}

// guestBooted waits until the guest of the VM's current instance has
// booted (on real nodes: its serial console says so) and, when hostname
// is set, checks the guest took it from the kernel command line. Steps
// that leave a guest running use it, so that the next stop finds a guest
// that obeys the ACPI power button instead of one still booting, which
// would hold the stop for the whole termination grace period.
func guestBooted(t *testing.T, agent *acctest.Agent, name, hostname string) resource.TestCheckFunc {
	return instanceCheck(agent, name, func(vmi *apiv1.VirtualMachineInstance) error {
		if vmi == nil {
			return fmt.Errorf("%s has no instance", name)
		}
		booted := agent.Nodes.WaitBooted(t, vmi.GetMetadata().GetUid())
		if booted != nil && hostname != "" && booted["hostname"] != hostname {
			return fmt.Errorf("%s's guest booted with hostname %q, want %q from its boot cmdline", name, booted["hostname"], hostname)
		}
		return nil
	})
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
	return instanceCheck(agent, name, func(vmi *apiv1.VirtualMachineInstance) error {
		if vmi == nil {
			return fmt.Errorf("%s has no instance", name)
		}
		*uid = vmi.GetMetadata().GetUid()
		return nil
	})
}

// restartedWith checks that the VM runs a new instance (not *oldUID) with
// the given guest memory, then records the new UID.
func restartedWith(agent *acctest.Agent, name string, oldUID *string, memory string) resource.TestCheckFunc {
	return instanceCheck(agent, name, func(vmi *apiv1.VirtualMachineInstance) error {
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
	})
}

// sameInstance checks the VM still runs instance *uid.
func sameInstance(agent *acctest.Agent, name string, uid *string) resource.TestCheckFunc {
	return instanceCheck(agent, name, func(vmi *apiv1.VirtualMachineInstance) error {
		if vmi == nil || vmi.GetMetadata().GetUid() != *uid {
			return fmt.Errorf("%s's instance changed (want %s): it was restarted", name, *uid)
		}
		return nil
	})
}

// noInstance checks the VM has no instance (Halted).
func noInstance(agent *acctest.Agent, name string) resource.TestCheckFunc {
	return instanceCheck(agent, name, func(vmi *apiv1.VirtualMachineInstance) error {
		if vmi != nil {
			return fmt.Errorf("%s still has instance %s in phase %s", name, vmi.GetMetadata().GetUid(), vmi.GetStatus().GetPhase())
		}
		return nil
	})
}

// instanceCheck judges the current instance of VM name (nil when it has
// none), read straight from the agent.
func instanceCheck(agent *acctest.Agent, name string, check func(vmi *apiv1.VirtualMachineInstance) error) resource.TestCheckFunc {
	return func(*terraform.State) error {
		_, vmi, err := apiVM(context.Background(), agent, "default", name)
		if err != nil {
			return err
		}
		return check(vmi)
	}
}

// runningStep applies config and expects VM name Running with a booted
// guest. pre, unless nil, runs first; plan checks the plan before apply.
func runningStep(t *testing.T, agent *acctest.Agent, name, config string, pre func(), plan ...plancheck.PlanCheck) resource.TestStep {
	return resource.TestStep{
		PreConfig:         pre,
		Config:            config,
		ConfigPlanChecks:  resource.ConfigPlanChecks{PreApply: plan},
		ConfigStateChecks: []statecheck.StateCheck{expectStatus(apiv1.PrintableRunning)},
		Check:             guestBooted(t, agent, name, ""),
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

// deleteVM deletes VM name behind Terraform's back and waits until it is
// gone.
func deleteVM(t *testing.T, agent *acctest.Agent, name string) {
	t.Helper()
	key := &apiv1.ObjectKey{Namespace: "default", Name: name}
	if _, err := agent.Client.VMs.Delete(t.Context(), &apiv1.DeleteVirtualMachineRequest{Key: key}); err != nil {
		t.Fatalf("delete %s: %v", name, err)
	}
	testutil.EventuallyNoError(t, apiChangeTimeout, name+" to be deleted", func() error {
		_, err := agent.Client.VMs.Get(t.Context(), &apiv1.GetVirtualMachineRequest{Key: key})
		if status.Code(err) == codes.NotFound {
			return nil
		}
		return fmt.Errorf("still there (err %v)", err)
	})
}

// stopVM stops VM name behind Terraform's back and waits until it has no
// instance left.
func stopVM(t *testing.T, agent *acctest.Agent, name string) {
	t.Helper()
	key := &apiv1.ObjectKey{Namespace: "default", Name: name}
	if _, err := agent.Client.VMs.Stop(t.Context(), &apiv1.StopVirtualMachineRequest{Key: key}); err != nil {
		t.Fatalf("stop %s: %v", name, err)
	}
	testutil.EventuallyNoError(t, apiChangeTimeout, name+" to stop", func() error {
		vm, vmi, err := apiVM(t.Context(), agent, "default", name)
		switch {
		case err != nil:
			return err
		case vmi != nil:
			return fmt.Errorf("instance %s is still there, in phase %s", vmi.GetMetadata().GetUid(), vmi.GetStatus().GetPhase())
		case vm.GetStatus().GetPrintableStatus() != apiv1.PrintableStopped:
			return fmt.Errorf("VM is %s", vm.GetStatus().GetPrintableStatus())
		}
		return nil
	})
}

// apiChangeTimeout bounds a change the tests make behind Terraform's back
// (a delete, a stop) taking effect: the guest gets its shutdown first.
const apiChangeTimeout = 30 * time.Second
