package validation

import (
	"net/netip"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

var fwdPath = field.NewPath("spec", "template", "spec", "networks").Index(0).Child("user", "port_forwards").Index(1)

// checkForward runs p.CheckForward on a forward of addr:port/protocol and
// returns the fields refused with their details.
func checkForward(p *HostPolicy, addr string, port int32, protocol string) map[string]string {
	out := map[string]string{}
	for _, e := range p.CheckForward(&apiv1.PortForward{HostAddress: addr, HostPort: port, GuestPort: 80, Protocol: protocol}, fwdPath) {
		if e.Type != field.ErrorTypeForbidden {
			out[e.Field] = "not Forbidden: " + e.Error()
			continue
		}
		out[e.Field] = e.Detail
	}
	return out
}

// Issue 33, defect 6: by default a VM author may forward only 127.0.0.1
// on unprivileged ports, never the agent's, etcd's, libvirtd's or QEMU's
// migration ports, and attach to no bridge or libvirt network; each
// refusal names its field, what the server allows and the flag that
// changes it.
func TestDefaultHostPolicy(t *testing.T) {
	p := DefaultHostPolicy()
	addr, port := fwdPath.Child("host_address").String(), fwdPath.Child("host_port").String()
	for _, tc := range []struct {
		addr     string
		port     int32
		protocol string
		want     map[string]string // field → a part of its detail
	}{
		{"", 18080, "", nil},
		{"127.0.0.1", 1024, "udp", nil},
		{"127.0.0.1", 65535, "tcp", nil},
		{"127.0.0.1", 49216, "", nil}, // just past QEMU's migration ports
		{"0.0.0.0", 18080, "", map[string]string{addr: "0.0.0.0 is not an address port forwards may bind; the server allows 127.0.0.1 (its --port-forward-addresses)"}},
		{"127.0.0.2", 18080, "", map[string]string{addr: "--port-forward-addresses"}},
		{"192.168.1.10", 18080, "", map[string]string{addr: "--port-forward-addresses"}},
		{"", 80, "", map[string]string{port: "port 80 is not one port forwards may bind; the server allows 1024-65535 (its --port-forward-ports)"}},
		{"", 1023, "udp", map[string]string{port: "--port-forward-ports"}},
		{"0.0.0.0", 7443, "", map[string]string{addr: "--port-forward-addresses", port: "port 7443 is never forwarded: it is the agent's TLS API port"}},
		{"", 9464, "", map[string]string{port: "the agent's metrics port"}},
		{"", 2379, "", map[string]string{port: "etcd's client port"}},
		{"", 2380, "", map[string]string{port: "etcd's peer port"}},
		{"", 16509, "", map[string]string{port: "libvirtd's TCP port"}},
		{"", 16514, "udp", map[string]string{port: "libvirtd's TLS port"}},
		{"", 49152, "", map[string]string{port: "QEMU's live migration ports"}},
		{"", 49215, "", map[string]string{port: "QEMU's live migration ports"}},
		{"localhost", 18080, "", map[string]string{fwdPath.String(): "binds no host address and port"}},
		{"", 0, "", map[string]string{fwdPath.String(): "binds no host address and port"}},
	} {
		got := checkForward(p, tc.addr, tc.port, tc.protocol)
		if len(got) != len(tc.want) {
			t.Errorf("%s:%d/%s: refused %v, want %v", tc.addr, tc.port, tc.protocol, got, tc.want)
			continue
		}
		for f, part := range tc.want {
			if !strings.Contains(got[f], part) {
				t.Errorf("%s:%d/%s: %s: %q, want it to say %q", tc.addr, tc.port, tc.protocol, f, got[f], part)
			}
		}
	}
}

// What the operator lists is allowed, 0.0.0.0 only when listed itself;
// reserved ports stay refused whatever the ranges say, the agent's own
// configured ones (HostPolicy.Reserved) included.
func TestHostPolicyAllowLists(t *testing.T) {
	p := &HostPolicy{
		ForwardAddresses: []netip.Addr{netip.MustParseAddr("0.0.0.0"), netip.MustParseAddr("192.168.1.10")},
		ForwardPorts:     []PortRange{{80, 80}, {1, 65535}},
		Bridges:          []string{"vpguest0"},
		Networks:         []string{"isolated"},
		Reserved:         []ReservedPort{{PortRange{17443, 17443}, "the agent's TLS API port (--listen)"}},
	}
	for _, tc := range []struct {
		addr    string
		port    int32
		refused bool
	}{
		{"0.0.0.0", 80, false}, {"192.168.1.10", 22, false}, {"0.0.0.0", 65535, false},
		{"127.0.0.1", 18080, true}, // not listed: 0.0.0.0 is not "any address"
		{"", 18080, true},          // the default address is not listed either
		{"0.0.0.0", 7443, true}, {"0.0.0.0", 16509, true}, {"0.0.0.0", 49200, true},
		{"0.0.0.0", 17443, true},
	} {
		if got := checkForward(p, tc.addr, tc.port, ""); (len(got) > 0) != tc.refused {
			t.Errorf("%s:%d: refused %v, want refused %v", tc.addr, tc.port, got, tc.refused)
		}
	}
	if got := checkForward(p, "0.0.0.0", 17443, ""); !strings.Contains(got[fwdPath.Child("host_port").String()], "it is the agent's TLS API port (--listen)") {
		t.Errorf("a configured agent port: %v", got)
	}

	spec := &apiv1.VirtualMachineInstanceSpec{Networks: []*apiv1.Network{
		{Name: "a", Bridge: &apiv1.BridgeNetwork{Bridge: "vpguest0"}},
		{Name: "b", Bridge: &apiv1.BridgeNetwork{Bridge: "docker0"}},
		{Name: "c", Network: &apiv1.LibvirtNetwork{Name: "isolated"}},
		{Name: "d", Network: &apiv1.LibvirtNetwork{Name: "default"}},
		{Name: "e", User: &apiv1.UserNetwork{PortForwards: []*apiv1.PortForward{{HostPort: 22, GuestPort: 22, HostAddress: "0.0.0.0"}, {HostPort: 16514, GuestPort: 1}}}},
	}}
	tspec := field.NewPath("spec", "template", "spec")
	want := []string{
		`spec.template.spec.networks[1].bridge.bridge: Forbidden: bridge "docker0" is not one instances may attach to; the server allows vpguest0 (its --allowed-bridges)`,
		`spec.template.spec.networks[3].network.name: Forbidden: libvirt network "default" is not one instances may attach to; the server allows isolated (its --allowed-networks)`,
		`spec.template.spec.networks[4].user.port_forwards[1].host_address: Forbidden: 127.0.0.1 is not an address port forwards may bind; the server allows 0.0.0.0, 192.168.1.10 (its --port-forward-addresses)`,
		`spec.template.spec.networks[4].user.port_forwards[1].host_port: Forbidden: port 16514 is never forwarded: it is libvirtd's TLS port, which migrations use`,
	}
	errs := p.Check(spec, tspec)
	if len(errs) != len(want) {
		t.Fatalf("Check = %v, want %d errors", errs, len(want))
	}
	for i, e := range errs {
		if e.Error() != want[i] {
			t.Errorf("error %d:\n got %s\nwant %s", i, e.Error(), want[i])
		}
	}

	none := DefaultHostPolicy().Check(spec, tspec)
	if got := none[0].Error(); !strings.Contains(got, "the server allows none (its --allowed-bridges)") {
		t.Errorf("default policy on a bridge: %s", got)
	}
}

// The API server sets a policy in validation.Options and every kind that
// stores a spec checks it, at the spec's own path; without one (clients,
// which do not know the server's) it is not checked.
func TestHostPolicyInValidation(t *testing.T) {
	vm := validVM()
	tspecOf(vm).Networks[0].User.PortForwards = []*apiv1.PortForward{{HostPort: 7443, GuestPort: 443, HostAddress: "0.0.0.0"}}
	if errs := ValidateVirtualMachine(vm, Options{}); len(errs) > 0 {
		t.Fatalf("without a policy: %v", errs)
	}
	opts := Options{HostPolicy: DefaultHostPolicy()}
	base := "spec.template.spec.networks[0].user.port_forwards[0]"
	wantFields(t, ValidateVirtualMachine(vm, opts), base+".host_address", base+".host_port")

	rs := &apiv1.VirtualMachineInstanceReplicaSet{
		Metadata: &apiv1.ObjectMeta{Name: "web", Namespace: "prod"},
		Spec: &apiv1.VirtualMachineInstanceReplicaSetSpec{
			Selector: &apiv1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: &apiv1.VirtualMachineInstanceTemplateSpec{Metadata: vm.Spec.Template.Metadata, Spec: tspecOf(vm)},
		},
	}
	rs.Spec.Template.Spec.Volumes[1] = &apiv1.Volume{Name: "data", Image: &apiv1.ImageVolume{Name: "data.qcow2"}}
	rs.Spec.Template.Spec.Domain.Devices.Interfaces[0].MacAddress = ""
	wantFields(t, ValidateReplicaSet(rs, opts), base+".host_address", base+".host_port")

	pool := &apiv1.VirtualMachinePool{
		Metadata: &apiv1.ObjectMeta{Name: "db", Namespace: "prod"},
		Spec: &apiv1.VirtualMachinePoolSpec{
			Selector:               &apiv1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			VirtualMachineTemplate: &apiv1.VirtualMachineTemplateSpec{Metadata: vm.Spec.Template.Metadata, Spec: vm.Spec},
		},
	}
	pbase := "spec.virtual_machine_template.spec.template.spec.networks[0].user.port_forwards[0]"
	wantFields(t, ValidatePool(pool, opts), pbase+".host_address", pbase+".host_port")
}

// wantFields fails unless errs are exactly refusals of fields.
func wantFields(t *testing.T, errs field.ErrorList, fields ...string) {
	t.Helper()
	var got []string
	for _, e := range errs {
		got = append(got, e.Field)
	}
	if strings.Join(got, " ") != strings.Join(fields, " ") {
		t.Errorf("refused %v (%v), want %v", got, errs, fields)
	}
}

func TestParsePortRange(t *testing.T) {
	for s, want := range map[string]PortRange{"8080": {8080, 8080}, "1024-65535": {1024, 65535}, "1-1": {1, 1}, " 80 - 90 ": {80, 90}} {
		got, err := ParsePortRange(s)
		if err != nil || got != want {
			t.Errorf("ParsePortRange(%q) = %v, %v; want %v", s, got, err, want)
		}
		if back, err := ParsePortRange(got.String()); err != nil || back != got {
			t.Errorf("%v: String %q does not read back: %v, %v", got, got.String(), back, err)
		}
	}
	for _, s := range []string{"", "0", "0-10", "65536", "90-80", "a", "1-2-3", "-5", "80-", "1024,2048"} {
		if got, err := ParsePortRange(s); err == nil {
			t.Errorf("ParsePortRange(%q) = %v, want an error", s, got)
		}
	}
}

func TestHostPortOverlaps(t *testing.T) {
	hp := func(addr string, port uint16, protocol string) HostPort {
		return HostPort{Protocol: protocol, Addr: netip.MustParseAddr(addr), Port: port}
	}
	for _, tc := range []struct {
		a, b HostPort
		want bool
	}{
		{hp("127.0.0.1", 80, "tcp"), hp("127.0.0.1", 80, "tcp"), true},
		{hp("0.0.0.0", 80, "tcp"), hp("127.0.0.1", 80, "tcp"), true},
		{hp("127.0.0.2", 80, "tcp"), hp("0.0.0.0", 80, "tcp"), true},
		{hp("::", 80, "tcp"), hp("127.0.0.1", 80, "tcp"), true},
		{hp("127.0.0.1", 80, "tcp"), hp("127.0.0.2", 80, "tcp"), false},
		{hp("0.0.0.0", 80, "tcp"), hp("0.0.0.0", 80, "udp"), false},
		{hp("0.0.0.0", 80, "tcp"), hp("0.0.0.0", 81, "tcp"), false},
	} {
		if tc.a.Overlaps(tc.b) != tc.want || tc.b.Overlaps(tc.a) != tc.want {
			t.Errorf("%s overlaps %s: want %v both ways", tc.a, tc.b, tc.want)
		}
		// What overlaps is in one slot: indexes compare within it only.
		if tc.want && tc.a.Slot() != tc.b.Slot() {
			t.Errorf("%s and %s overlap in slots %v and %v", tc.a, tc.b, tc.a.Slot(), tc.b.Slot())
		}
	}
	spec := &apiv1.VirtualMachineInstanceSpec{Networks: []*apiv1.Network{
		{Name: "a", User: &apiv1.UserNetwork{PortForwards: []*apiv1.PortForward{
			{HostPort: 18080, GuestPort: 80}, {HostPort: 53, Protocol: "udp", HostAddress: "0.0.0.0"},
			{HostPort: 18080, HostAddress: "127.0.0.1", Protocol: "tcp"}, {HostPort: 1, HostAddress: "localhost"}, {HostPort: 70000},
		}}},
		{Name: "b", Bridge: &apiv1.BridgeNetwork{Bridge: "br0"}},
	}}
	got := SpecHostPorts(spec)
	if len(got) != 2 || got[0].String() != "127.0.0.1:18080/tcp" || got[1].String() != "0.0.0.0:53/udp" {
		t.Errorf("SpecHostPorts = %v", got)
	}
}
