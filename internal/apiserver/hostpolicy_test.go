package apiserver

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
)

// forwarding gives spec one user-mode network with forwards fs.
func forwarding(spec *apiv1.VirtualMachineInstanceSpec, fs ...*apiv1.PortForward) {
	spec.Networks = []*apiv1.Network{{Name: "default", User: &apiv1.UserNetwork{PortForwards: fs}}}
	spec.Domain.Devices.Interfaces = []*apiv1.Interface{{Name: "default"}}
}

// bridged attaches spec to bridge.
func bridged(spec *apiv1.VirtualMachineInstanceSpec, bridge string) {
	spec.Networks = []*apiv1.Network{{Name: "lan", Bridge: &apiv1.BridgeNetwork{Bridge: bridge}}}
	spec.Domain.Devices.Interfaces = []*apiv1.Interface{{Name: "lan"}}
}

// wantRefusedBy fails unless err is InvalidArgument naming every field
// of fields, and its message says what to change (part).
func wantRefusedBy(t *testing.T, err error, part string, fields ...string) {
	t.Helper()
	for _, f := range fields {
		wantInvalid(t, err, f)
	}
	if !strings.Contains(err.Error(), part) {
		t.Errorf("%v: want it to say %q", clipErr(err), part)
	}
}

// Issue 33, defect 6: by default a VM author can no longer forward
// 0.0.0.0, the agent's own ports or privileged ones, nor attach to the
// node's bridges and libvirt networks: the API refuses each on every kind
// that stores an instance spec, naming the field, what the server allows
// and the flag that changes it, and stores nothing.
func TestHostPolicyAdmission(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	tspec := "spec.template.spec.networks[0]"
	fwd0 := tspec + ".user.port_forwards[0]"

	vm := validVM("api")
	forwarding(vm.Spec.Template.Spec, &apiv1.PortForward{HostAddress: "0.0.0.0", HostPort: 7443, GuestPort: 443})
	_, err := f.vms.Create(ctx, &apiv1.CreateVirtualMachineRequest{Vm: vm})
	wantRefusedBy(t, err, "the server allows 127.0.0.1 (its --port-forward-addresses)", fwd0+".host_address", fwd0+".host_port")
	wantRefusedBy(t, err, "port 7443 is never forwarded: it is the agent's TLS API port")

	for _, tc := range []struct {
		fw   *apiv1.PortForward
		part string
	}{
		{&apiv1.PortForward{HostPort: 9464, GuestPort: 80}, "it is the agent's metrics port"},
		{&apiv1.PortForward{HostPort: 16509, GuestPort: 80}, "it is libvirtd's TCP port"},
		{&apiv1.PortForward{HostPort: 80, GuestPort: 80}, "the server allows 1024-65535 (its --port-forward-ports)"},
	} {
		vm := validVM("fwd")
		forwarding(vm.Spec.Template.Spec, tc.fw)
		_, err := f.vms.Create(ctx, &apiv1.CreateVirtualMachineRequest{Vm: vm})
		wantRefusedBy(t, err, tc.part, fwd0+".host_port")
	}

	vm = validVM("docker")
	bridged(vm.Spec.Template.Spec, "docker0")
	_, err = f.vms.Create(ctx, &apiv1.CreateVirtualMachineRequest{Vm: vm})
	wantRefusedBy(t, err, `bridge "docker0" is not one instances may attach to; the server allows none (its --allowed-bridges)`, tspec+".bridge.bridge")

	vm = validVM("nat")
	vm.Spec.Template.Spec.Networks = []*apiv1.Network{{Name: "nat", Network: &apiv1.LibvirtNetwork{Name: "default"}}}
	vm.Spec.Template.Spec.Domain.Devices.Interfaces = []*apiv1.Interface{{Name: "nat"}}
	_, err = f.vms.Create(ctx, &apiv1.CreateVirtualMachineRequest{Vm: vm})
	wantRefusedBy(t, err, "(its --allowed-networks)", tspec+".network.name")

	// An update that adds what the policy refuses loses nothing stored.
	ok := validVM("web")
	forwarding(ok.Spec.Template.Spec, &apiv1.PortForward{HostPort: 18080, GuestPort: 80})
	stored, err := f.vms.Create(ctx, &apiv1.CreateVirtualMachineRequest{Vm: ok})
	if err != nil {
		t.Fatalf("a forward of 127.0.0.1:18080, which the defaults allow: %v", err)
	}
	upd := proto.Clone(stored).(*apiv1.VirtualMachine)
	upd.Spec.Template.Spec.Networks[0].User.PortForwards[0].HostAddress = "0.0.0.0"
	_, err = f.vms.Update(ctx, &apiv1.UpdateVirtualMachineRequest{Vm: upd})
	wantRefusedBy(t, err, "--port-forward-addresses", fwd0+".host_address")
	if got, err := f.vms.Get(ctx, &apiv1.GetVirtualMachineRequest{Key: &apiv1.ObjectKey{Name: "web"}}); err != nil ||
		!proto.Equal(got, stored) {
		t.Fatalf("after the refused update: %v, %v; want it unchanged", got, err)
	}

	rs := validRS("rs")
	bridged(rs.Spec.Template.Spec, "docker0")
	_, err = f.replicaSets().Create(ctx, &apiv1.CreateReplicaSetRequest{ReplicaSet: rs})
	wantRefusedBy(t, err, "--allowed-bridges", "spec.template.spec.networks[0].bridge.bridge")

	pool := validPool("pool")
	forwarding(pool.Spec.VirtualMachineTemplate.Spec.Template.Spec, &apiv1.PortForward{HostAddress: "0.0.0.0", HostPort: 18080, GuestPort: 80})
	_, err = f.pools().Create(ctx, &apiv1.CreatePoolRequest{Pool: pool})
	wantRefusedBy(t, err, "--port-forward-addresses", "spec.virtual_machine_template.spec.template.spec.networks[0].user.port_forwards[0].host_address")

	pool = validPool("pool")
	created, err := f.pools().Create(ctx, &apiv1.CreatePoolRequest{Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	bridged(created.Spec.VirtualMachineTemplate.Spec.Template.Spec, "docker0")
	_, err = f.pools().Update(ctx, &apiv1.UpdatePoolRequest{Pool: created})
	wantRefusedBy(t, err, "--allowed-bridges", "spec.virtual_machine_template.spec.template.spec.networks[0].bridge.bridge")

	for _, name := range []string{"api", "fwd", "docker", "nat"} {
		if _, err := f.vms.Get(ctx, &apiv1.GetVirtualMachineRequest{Key: &apiv1.ObjectKey{Name: name}}); code(err) != codes.NotFound {
			t.Errorf("refused VM %s: Get = %v, want NotFound", name, err)
		}
	}
}

// What the operator allows is admitted, and the policy the server was
// given is the one it applies (not the defaults).
func TestHostPolicyAdmitsWhatTheOperatorAllows(t *testing.T) {
	policy := validation.DefaultHostPolicy()
	policy.ForwardAddresses = append(policy.ForwardAddresses, netip.MustParseAddr("0.0.0.0"))
	policy.Bridges = []string{"vpguest0"}
	policy.Reserved = []validation.ReservedPort{{PortRange: validation.PortRange{First: 17443, Last: 17443}, Owner: "the agent's TLS API port (--listen)"}}
	f := newFixtureWith(t, Options{Validation: validation.Options{HostPolicy: policy}})
	ctx := context.Background()

	vm := validVM("pub")
	forwarding(vm.Spec.Template.Spec, &apiv1.PortForward{HostAddress: "0.0.0.0", HostPort: 18080, GuestPort: 80})
	if _, err := f.vms.Create(ctx, &apiv1.CreateVirtualMachineRequest{Vm: vm}); err != nil {
		t.Fatalf("0.0.0.0 allowed: %v", err)
	}
	vm = validVM("guest")
	bridged(vm.Spec.Template.Spec, "vpguest0")
	if _, err := f.vms.Create(ctx, &apiv1.CreateVirtualMachineRequest{Vm: vm}); err != nil {
		t.Fatalf("vpguest0 allowed: %v", err)
	}
	vm = validVM("own")
	forwarding(vm.Spec.Template.Spec, &apiv1.PortForward{HostAddress: "0.0.0.0", HostPort: 17443, GuestPort: 80})
	_, err := f.vms.Create(ctx, &apiv1.CreateVirtualMachineRequest{Vm: vm})
	wantRefusedBy(t, err, "it is the agent's TLS API port (--listen)", "spec.template.spec.networks[0].user.port_forwards[0].host_port")
}
