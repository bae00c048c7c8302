package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"libvirt.org/go/libvirtxml"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/bench"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller/vmi"
	"github.com/virtplane/terraform-provider-virtplane/internal/pki"
	"github.com/virtplane/terraform-provider-virtplane/internal/testguest"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil/multinode"
)

// Bridged guests on the harness's guests' segment, which exists only
// inside namespaces the harness made, at addresses of its TEST-NET-1
// subnet (multinode.HubGuestAddr).
var bridgedGuests = []struct{ name, addr string }{
	{"web-a", "192.0.2.1"},
	{"web-b", "192.0.2.2"},
}

// TestBridgedGuests: two VMs on the nodes' bridge (multinode.GuestBridge),
// created by terraform with wait_for_ip, one on each node, reach each
// other and the hub; their addresses (from the guest agent) are in the
// Terraform state, a data source and `get vmi`; one live-migrates to the
// other's node and keeps its MAC and address and still answers. A VM asking for a bridge that no node
// has is Unschedulable, saying so.
func TestBridgedGuests(t *testing.T) {
	providerDir := buildProviderAsync(t)
	// br-none: allowed by the host-resource policy (beside the guests'
	// bridge, which the harness allows), but no node has it.
	c := newMultiNodeCluster(t, mnOptions{serverArgs: []string{"--allowed-bridges", "br-none"}})
	t.Cleanup(c.dumpOnFailure)

	// Every node offers the bridge of its libvirtd's namespace.
	testutil.EventuallyNoError(t, stateTimeout, "the nodes offering "+multinode.GuestBridge, func() error {
		for _, n := range c.nodes {
			got, err := c.api.Nodes.Get(c.ctx, &apiv1.GetNodeRequest{Name: n.Name})
			if err != nil {
				return err
			}
			if !slices.Contains(got.GetStatus().GetBridges(), multinode.GuestBridge) {
				return fmt.Errorf("node %s offers bridges %v", n.Name, got.GetStatus().GetBridges())
			}
		}
		return nil
	})

	nowhere := guestVM(c.ns, "nowhere", apiv1.RunStrategyAlways, c.nodes[0].Kernel, testguest.Cmdline())
	onBridge(nowhere, "br-none")
	c.create(nowhere)
	want := fmt.Sprintf("0/%d nodes are available: %d node(s) didn't have bridge br-none.", len(c.nodes), len(c.nodes))
	testutil.EventuallyNoError(t, stateTimeout, "nowhere unschedulable", func() error {
		cond := apiv1.FindCondition(c.vmi("nowhere").GetStatus().GetConditions(), apiv1.ConditionPodScheduled)
		if cond.GetReason() != vmi.ReasonUnschedulable || cond.GetMessage() != want {
			return fmt.Errorf("scheduled condition %v, want Unschedulable: %q", cond, want)
		}
		return nil
	})

	out := c.applyBridged(providerDir())
	for _, g := range bridgedGuests {
		if got := out[g.name+"_ip"]; got != g.addr {
			t.Errorf("terraform output %s_ip = %q, want %s (outputs %v)", g.name, got, g.addr, out)
		}
		if got := out[g.name+"_data_ip"]; got != g.addr {
			t.Errorf("terraform output %s_data_ip (data source) = %q, want %s", g.name, got, g.addr)
		}
	}
	a, b := c.vmi("web-a"), c.vmi("web-b")
	if a.GetStatus().GetNodeName() == b.GetStatus().GetNodeName() {
		t.Fatalf("both guests on %s; the test wants one per node", a.GetStatus().GetNodeName())
	}

	// web-b fetched web-a's page over the bridge when it booted.
	bNode := c.nodeNamed(b.GetStatus().GetNodeName())
	con := bNode.console(t, b.GetMetadata().GetUid())
	con.waitMarker(testguest.MarkerNetProbeDone, bootTimeout)
	probes, _ := testguest.NetProbes(con.text())
	if p := probes[bridgedGuests[0].addr+":80"]; !p.Reached || p.Body != "web-a" {
		t.Fatalf("web-b's probe of web-a: %+v (console:\n%s)", p, con.text())
	}
	for _, g := range bridgedGuests {
		c.hubReaches(g.name, g.addr)
	}

	// get vmi shows the addresses.
	table := c.cli("get", "vmi")
	for _, g := range bridgedGuests {
		if !strings.Contains(table, g.addr) {
			t.Errorf("get vmi does not show %s:\n%s", g.addr, table)
		}
	}

	// web-b moves to web-a's node: same MAC, same address, still
	// answering.
	mac := b.GetStatus().GetInterfaces()[0].GetMacAddress()
	to := c.otherNode(bNode)
	c.migrate("web-b", to)
	testutil.EventuallyNoError(t, stateTimeout, "web-b's address on "+to.Name, func() error {
		st := c.vmi("web-b").GetStatus()
		if st.GetNodeName() != to.Name || len(st.GetInterfaces()) != 1 {
			return fmt.Errorf("on %s, interfaces %v", st.GetNodeName(), st.GetInterfaces())
		}
		i := st.GetInterfaces()[0]
		if i.GetMacAddress() != mac || i.GetIpAddress() != bridgedGuests[1].addr {
			return fmt.Errorf("interface %v, want MAC %s and %s", i, mac, bridgedGuests[1].addr)
		}
		return nil
	})
	c.hubReaches("web-b", bridgedGuests[1].addr)
}

// onBridge connects vm's first interface to bridge br instead of
// user-mode networking, adding the interface if it has none.
func onBridge(vm *apiv1.VirtualMachine, br string) {
	spec := vm.GetSpec().GetTemplate().GetSpec()
	spec.Networks = []*apiv1.Network{{Name: "lan", Bridge: &apiv1.BridgeNetwork{Bridge: br}}}
	if spec.Domain.Devices == nil {
		spec.Domain.Devices = &apiv1.Devices{}
	}
	spec.Domain.Devices.Interfaces = []*apiv1.Interface{{Name: "lan"}}
}

// hubReaches fetches http://addr/ from the hub namespace, on the guests'
// segment, and checks that guest name answered.
func (c *mnCluster) hubReaches(name, addr string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(c.ctx, time.Minute)
	defer cancel()
	testutil.EventuallyNoError(c.t, time.Minute, name+" answering at "+addr, func() error {
		out, err := c.nodes[0].HubExec(ctx, "curl", "-sS", "--max-time", "5", "http://"+addr+"/")
		if err != nil || strings.TrimSpace(string(out)) != name {
			return fmt.Errorf("curl http://%s/: %v: %s", addr, err, out)
		}
		return nil
	})
}

// cli runs the CLI against the first server in the test's namespace.
func (c *mnCluster) cli(args ...string) string {
	c.t.Helper()
	out, err := exec.CommandContext(c.ctx, env.agent, append([]string{"--endpoint", "unix://" + c.Servers[0].Socket, "--namespace", c.ns}, args...)...).CombinedOutput()
	if err != nil {
		c.t.Fatalf("virtplane-agent %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// applyBridged creates the bridged guests with the real terraform CLI,
// waiting for their addresses (wait_for_ip), one guest per node, and
// returns the outputs: each guest's address from its resource and from a
// data source.
func (c *mnCluster) applyBridged(providerDir string) map[string]string {
	c.t.Helper()
	tf, err := bench.NewTerraform(filepath.Join(c.t.TempDir(), "tf"), providerDir)
	if err != nil {
		c.t.Fatal(err)
	}
	p := pki.PathsIn(filepath.Join(c.Servers[0].DataDir, "pki"))
	var b strings.Builder
	fmt.Fprintf(&b, `terraform {
  required_providers {
    virtplane = { source = "virtplane/virtplane" }
  }
}

provider "virtplane" {
  endpoints  = [%q]
  token_file = %q
  ca_file    = %q
}
`, c.ServerEndpoints()[0], p.Token, p.CACert)
	for i, g := range bridgedGuests {
		opts := []testguest.Option{
			testguest.Hostname(g.name), testguest.StaticIP(netip.MustParsePrefix(g.addr+"/24"), netip.Addr{}),
			testguest.HTTP(80), testguest.GuestAgent(),
		}
		if i > 0 {
			opts = append(opts, testguest.NetProbe(bridgedGuests[0].addr+":80"))
		}
		// web-a is pinned to the first node; web-b comes once web-a
		// answers (its probe fetches web-a's page at boot), unpinned, so
		// placement spreads it to the other node and it may migrate.
		placement := fmt.Sprintf("node_selector = { %q = %q }", apiv1.LabelNodeName, c.nodes[0].Name)
		if i > 0 {
			placement = "depends_on = [virtplane_virtual_machine." + bridgedGuests[0].name + "]"
		}
		fmt.Fprintf(&b, `
resource "virtplane_virtual_machine" %[1]q {
  name          = %[1]q
  namespace     = %[2]q
  memory        = %[3]q
  %[4]s
  boot {
    kernel  = %[5]q
    initrd  = %[6]q
    cmdline = %[7]q
  }
  interface {
    name = "lan"
    bridge {
      name = %[8]q
    }
  }
  wait_for_ip {
    timeout = "4m"
  }
}

data "virtplane_virtual_machine" %[1]q {
  name      = virtplane_virtual_machine.%[1]s.name
  namespace = %[2]q
}

output "%[1]s_ip" {
  value = virtplane_virtual_machine.%[1]s.status.interfaces[0].ip_address
}

output "%[1]s_data_ip" {
  value = data.virtplane_virtual_machine.%[1]s.status.interfaces[0].ip_address
}
`, g.name, c.ns, guestMemory, placement, c.nodes[i].Kernel, testguest.InitrdFile,
			testguest.Cmdline(opts...), multinode.GuestBridge)
	}
	if err := tf.WriteConfig(b.String()); err != nil {
		c.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(c.ctx, 8*time.Minute)
	defer cancel()
	took, out, err := tf.Run(ctx, "apply", "-auto-approve", "-no-color")
	if err != nil {
		c.t.Fatalf("terraform apply: %v\n%s", err, out)
	}
	report(c.t, "terraform apply of %d bridged guests, waiting for their addresses: %s", len(bridgedGuests), took.Round(time.Millisecond))
	// A refresh reads the addresses without waiting for anything.
	took, out, err = tf.Run(ctx, "plan", "-refresh-only", "-no-color")
	if err != nil {
		c.t.Fatalf("terraform plan -refresh-only: %v\n%s", err, out)
	}
	report(c.t, "terraform plan -refresh-only: %s", took.Round(time.Millisecond))
	_, js, err := tf.Run(ctx, "output", "-json")
	if err != nil {
		c.t.Fatalf("terraform output: %v\n%s", err, js)
	}
	var raw map[string]struct {
		Value any `json:"value"`
	}
	if err := json.Unmarshal([]byte(js), &raw); err != nil {
		c.t.Fatalf("terraform output -json: %v\n%s", err, js)
	}
	outs := map[string]string{}
	for k, v := range raw {
		outs[k] = fmt.Sprint(v.Value)
	}
	return outs
}

// TestLibvirtNetworkGuest: a libvirt network defined on one node's
// private libvirtd (isolated, DHCP on TEST-NET-2, inside that node's
// namespace) is advertised by that node only; a VM on it is placed
// there, gets a DHCP lease, which its status reports (source lease,
// without a guest agent), and answers on it.
func TestLibvirtNetworkGuest(t *testing.T) {
	const netName = "vplan"
	// The host-resource policy allows no libvirt network unless told.
	c := newMultiNodeCluster(t, mnOptions{serverArgs: []string{"--allowed-networks", netName}})
	t.Cleanup(c.dumpOnFailure)
	host := c.nodes[1]
	def := libvirtxml.Network{
		Name:   netName,
		Bridge: &libvirtxml.NetworkBridge{Name: "vplanbr0", STP: "off"},
		IPs: []libvirtxml.NetworkIP{{
			Address: "198.51.100.1", Netmask: "255.255.255.0",
			DHCP: &libvirtxml.NetworkDHCP{Ranges: []libvirtxml.NetworkDHCPRange{{Start: "198.51.100.100", End: "198.51.100.199"}}},
		}},
	}
	x, err := def.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "net.xml")
	if err := os.WriteFile(f, []byte(x), 0o644); err != nil {
		t.Fatal(err)
	}
	// Transient: it goes with the node's libvirtd.
	if out, err := host.Virsh(c.ctx, "net-create", f); err != nil {
		t.Fatalf("virsh net-create: %v\n%s", err, out)
	}
	testutil.EventuallyNoError(t, stateTimeout, host.Name+" offering network "+netName, func() error {
		got, err := c.api.Nodes.Get(c.ctx, &apiv1.GetNodeRequest{Name: host.Name})
		if err != nil {
			return err
		}
		if !slices.Contains(got.GetStatus().GetNetworks(), netName) {
			return fmt.Errorf("node %s offers networks %v", host.Name, got.GetStatus().GetNetworks())
		}
		return nil
	})

	vm := guestVM(c.ns, "leased", apiv1.RunStrategyAlways, host.Kernel,
		testguest.Cmdline(testguest.Hostname("leased"), testguest.HTTP(80)))
	spec := vm.GetSpec().GetTemplate().GetSpec()
	spec.Networks = []*apiv1.Network{{Name: "lan", Network: &apiv1.LibvirtNetwork{Name: netName}}}
	if spec.Domain.Devices == nil {
		spec.Domain.Devices = &apiv1.Devices{}
	}
	spec.Domain.Devices.Interfaces = []*apiv1.Interface{{Name: "lan"}}
	c.create(vm)
	vmi := c.waitRunning("leased")
	if vmi.GetStatus().GetNodeName() != host.Name {
		t.Fatalf("leased runs on %s; only %s has network %s", vmi.GetStatus().GetNodeName(), host.Name, netName)
	}
	var addr string
	testutil.EventuallyNoError(t, bootTimeout, "leased's DHCP lease in its status", func() error {
		ifs := c.vmi("leased").GetStatus().GetInterfaces()
		if len(ifs) != 1 || ifs[0].GetSource() != apiv1.InterfaceSourceLease || !strings.HasPrefix(ifs[0].GetIpAddress(), "198.51.100.") {
			return fmt.Errorf("interfaces %v", ifs)
		}
		addr = ifs[0].GetIpAddress()
		return nil
	})
	// The node's own namespace holds the network's bridge: the guest
	// answers there.
	testutil.EventuallyNoError(t, time.Minute, "leased answering at "+addr, func() error {
		out, err := exec.CommandContext(c.ctx, "ip", "netns", "exec", host.NetNS, "curl", "-sS", "--max-time", "5", "http://"+addr+"/").CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "leased" {
			return fmt.Errorf("curl http://%s/: %v: %s", addr, err, out)
		}
		return nil
	})
}
