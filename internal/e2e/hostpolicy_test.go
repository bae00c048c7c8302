package e2e

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/testguest"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// TestHostResourcePolicy is issue 33's defect 6 through the real agent
// (the server's flags' defaults, the node agent, launcher, libvirtd and
// QEMU), as a VM author would attack it. Forwards of 0.0.0.0:7443 (the
// agent's TLS API everywhere), of the agent's metrics port as this server
// is configured, and a VM on the node's docker0 are refused at create,
// naming the field and the flag. Two VMs forwarding the same host port on
// a one-node cluster: the first runs and serves it; the second waits,
// Unschedulable with the port in the reason, and runs once the first is
// deleted, serving the port in its turn. Traffic stays on loopback.
func TestHostResourcePolicy(t *testing.T) {
	t.Parallel()
	metrics := testutil.FreePort(t, "tcp")
	c := newCluster(t, clusterOptions{metricsListen: fmt.Sprintf("127.0.0.1:%d", metrics)})

	tspec := "spec.template.spec.networks[0]"
	fwd := tspec + ".user.port_forwards[0]"
	for _, tc := range []struct {
		name   string
		net    *apiv1.Network
		fields []string
		says   string
	}{
		{"api", forwardNet(&apiv1.PortForward{HostAddress: "0.0.0.0", HostPort: 7443, GuestPort: 8080}),
			[]string{fwd + ".host_address", fwd + ".host_port"}, "the server allows 127.0.0.1 (its --port-forward-addresses)"},
		{"metrics", forwardNet(&apiv1.PortForward{HostPort: int32(metrics), GuestPort: 8080}),
			[]string{fwd + ".host_port"}, fmt.Sprintf("port %d is never forwarded: it is the agent's metrics port (--metrics-listen)", metrics)},
		{"docker", &apiv1.Network{Name: "default", Bridge: &apiv1.BridgeNetwork{Bridge: "docker0"}},
			[]string{tspec + ".bridge.bridge"}, `bridge "docker0" is not one instances may attach to; the server allows none (its --allowed-bridges)`},
	} {
		vm := c.guestVM(tc.name, apiv1.RunStrategyAlways, testguest.Cmdline())
		attach(vm, tc.net)
		_, err := c.api.VMs.Create(c.ctx, &apiv1.CreateVirtualMachineRequest{Vm: vm})
		if err == nil {
			// Gone at once: its forward must not hold the port.
			_, derr := c.api.VMs.Delete(c.ctx, &apiv1.DeleteVirtualMachineRequest{Key: c.key(tc.name)})
			t.Errorf("VM %s: created (delete: %v); want InvalidArgument saying %q", tc.name, derr, tc.says)
			continue
		}
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tc.says) {
			t.Fatalf("VM %s: %v; want InvalidArgument saying %q", tc.name, err, tc.says)
		}
		var got []string
		for _, v := range validation.FieldViolations(err) {
			got = append(got, v.GetField())
		}
		if strings.Join(got, " ") != strings.Join(tc.fields, " ") {
			t.Errorf("VM %s: refused fields %v, want %v", tc.name, got, tc.fields)
		}
		if _, err := c.api.VMs.Get(c.ctx, &apiv1.GetVirtualMachineRequest{Key: c.key(tc.name)}); status.Code(err) != codes.NotFound {
			t.Errorf("VM %s: Get after the refusal: %v, want NotFound", tc.name, err)
		}
	}

	port := testutil.FreePort(t, "tcp")
	served := func(name string) *apiv1.VirtualMachine {
		vm := c.guestVM(name, apiv1.RunStrategyAlways, testguest.Cmdline(testguest.Hostname("vp-e2e-"+name),
			testguest.Network(), testguest.HTTP(8080)))
		return attach(vm, forwardNet(&apiv1.PortForward{HostPort: int32(port), GuestPort: 8080}))
	}
	c.create(served("first"))
	c.waitRunning("first", "")
	c.create(served("second"))
	want := fmt.Sprintf("0/1 nodes are available: 1 node(s) had the host port 127.0.0.1:%d/tcp in use.", port)
	testutil.EventuallyNoError(t, stateTimeout, "second unschedulable for the port", func() error {
		v := c.vmi("second")
		cond := apiv1.FindCondition(v.GetStatus().GetConditions(), apiv1.ConditionPodScheduled)
		if v.GetStatus().GetNodeName() != "" || cond.GetStatus() != apiv1.ConditionFalse || cond.GetMessage() != want {
			return fmt.Errorf("node %q, PodScheduled %v", v.GetStatus().GetNodeName(), cond)
		}
		return nil
	})
	c.waitPrintable("second", apiv1.PrintableErrorUnschedulable, stateTimeout)
	// The port is first's while second waits.
	c.waitHTTP(port, "vp-e2e-first\n")
	if v := c.vmi("second"); v.GetStatus().GetNodeName() != "" {
		t.Fatalf("second placed on %s while first holds the port", v.GetStatus().GetNodeName())
	}

	if _, err := c.api.VMs.Delete(c.ctx, &apiv1.DeleteVirtualMachineRequest{Key: c.key("first")}); err != nil {
		t.Fatal(err)
	}
	c.waitRunning("second", "")
	c.waitHTTP(port, "vp-e2e-second\n")
}

// forwardNet is a user-mode network named default with forward f.
func forwardNet(f *apiv1.PortForward) *apiv1.Network {
	return &apiv1.Network{Name: "default", User: &apiv1.UserNetwork{PortForwards: []*apiv1.PortForward{f}}}
}

// attach gives vm network n, named default, as its one interface.
func attach(vm *apiv1.VirtualMachine, n *apiv1.Network) *apiv1.VirtualMachine {
	spec := vm.GetSpec().GetTemplate().GetSpec()
	spec.Networks = []*apiv1.Network{n}
	spec.Domain.Devices = &apiv1.Devices{Interfaces: []*apiv1.Interface{{Name: "default"}}}
	return vm
}

// waitHTTP waits until http://127.0.0.1:port/ answers want: a guest's
// HTTP responder through its forward.
func (c *cluster) waitHTTP(port int, want string) {
	c.t.Helper()
	url := fmt.Sprintf("http://127.0.0.1:%d/", port)
	testutil.EventuallyNoError(c.t, bootTimeout, url+" answering "+strings.TrimSpace(want), func() error {
		hc := http.Client{Timeout: 10 * time.Second}
		resp, err := hc.Get(url)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || string(b) != want {
			return fmt.Errorf("%q, %v", b, err)
		}
		return nil
	})
}
