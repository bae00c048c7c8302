package provider_test

import (
	"fmt"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
	"github.com/virtplane/terraform-provider-virtplane/provider/internal/acctest"
)

// Acceptance tests of the network kinds of interface blocks: user-mode
// with port forwards, a bridge and a libvirt network on the node, and a
// bridge no node has. wait_for_ip is in vm_wait_ip_acc_test.go.

// iface is a check of interface[0] in the state.
func iface(attr ...any) tfjsonpath.Path {
	p := tfjsonpath.New("interface").AtSliceIndex(0)
	for _, a := range attr {
		switch a := a.(type) {
		case string:
			p = p.AtMapKey(a)
		case int:
			p = p.AtSliceIndex(a)
		}
	}
	return p
}

// statusIface is a path into status.interfaces[0].
func statusIface(attr string) tfjsonpath.Path {
	return tfjsonpath.New("status").AtMapKey("interfaces").AtSliceIndex(0).AtMapKey(attr)
}

// macReported checks the node reports interface[0] with the MAC the state
// has (the server assigned it at create).
func macReported(s *terraform.State) error {
	a := s.RootModule().Resources[vmAddr].Primary.Attributes
	mac, got := a["interface.0.mac_address"], a["status.interfaces.0.mac_address"]
	if mac == "" || got != mac {
		return fmt.Errorf("status.interfaces[0].mac_address = %q, want the interface's %q", got, mac)
	}
	return nil
}

// editVM changes VM name behind Terraform's back, retrying conflicts with
// the controller's status writes.
func editVM(t *testing.T, agent *acctest.Agent, name string, edit func(spec *apiv1.VirtualMachineInstanceSpec)) {
	t.Helper()
	key := &apiv1.ObjectKey{Namespace: "default", Name: name}
	for attempt := 0; ; attempt++ {
		vm, err := agent.Client.VMs.Get(t.Context(), &apiv1.GetVirtualMachineRequest{Key: key})
		if err != nil {
			t.Fatalf("get %s: %v", name, err)
		}
		vm = proto.Clone(vm).(*apiv1.VirtualMachine)
		edit(vm.GetSpec().GetTemplate().GetSpec())
		_, err = agent.Client.VMs.Update(t.Context(), &apiv1.UpdateVirtualMachineRequest{Vm: vm})
		if status.Code(err) == codes.Aborted && attempt < 20 {
			continue
		}
		if err != nil {
			t.Fatalf("update %s: %v", name, err)
		}
		return
	}
}

// A user-mode interface with port forwards: the defaults fill in,
// import reads everything back, and a forward changed outside Terraform
// is planned back. The running instance was started with the
// configuration's forwards, so restoring them needs no restart.
func TestAccVirtualMachine_portForward(t *testing.T) {
	agent := acctest.SharedAgent(t)
	name := acctest.RandomName("fwd")
	// Ports free on 127.0.0.1 now: on real nodes QEMU binds the
	// forwards' host ports.
	tcp, udp, other := testutil.FreePort(t, "tcp"), testutil.FreePort(t, "udp"), testutil.FreePort(t, "tcp")
	cfg := vmConfig(agent, name, guestBody(agent, guestMemory, fmt.Sprintf(`
  interface {
    name = "default"
    port_forward {
      host_port  = %d
      guest_port = 22
    }
    port_forward {
      host_port    = %d
      guest_port   = 53
      protocol     = "udp"
      host_address = "127.0.0.1"
    }
  }`, tcp, udp)))
	var uid string
	importIgnore := []string{}
	if !agent.Nodes.Scripted {
		// A real node may find the guest's address between the two reads.
		importIgnore = append(importIgnore, "status.interfaces")
	}
	testVMs(t, agent, []resource.TestStep{
		{
			Config: cfg,
			ConfigStateChecks: []statecheck.StateCheck{
				expectStatus(apiv1.PrintableRunning),
				statecheck.ExpectKnownValue(vmAddr, iface("port_forward", 0, "host_port"), knownvalue.Int64Exact(int64(tcp))),
				statecheck.ExpectKnownValue(vmAddr, iface("port_forward", 0, "protocol"), knownvalue.StringExact("tcp")),
				statecheck.ExpectKnownValue(vmAddr, iface("port_forward", 0, "host_address"), knownvalue.StringExact("127.0.0.1")),
				statecheck.ExpectKnownValue(vmAddr, iface("port_forward", 1, "protocol"), knownvalue.StringExact("udp")),
				statecheck.ExpectKnownValue(vmAddr, iface("bridge"), knownvalue.Null()),
				statecheck.ExpectKnownValue(vmAddr, iface("network"), knownvalue.Null()),
				statecheck.ExpectKnownValue(vmAddr, statusIface("name"), knownvalue.StringExact("default")),
			},
			Check: resource.ComposeTestCheckFunc(macReported, instanceUID(agent, name, &uid), guestBooted(t, agent, name, "")),
		},
		{
			ResourceName:            vmAddr,
			ImportState:             true,
			ImportStateVerify:       true,
			ImportStateVerifyIgnore: importIgnore,
		},
		{
			// Someone moves the TCP forward to another port.
			PreConfig: func() {
				editVM(t, agent, name, func(spec *apiv1.VirtualMachineInstanceSpec) {
					spec.GetNetworks()[0].GetUser().GetPortForwards()[0].HostPort = int32(other)
				})
			},
			Config: cfg,
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectResourceAction(vmAddr, plancheck.ResourceActionUpdate),
				plancheck.ExpectKnownValue(vmAddr, iface("port_forward", 0, "host_port"), knownvalue.Int64Exact(int64(tcp))),
			}},
			ConfigStateChecks: []statecheck.StateCheck{
				expectStatus(apiv1.PrintableRunning),
				statecheck.ExpectKnownValue(vmAddr, tfjsonpath.New("restart_required"), knownvalue.Bool(false)),
			},
			Check: resource.ComposeTestCheckFunc(
				sameInstance(agent, name, &uid),
				func(*terraform.State) error {
					vm, _, err := apiVM(t.Context(), agent, "default", name)
					if err != nil {
						return err
					}
					if got := vm.GetSpec().GetTemplate().GetSpec().GetNetworks()[0].GetUser().GetPortForwards()[0].GetHostPort(); got != int32(tcp) {
						return fmt.Errorf("the VM forwards host port %d, want %d back", got, tcp)
					}
					return nil
				}),
		},
	})
}

// A bridge interface runs on nodes that have the bridge, reads back on
// import, and changing the kind to user-mode restarts the VM.
func TestAccVirtualMachine_bridge(t *testing.T) {
	agent := acctest.SharedAgent(t)
	if agent.Nodes.Bridge == "" {
		t.Skip("the nodes have no bridge for tests: fake nodes have one; real ones are the host, whose bridges a test guest must not join (internal/e2e runs bridges in its own namespaces)")
	}
	name := acctest.RandomName("br")
	vlan, vlanCheck := "", knownvalue.Check(knownvalue.Null())
	if agent.Nodes.Scripted {
		// A real bridge takes a VLAN only with vlan_filtering on.
		vlan, vlanCheck = "vlan = 42", knownvalue.Int64Exact(42)
	}
	cfg := func(kind string) string {
		return vmConfig(agent, name, guestBody(agent, guestMemory, fmt.Sprintf(`
  interface {
    name = "lan"
    %s
  }`, kind)))
	}
	bridge := fmt.Sprintf("bridge {\n      name = %q\n      %s\n    }", agent.Nodes.Bridge, vlan)
	var uid string
	testVMs(t, agent, []resource.TestStep{
		{
			Config: cfg(bridge),
			ConfigStateChecks: []statecheck.StateCheck{
				expectStatus(apiv1.PrintableRunning),
				statecheck.ExpectKnownValue(vmAddr, iface("bridge", "name"), knownvalue.StringExact(agent.Nodes.Bridge)),
				statecheck.ExpectKnownValue(vmAddr, iface("bridge", "vlan"), vlanCheck),
				statecheck.ExpectKnownValue(vmAddr, iface("network"), knownvalue.Null()),
				statecheck.ExpectKnownValue(vmAddr, iface("port_forward"), knownvalue.ListSizeExact(0)),
				statecheck.ExpectKnownValue(vmAddr, statusIface("name"), knownvalue.StringExact("lan")),
			},
			Check: resource.ComposeTestCheckFunc(macReported, instanceUID(agent, name, &uid), guestBooted(t, agent, name, ""),
				instanceCheck(agent, name, func(vmi *apiv1.VirtualMachineInstance) error {
					if b := vmi.GetSpec().GetNetworks()[0].GetBridge(); b.GetBridge() != agent.Nodes.Bridge {
						return fmt.Errorf("the instance's network is %v, want bridge %s", vmi.GetSpec().GetNetworks()[0], agent.Nodes.Bridge)
					}
					return nil
				})),
		},
		{
			ResourceName:            vmAddr,
			ImportState:             true,
			ImportStateVerify:       true,
			ImportStateVerifyIgnore: []string{"status.interfaces"},
		},
		{
			Config: cfg(""),
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectResourceAction(vmAddr, plancheck.ResourceActionUpdate),
				plancheck.ExpectKnownValue(vmAddr, iface("bridge"), knownvalue.Null()),
			}},
			ConfigStateChecks: []statecheck.StateCheck{expectStatus(apiv1.PrintableRunning)},
			Check: resource.ComposeTestCheckFunc(guestBooted(t, agent, name, ""),
				instanceCheck(agent, name, func(vmi *apiv1.VirtualMachineInstance) error {
					switch {
					case vmi.GetMetadata().GetUid() == uid:
						return fmt.Errorf("%s still runs instance %s: changing the kind did not restart it", name, uid)
					case vmi.GetSpec().GetNetworks()[0].GetUser() == nil:
						return fmt.Errorf("the new instance's network is %v, want user-mode", vmi.GetSpec().GetNetworks()[0])
					}
					return nil
				})),
		},
	})
}

// A libvirt network interface runs on nodes where the network is active
// and reads back on import.
func TestAccVirtualMachine_libvirtNetwork(t *testing.T) {
	agent := acctest.SharedAgent(t)
	if agent.Nodes.Network == "" {
		t.Skip("the nodes have no libvirt network for tests: fake nodes have one; real ones are the host, whose networks a test guest must not join")
	}
	name := acctest.RandomName("net")
	cfg := vmConfig(agent, name, guestBody(agent, guestMemory, fmt.Sprintf(`
  interface {
    name  = "nat"
    model = "e1000"
    network {
      name = %q
    }
  }`, agent.Nodes.Network)))
	testVMs(t, agent, []resource.TestStep{
		{
			Config: cfg,
			ConfigStateChecks: []statecheck.StateCheck{
				expectStatus(apiv1.PrintableRunning),
				statecheck.ExpectKnownValue(vmAddr, iface("network", "name"), knownvalue.StringExact(agent.Nodes.Network)),
				statecheck.ExpectKnownValue(vmAddr, iface("bridge"), knownvalue.Null()),
				statecheck.ExpectKnownValue(vmAddr, iface("model"), knownvalue.StringExact("e1000")),
			},
			Check: resource.ComposeTestCheckFunc(macReported, guestBooted(t, agent, name, "")),
		},
		{
			ResourceName:            vmAddr,
			ImportState:             true,
			ImportStateVerify:       true,
			ImportStateVerifyIgnore: []string{"status.interfaces"},
		},
	})
}

// A bridge no node has: create fails at once with the placement message
// naming the bridge, and the VM is tainted, not forgotten (destroy finds
// it).
func TestAccVirtualMachine_bridgeNoNodeHas(t *testing.T) {
	agent := acctest.SharedAgent(t)
	name := acctest.RandomName("nobr")
	testVMs(t, agent, []resource.TestStep{{
		Config: vmConfig(agent, name, guestBody(agent, guestMemory, `
  interface {
    name = "lan"
    bridge {
      name = "`+acctest.NoNodeBridge+`"
    }
  }`)),
		ExpectError: errorRe(`no node can run it (ErrorUnschedulable): 0/`, `didn't have bridge `+acctest.NoNodeBridge),
	}})
}

// Issue 33, defect 6: a bridge the server's host-resource policy does not
// allow, or a forward of an address or port it does not, is refused at
// create on the attribute that names it, with what the server allows and
// the flag that changes it; nothing is created.
func TestAccVirtualMachine_hostPolicyRefusesBridgeAndForward(t *testing.T) {
	agent := acctest.SharedAgent(t)
	name := acctest.RandomName("policy")
	testVMs(t, agent, []resource.TestStep{
		{
			Config: vmConfig(agent, name, guestBody(agent, guestMemory, `
  interface {
    name = "lan"
    bridge {
      name = "`+acctest.NotAllowedBridge+`"
    }
  }`)),
			ExpectError: errorRe(`name = "`+acctest.NotAllowedBridge+`"`,
				`the agent rejected spec.template.spec.networks[0].bridge.bridge: Forbidden: bridge "`+acctest.NotAllowedBridge+`" is not one instances may attach to`,
				`(its --allowed-bridges)`),
		},
		{
			Config: vmConfig(agent, name, guestBody(agent, guestMemory, `
  interface {
    name = "default"
    port_forward {
      host_port  = 7443
      guest_port = 443
    }
  }`)),
			ExpectError: errorRe(`host_port  = 7443`,
				`the agent rejected spec.template.spec.networks[0].user.port_forwards[0].host_port: Forbidden: port 7443 is never forwarded: it is the agent's TLS API port`),
		},
	})
}
