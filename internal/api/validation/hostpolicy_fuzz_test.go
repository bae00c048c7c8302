package validation

import (
	"net/netip"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// FuzzHostPolicyCheckForward holds the forward policy to its definition,
// for any forward a VM author writes and any policy an operator sets (the
// flags' values, read as serve reads them): CheckForward refuses a forward
// exactly when its host side does not parse, its address is not listed,
// or its port is in no listed range or is reserved; every refusal is
// Forbidden, at the forward's own path, and says what to change.
func FuzzHostPolicyCheckForward(f *testing.F) {
	f.Add("127.0.0.1", int32(18080), "", "127.0.0.1", "1024-65535", "")
	f.Add("0.0.0.0", int32(7443), "tcp", "127.0.0.1", "1024-65535", "")
	f.Add("", int32(9464), "udp", "0.0.0.0,127.0.0.1", "1-65535", "17443")
	f.Add("::ffff:127.0.0.1", int32(49152), "", "127.0.0.1", "49152-49215", "")
	f.Add("192.168.1.10", int32(80), "sctp", "192.168.1.10,::", "80,443,8000-9000", "8443-8444")
	f.Add("fe80::1%eth0", int32(-1), "", "", "", "")
	f.Add("127.0.0.1", int32(65536), "tcp", "127.0.0.1", "65535", "1-2")
	f.Fuzz(func(t *testing.T, addr string, port int32, protocol, addrs, ranges, reserved string) {
		p := &HostPolicy{}
		for _, s := range strings.Split(addrs, ",") {
			if a, err := netip.ParseAddr(s); err == nil {
				p.ForwardAddresses = append(p.ForwardAddresses, a)
			}
		}
		for _, s := range strings.Split(ranges, ",") {
			if r, err := ParsePortRange(s); err == nil {
				if r.First < 1 || r.First > r.Last {
					t.Fatalf("ParsePortRange(%q) = %v", s, r)
				}
				p.ForwardPorts = append(p.ForwardPorts, r)
			}
		}
		for _, s := range strings.Split(reserved, ",") {
			if r, err := ParsePortRange(s); err == nil {
				p.Reserved = append(p.Reserved, ReservedPort{r, "the fuzzer's"})
			}
		}
		fw := &apiv1.PortForward{HostAddress: addr, HostPort: port, GuestPort: 80, Protocol: protocol}
		path := field.NewPath("spec", "networks").Index(3).Child("user", "port_forwards").Index(7)
		errs := p.CheckForward(fw, path)

		if fuzzForwardAllowed(p, fw) != (len(errs) == 0) {
			t.Fatalf("forward %v under %+v: refused %v; the definition says allowed=%v", fw, p, errs, len(errs) > 0)
		}
		for _, e := range errs {
			if e.Type != field.ErrorTypeForbidden || !strings.HasPrefix(e.Field, path.String()) {
				t.Fatalf("refusal %v: want Forbidden at %s or below", e, path)
			}
			if !strings.Contains(e.Detail, "--port-forward-") && !strings.Contains(e.Detail, "never forwarded") &&
				!strings.Contains(e.Detail, "binds no host address") {
				t.Fatalf("refusal %q says nothing of what to change", e.Detail)
			}
		}
	})
}

// fuzzForwardAllowed is the forward policy written out on its own, from
// the API's defaults and the policy's lists, to hold CheckForward to.
func fuzzForwardAllowed(p *HostPolicy, f *apiv1.PortForward) bool {
	addr := f.GetHostAddress()
	if addr == "" {
		addr = apiv1.DefaultPortForwardAddress
	}
	ip, err := netip.ParseAddr(addr)
	if err != nil || ip.Zone() != "" || f.GetHostPort() < 1 || f.GetHostPort() > 65535 {
		return false
	}
	listed := false
	for _, a := range p.ForwardAddresses {
		listed = listed || a == ip.Unmap()
	}
	port := uint16(f.GetHostPort())
	inRange := false
	for _, r := range p.ForwardPorts {
		inRange = inRange || (r.First <= port && port <= r.Last)
	}
	for _, r := range append(append([]ReservedPort{}, ReservedPorts...), p.Reserved...) {
		if r.First <= port && port <= r.Last {
			return false
		}
	}
	return listed && inRange
}
