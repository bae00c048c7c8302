package e2e

import (
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/testguest"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// TestUserNetworkForwardAndAddresses is issue 18 through the API: a VM on
// user-mode networking with a port forward to the test guest's HTTP
// responder on the node's 127.0.0.1, and the guest agent stand-in whose
// address reaches the instance's status.interfaces (through the
// launcher's lookup, its event, the node agent's status write and the
// API's validation). Traffic stays on this host's loopback.
func TestUserNetworkForwardAndAddresses(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	port := testutil.FreePort(t, "tcp")

	vm := c.guestVM("web", apiv1.RunStrategyAlways, testguest.Cmdline(testguest.Hostname("vp-e2e-fwd"),
		testguest.Network(), testguest.HTTP(8080), testguest.GuestAgent()))
	spec := vm.GetSpec().GetTemplate().GetSpec()
	spec.Networks = []*apiv1.Network{{Name: "default", User: &apiv1.UserNetwork{PortForwards: []*apiv1.PortForward{
		{HostPort: int32(port), GuestPort: 8080},
	}}}}
	spec.Domain.Devices = &apiv1.Devices{Interfaces: []*apiv1.Interface{{Name: "default"}}}
	c.create(vm)
	vmi := c.waitRunning("web", "")
	mac := vmi.GetSpec().GetDomain().GetDevices().GetInterfaces()[0].GetMacAddress()
	if mac == "" {
		t.Fatal("the API assigned no MAC")
	}

	var got *apiv1.InterfaceStatus
	testutil.EventuallyNoError(t, bootTimeout, "the guest agent's address in status.interfaces", func() error {
		ifs := c.vmi("web").GetStatus().GetInterfaces()
		if len(ifs) != 1 {
			return fmt.Errorf("interfaces %v", ifs)
		}
		got = ifs[0]
		if got.GetIpAddress() != "10.0.2.15" || got.GetSource() != apiv1.InterfaceSourceAgent {
			return fmt.Errorf("interface %v", got)
		}
		return nil
	})
	if got.GetName() != "default" || got.GetMacAddress() != mac || got.GetInterfaceName() != "eth0" {
		t.Errorf("interface %v: want default with the MAC %s, eth0 in the guest", got, mac)
	}

	con := c.console(vmi.GetMetadata().GetUid())
	con.waitMarker(testguest.MarkerHTTPUp, bootTimeout)
	url := fmt.Sprintf("http://127.0.0.1:%d/", port)
	var body string
	testutil.EventuallyNoError(t, 30*time.Second, "an HTTP answer through the port forward", func() error {
		hc := http.Client{Timeout: 10 * time.Second}
		resp, err := hc.Get(url)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		body = string(b)
		return err
	})
	if body != "vp-e2e-fwd\n" {
		t.Errorf("GET %s = %q, want the guest's hostname", url, body)
	}
}
