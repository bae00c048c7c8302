package e2e

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/testguest"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// TestMigrationMovesPortForward: a live migration takes a user-mode
// guest's port forward with it. QEMU's forwards are added through its
// monitor, which a migration does not carry: the target's launcher adds
// them once the guest runs there, in that node's network namespace
// (where the test reaches them with curl), and the instance keeps its
// MAC and reports the guest agent's address again from the target.
func TestMigrationMovesPortForward(t *testing.T) {
	c := newMultiNodeCluster(t, mnOptions{})
	const hostPort = 18080
	vm := c.guestVM("fwd", c.nodes[0], testguest.Cmdline(testguest.Hostname("vp-e2e-mig"),
		testguest.Network(), testguest.HTTP(8080), testguest.GuestAgent()))
	vm.Spec.Template.Spec.NodeSelector = nil // the migration picks the target
	spec := vm.GetSpec().GetTemplate().GetSpec()
	spec.Networks = []*apiv1.Network{{Name: "default", User: &apiv1.UserNetwork{PortForwards: []*apiv1.PortForward{
		{HostPort: hostPort, GuestPort: 8080},
	}}}}
	spec.Domain.Devices = &apiv1.Devices{Interfaces: []*apiv1.Interface{{Name: "default"}}}
	c.create(vm)
	vmi := c.waitRunning("fwd")
	mac := vmi.GetSpec().GetDomain().GetDevices().GetInterfaces()[0].GetMacAddress()
	from := c.nodeNamed(vmi.GetStatus().GetNodeName())
	c.waitAgentAddress("fwd", mac, from)
	c.waitHTTP(from, hostPort, "vp-e2e-mig\n")

	to := c.otherNode(from)
	c.migrate("fwd", to)
	testutil.EventuallyNoError(t, 30*time.Second, "the guest on "+to.Name+" only", func() error {
		return c.runsOnlyOn("fwd", to)
	})
	c.waitHTTP(to, hostPort, "vp-e2e-mig\n")
	c.waitAgentAddress("fwd", mac, to)
}

// waitAgentAddress waits until VM name's instance runs on n and reports
// the guest agent's 10.0.2.15 for its interface of MAC mac.
func (c *mnCluster) waitAgentAddress(name, mac string, n *mnNode) {
	c.t.Helper()
	testutil.EventuallyNoError(c.t, bootTimeout, name+"'s address from the guest agent on "+n.Name, func() error {
		st := c.vmi(name).GetStatus()
		ifs := st.GetInterfaces()
		if st.GetNodeName() != n.Name || len(ifs) != 1 || ifs[0].GetMacAddress() != mac ||
			ifs[0].GetIpAddress() != "10.0.2.15" || ifs[0].GetSource() != apiv1.InterfaceSourceAgent {
			return fmt.Errorf("on %s: interfaces %v", st.GetNodeName(), ifs)
		}
		return nil
	})
}

// waitHTTP waits until http://127.0.0.1:port/ in node n's network
// namespace (where its QEMUs listen) answers want.
func (c *mnCluster) waitHTTP(n *mnNode, port int, want string) {
	c.t.Helper()
	url := fmt.Sprintf("http://127.0.0.1:%d/", port)
	testutil.EventuallyNoError(c.t, bootTimeout, url+" on "+n.Name, func() error {
		out, err := exec.CommandContext(c.ctx, "nsenter", "--net=/run/netns/"+n.NetNS, "--",
			"curl", "-sS", "--max-time", "10", url).CombinedOutput()
		if err != nil || string(out) != want {
			return fmt.Errorf("curl in %s: %q, %v", n.NetNS, strings.TrimSpace(string(out)), err)
		}
		return nil
	})
}
