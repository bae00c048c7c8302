package fakenode_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/virtplane/terraform-provider-virtplane/agent/server"
	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
	"github.com/virtplane/terraform-provider-virtplane/internal/fakenode"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// startAgent runs an agent (API, controllers, embedded etcd) in the test
// and returns a client of it.
func startAgent(t *testing.T) *client.Client {
	t.Helper()
	dir := testutil.ShortTempDir(t)
	socket := filepath.Join(dir, "agent.sock")
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	a, err := server.Start(t.Context(), server.Options{
		DataDir: filepath.Join(dir, "data"), Socket: socket, LeaderElect: true, Logger: quiet,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		a.Shutdown(ctx)
	})
	c, err := client.Dial(t.Context(), client.Config{Endpoint: "unix://" + socket})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// createVM creates a running VM with one user-mode interface whose
// addresses follow script (fakenode.AnnotationAddresses).
func createVM(t *testing.T, c *client.Client, name, script string) {
	t.Helper()
	vm := &apiv1.VirtualMachine{
		Metadata: &apiv1.ObjectMeta{Name: name},
		Spec: &apiv1.VirtualMachineSpec{
			RunStrategy: apiv1.RunStrategyAlways,
			Template: &apiv1.VirtualMachineInstanceTemplateSpec{
				Metadata: &apiv1.ObjectMeta{Annotations: map[string]string{fakenode.AnnotationAddresses: script}},
				Spec: &apiv1.VirtualMachineInstanceSpec{
					Domain: &apiv1.DomainSpec{
						Memory:  &apiv1.Memory{Guest: "256Mi"},
						Devices: &apiv1.Devices{Interfaces: []*apiv1.Interface{{Name: "default"}}},
					},
					Networks: []*apiv1.Network{{Name: "default", User: &apiv1.UserNetwork{}}},
				},
			},
		},
	}
	if _, err := c.VMs.Create(t.Context(), &apiv1.CreateVirtualMachineRequest{Vm: vm}); err != nil {
		t.Fatal(err)
	}
}

// runningInterface waits until VM name's instance runs and returns its
// interface status, as reported at that moment.
func runningInterface(t *testing.T, c *client.Client, name string, cond func(*apiv1.InterfaceStatus) error) *apiv1.InterfaceStatus {
	t.Helper()
	var got *apiv1.InterfaceStatus
	testutil.EventuallyNoError(t, 30*time.Second, name+"'s instance running", func() error {
		vmi, err := c.VMIs.Get(t.Context(), &apiv1.GetVirtualMachineInstanceRequest{Key: &apiv1.ObjectKey{Namespace: "default", Name: name}})
		switch {
		case err != nil:
			return err
		case vmi.GetStatus().GetPhase() != apiv1.PhaseRunning:
			return fmt.Errorf("phase %q", vmi.GetStatus().GetPhase())
		case len(vmi.GetStatus().GetInterfaces()) != 1:
			return fmt.Errorf("interfaces %v", vmi.GetStatus().GetInterfaces())
		}
		got = vmi.GetStatus().GetInterfaces()[0]
		if got.GetMacAddress() != vmi.GetSpec().GetDomain().GetDevices().GetInterfaces()[0].GetMacAddress() || got.GetMacAddress() == "" {
			return fmt.Errorf("interface status %v does not carry the spec's MAC", got)
		}
		return cond(got)
	})
	return got
}

// A fake node advertises its network inventory, and reports its guests'
// interfaces: an address at once, after a scripted delay, or never with
// the scripted reason.
func TestFakeNodeNetworks(t *testing.T) {
	c := startAgent(t)
	node, err := fakenode.Start(t.Context(), c, fakenode.Options{
		Name: "fake-1", StartDelay: 50 * time.Millisecond, ShutdownDelay: 50 * time.Millisecond,
		Bridges: []string{"br1", "br0"}, Networks: []string{"default"},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(node.Stop)

	n, err := c.Nodes.Get(t.Context(), &apiv1.GetNodeRequest{Name: "fake-1"})
	if err != nil {
		t.Fatal(err)
	}
	if b, nw := n.GetStatus().GetBridges(), n.GetStatus().GetNetworks(); !slices.Equal(b, []string{"br0", "br1"}) || !slices.Equal(nw, []string{"default"}) {
		t.Errorf("node advertises bridges %v and networks %v, want [br0 br1] and [default]", b, nw)
	}

	createVM(t, c, "at-once", "")
	createVM(t, c, "later", "after:1s")
	createVM(t, c, "never", "never:cable unplugged")

	hasAddress := func(s *apiv1.InterfaceStatus) error {
		if want := fakenode.AddressFor(s.GetMacAddress()); s.GetIpAddress() != want || s.GetSource() != apiv1.InterfaceSourceAgent {
			return fmt.Errorf("interface %v, want address %s from the agent", s, want)
		}
		return nil
	}
	// Running and addressed in the same status write: the first status
	// seen running has the address.
	s := runningInterface(t, c, "at-once", func(*apiv1.InterfaceStatus) error { return nil })
	if err := hasAddress(s); err != nil || s.GetInfo() != "" || s.GetInterfaceName() != "eth0" {
		t.Errorf("at-once: %v (info %q, guest name %q)", err, s.GetInfo(), s.GetInterfaceName())
	}
	noAddress := func(info string) func(*apiv1.InterfaceStatus) error {
		return func(s *apiv1.InterfaceStatus) error {
			if s.GetIpAddress() != "" || s.GetInfo() != info {
				return fmt.Errorf("interface %v, want no address and info %q", s, info)
			}
			return nil
		}
	}
	runningInterface(t, c, "later", noAddress("the guest agent is not connected"))
	runningInterface(t, c, "never", noAddress("cable unplugged"))
	runningInterface(t, c, "later", hasAddress)
	// Started with "later", and still without one once it has its own.
	runningInterface(t, c, "never", noAddress("cable unplugged"))
}
