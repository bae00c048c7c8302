package driver

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
	"github.com/virtplane/terraform-provider-virtplane/launcher/internal/domxml"
	"github.com/virtplane/terraform-provider-virtplane/launcher/internal/driver/drivertest"
)

// kindsVMI has one interface of each kind: user, bridge, libvirt network.
func kindsVMI() *apiv1.VirtualMachineInstance {
	v := vmi(apiv1.PhaseScheduled)
	v.Spec.Networks = []*apiv1.Network{
		{Name: "default", User: &apiv1.UserNetwork{}},
		{Name: "lan", Bridge: &apiv1.BridgeNetwork{Bridge: "br0"}},
		{Name: "nat", Network: &apiv1.LibvirtNetwork{Name: "isolated"}},
	}
	v.Spec.Domain.Devices = &apiv1.Devices{Interfaces: []*apiv1.Interface{
		{Name: "default", MacAddress: "02:00:00:00:00:01"},
		{Name: "lan", MacAddress: "02:00:00:00:00:02"},
		{Name: "nat", MacAddress: "02:00:00:00:00:03"},
	}}
	return v
}

// connectAgent marks the guest agent's channel connected in the fake's
// live XML, as libvirt does when the guest opens the port.
func (h *harness) connectAgent() {
	h.conn.mu.Lock()
	defer h.conn.mu.Unlock()
	s := h.conn.doms[testDomain]
	s.xml = strings.Replace(s.xml, `name="`+domxml.GuestAgentChannel+`"`, `name="`+domxml.GuestAgentChannel+`" state="connected"`, 1)
}

// waitAddresses waits until the driver reports a status that cond
// accepts, stepping the fake clock whenever the address watcher waits on
// it (each step is one more lookup), and returns that status.
func (h *harness) waitAddresses(what string, cond func(st *launcherpb.DomainStatus) bool) *launcherpb.DomainStatus {
	h.t.Helper()
	var st *launcherpb.DomainStatus
	waitFor(h.t, what, func() bool {
		var err error
		if st, err = h.d.GetDomain(context.Background(), &launcherpb.Empty{}); err == nil && cond(st) {
			return true
		}
		if h.clk.HasWaiters() {
			h.clk.Step(AddressFastInterval)
		}
		return false
	})
	return st
}

func statusByName(st *launcherpb.DomainStatus) map[string]*apiv1.InterfaceStatus {
	m := map[string]*apiv1.InterfaceStatus{}
	for _, s := range st.GetInterfaces() {
		m[s.GetName()] = s
	}
	return m
}

func TestAddressesFollowTheGuest(t *testing.T) {
	h := newHarness(t)
	h.writeQEMUPid()
	ctx := context.Background()
	sub := drivertest.NewStream(ctx)
	go func() { _ = h.d.Events(&launcherpb.Empty{}, sub) }()
	sub.Next(t) // Current

	h.mustSync(kindsVMI())
	// The start makes the watcher look at once; the change is an event.
	ev := sub.WaitFor(t, "Interfaces")
	if n := len(ev.GetStatus().GetInterfaces()); n != 3 || ev.GetStatus().GetGuestAgentConnected() {
		t.Fatalf("status after the start: %v", ev.GetStatus())
	}
	h.conn.withNet(testDomain, func(n *fakeNet) {
		n.addrs[SourceLease] = []GuestInterface{{Name: domxml.TapName(testUID, "nat"), MAC: "02:00:00:00:00:03", Addrs: []string{"192.168.100.5"}}}
	})
	st := h.waitAddresses("the lease", func(st *launcherpb.DomainStatus) bool { return statusByName(st)["nat"].GetIpAddress() != "" })
	got := statusByName(st)
	wantIface(t, got["default"], "", "", "the guest agent is not connected")
	wantIface(t, got["lan"], "", "", "no neighbour entry for 02:00:00:00:00:02; the guest agent is not connected")
	wantIface(t, got["nat"], "192.168.100.5", apiv1.InterfaceSourceLease, "")
	var names []string
	for _, s := range st.GetInterfaces() {
		names = append(names, s.GetName())
	}
	if strings.Join(names, ",") != "default,lan,nat" {
		t.Errorf("interfaces %v, want the spec's order", names)
	}

	// The agent connects: its event triggers a lookup at once.
	h.connectAgent()
	h.conn.withNet(testDomain, func(n *fakeNet) {
		n.addrs[SourceAgent] = []GuestInterface{
			{Name: "lo", MAC: "00:00:00:00:00:00", Addrs: []string{"127.0.0.1", "::1"}},
			{Name: "eth0", MAC: "02:00:00:00:00:01", Addrs: []string{"fe80::1", "fec0::5054:ff:fe12:3456", "10.0.2.15", "10.0.2.15"}},
			{Name: "eth2", MAC: "02:00:00:00:00:03"}, // no address: the lease stays the source
		}
	})
	h.conn.events <- Event{Kind: EventAgent, Domain: testDomain, Type: AgentConnected}
	ev = sub.WaitFor(t, "Interfaces")
	for !ev.GetStatus().GetGuestAgentConnected() {
		ev = sub.WaitFor(t, "Interfaces")
	}
	got = statusByName(ev.GetStatus())
	def := got["default"]
	wantIface(t, def, "10.0.2.15", apiv1.InterfaceSourceAgent, "")
	if def.GetInterfaceName() != "eth0" || strings.Join(def.GetIpAddresses(), ",") != "10.0.2.15,fec0::5054:ff:fe12:3456" {
		t.Errorf("default = %v: want eth0 with IPv4 first, no link-local, no duplicate", def)
	}
	wantIface(t, got["lan"], "", "", "no neighbour entry for 02:00:00:00:00:02; the guest agent reports no address for 02:00:00:00:00:02")
	wantIface(t, got["nat"], "192.168.100.5", apiv1.InterfaceSourceLease, "")

	// What the node agent writes from it passes the API's validation.
	vst := &apiv1.VirtualMachineInstanceStatus{Interfaces: ev.GetStatus().GetInterfaces()}
	if errs := validation.ValidateVirtualMachineInstanceStatus(vst, nil); len(errs) > 0 {
		t.Errorf("the API refuses the interfaces: %v", errs)
	}

	// A neighbour entry appears: a timed lookup finds it, without a
	// kick.
	h.conn.withNet(testDomain, func(n *fakeNet) {
		n.addrs[SourceARP] = []GuestInterface{{Name: domxml.TapName(testUID, "lan"), MAC: "02:00:00:00:00:02", Addrs: []string{"192.0.2.7"}}}
	})
	st = h.waitAddresses("the neighbour entry", func(st *launcherpb.DomainStatus) bool { return statusByName(st)["lan"].GetIpAddress() != "" })
	wantIface(t, statusByName(st)["lan"], "192.0.2.7", apiv1.InterfaceSourceARP, "")

	// Reading the status never asks libvirt for addresses.
	before := h.conn.callsMatching("InterfaceAddresses")
	for range 3 {
		if _, err := h.d.GetDomain(ctx, &launcherpb.Empty{}); err != nil {
			t.Fatal(err)
		}
	}
	if n := h.conn.callsMatching("InterfaceAddresses"); n != before {
		t.Errorf("GetDomain asked libvirt for addresses (%d calls)", n-before)
	}

	// A source that fails says so.
	h.conn.withNet(testDomain, func(n *fakeNet) { n.addrErr[SourceAgent] = errors.New("Guest agent is not responding") })
	st = h.waitAddresses("the agent's failure", func(st *launcherpb.DomainStatus) bool { return statusByName(st)["default"].GetIpAddress() == "" })
	wantIface(t, statusByName(st)["default"], "", "", "the guest agent did not answer: Guest agent is not responding")

	// A stopped domain reports none.
	if _, err := h.d.Kill(ctx, &launcherpb.Empty{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the addresses of the stopped domain to go", func() bool {
		ifaces, agent := h.d.reportedAddresses()
		return len(ifaces) == 0 && !agent
	})
}

func wantIface(t *testing.T, s *apiv1.InterfaceStatus, ip, source, info string) {
	t.Helper()
	if s == nil {
		t.Fatalf("interface missing")
	}
	if s.GetIpAddress() != ip || s.GetSource() != source || s.GetInfo() != info {
		t.Errorf("interface %s = ip %q source %q info %q; want %q %q %q", s.GetName(), s.GetIpAddress(), s.GetSource(), s.GetInfo(), ip, source, info)
	}
	if ip != "" && (len(s.GetIpAddresses()) == 0 || s.GetIpAddresses()[0] != ip) {
		t.Errorf("interface %s: ip_address %q is not the first of %v", s.GetName(), ip, s.GetIpAddresses())
	}
}

func TestAddressInterval(t *testing.T) {
	start := time.Unix(1_700_000_000, 0)
	fastUntil := start.Add(AddressFastPeriod)
	for _, tc := range []struct {
		now  time.Time
		want time.Duration
	}{
		{start, AddressFastInterval},
		{fastUntil.Add(-time.Second), AddressFastInterval},
		{fastUntil, AddressSlowInterval},
		{fastUntil.Add(time.Hour), AddressSlowInterval},
	} {
		if got := addressInterval(tc.now, fastUntil); got != tc.want {
			t.Errorf("addressInterval(%v after start) = %v, want %v", tc.now.Sub(start), got, tc.want)
		}
	}
}

func TestFillAddresses(t *testing.T) {
	s := &apiv1.InterfaceStatus{Info: "stale"}
	addrs := []string{"fe80::1%eth0", "2001:db8::1", "::ffff:192.0.2.1", "bogus", "169.254.1.1"}
	for i := range 20 {
		addrs = append(addrs, "10.0.0."+string(rune('0'+i%10))+string(rune('0'+i/10)))
	}
	if !fill(s, addrs, apiv1.InterfaceSourceAgent) {
		t.Fatal("fill found nothing")
	}
	if len(s.GetIpAddresses()) != validation.MaxInterfaceIPs || s.GetIpAddress() != "192.0.2.1" || s.GetInfo() != "" {
		t.Errorf("fill = %v", s)
	}
	for _, a := range s.GetIpAddresses() {
		if strings.HasPrefix(a, "fe80") || a == "bogus" || a == "2001:db8::1" {
			t.Errorf("kept %s (link-local, not an address, or an IPv6 one beyond the limit)", a)
		}
	}
	if fill(&apiv1.InterfaceStatus{}, []string{"fe80::2"}, apiv1.InterfaceSourceAgent) {
		t.Error("a link-local address alone counts as an address")
	}
}

// stepLookup lets the address watcher do one timed lookup: it waits for
// the watcher to wait on the clock, steps it, and waits for the next wait.
func (h *harness) stepLookup() {
	h.t.Helper()
	waitFor(h.t, "the address watcher to wait", h.clk.HasWaiters)
	h.clk.Step(AddressFastInterval)
	waitFor(h.t, "the address watcher to wait again", h.clk.HasWaiters)
}

// TestTimedLookupsReuseTheLiveXML: the live XML is read after a kick
// (the start, an event), not at every timed lookup, and a domain without
// interfaces costs no libvirt call between kicks.
func TestTimedLookupsReuseTheLiveXML(t *testing.T) {
	h := newHarness(t)
	h.writeQEMUPid()
	h.mustSync(kindsVMI())
	h.waitAddresses("the interfaces", func(st *launcherpb.DomainStatus) bool { return len(st.GetInterfaces()) == 3 })
	h.stepLookup()
	xml, asked := h.conn.callsMatching("GetXMLDesc"), h.conn.callsMatching("InterfaceAddresses")
	for range 3 {
		h.stepLookup()
	}
	if n := h.conn.callsMatching("GetXMLDesc"); n != xml {
		t.Errorf("timed lookups read the live XML %d times", n-xml)
	}
	if n := h.conn.callsMatching("InterfaceAddresses"); n < asked+3 {
		t.Errorf("3 timed lookups asked the address sources %d times", n-asked)
	}

	bare := newHarness(t)
	bare.writeQEMUPid()
	bare.mustSync(vmi(apiv1.PhaseScheduled))
	bare.stepLookup()
	before := len(bare.conn.callLog())
	for range 3 {
		bare.stepLookup()
	}
	if calls := bare.conn.callLog()[before:]; len(calls) > 0 {
		t.Errorf("timed lookups of a domain without interfaces called libvirt: %v", calls)
	}
}
