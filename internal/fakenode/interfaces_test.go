package fakenode

import (
	"strings"
	"testing"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

func TestAddressFor(t *testing.T) {
	for mac, want := range map[string]string{
		"02:00:00:00:00:00": "10.0.2.10",
		"02:00:00:00:00:01": "10.0.2.11",
		"52:54:00:ab:cd:ef": "10.0.2.249", // 0xef = 239
		"52:54:00:ab:cd:f0": "10.0.2.10",  // wraps: 240
		"":                  "",
		"not a mac":         "",
	} {
		if got := AddressFor(mac); got != want {
			t.Errorf("AddressFor(%q) = %q, want %q", mac, got, want)
		}
	}
}

func TestParseAddressScript(t *testing.T) {
	for s, want := range map[string]addressPlan{
		"":                          {delay: time.Second},
		"after:3s":                  {delay: 3 * time.Second},
		"after:soon":                {delay: time.Second},
		"never":                     {never: true},
		"never:no lease: link down": {never: true, info: "no lease: link down"},
		"typo":                      {delay: time.Second},
	} {
		if got := parseAddressScript(s, time.Second); got != want {
			t.Errorf("parseAddressScript(%q) = %+v, want %+v", s, got, want)
		}
	}
}

// Each kind reports its address from the source a real node would use,
// and without one says why in that kind's words.
func TestInterfaceStatuses(t *testing.T) {
	vmi := &apiv1.VirtualMachineInstance{Spec: &apiv1.VirtualMachineInstanceSpec{
		Domain: &apiv1.DomainSpec{Devices: &apiv1.Devices{Interfaces: []*apiv1.Interface{
			{Name: "default", MacAddress: "02:00:00:00:00:01"},
			{Name: "lan", MacAddress: "02:00:00:00:00:02"},
			{Name: "nat", MacAddress: "02:00:00:00:00:03"},
		}}},
		Networks: []*apiv1.Network{
			{Name: "default", User: &apiv1.UserNetwork{}},
			{Name: "lan", Bridge: &apiv1.BridgeNetwork{Bridge: "br0"}},
			{Name: "nat", Network: &apiv1.LibvirtNetwork{Name: "default"}},
		},
	}}
	ifaces := guestInterfaces(vmi)
	with := interfaceStatuses(ifaces, addressPlan{}, true)
	for i, want := range []struct{ ip, source, guestName string }{
		{"10.0.2.11", apiv1.InterfaceSourceAgent, "eth0"},
		{"10.0.2.12", apiv1.InterfaceSourceARP, ""},
		{"10.0.2.13", apiv1.InterfaceSourceLease, ""},
	} {
		s := with[i]
		if s.GetIpAddress() != want.ip || strings.Join(s.GetIpAddresses(), ",") != want.ip || s.GetSource() != want.source ||
			s.GetInterfaceName() != want.guestName || s.GetInfo() != "" || s.GetName() != ifaces[i].name || s.GetMacAddress() != ifaces[i].mac {
			t.Errorf("interface %d with address: %v, want %+v", i, s, want)
		}
	}
	without := interfaceStatuses(ifaces, addressPlan{}, false)
	for i, want := range []string{
		"the guest agent is not connected",
		"no neighbour entry for 02:00:00:00:00:02 on bridge br0",
		"no DHCP lease for 02:00:00:00:00:03 in network default",
	} {
		if s := without[i]; s.GetInfo() != want || s.GetIpAddress() != "" || len(s.GetIpAddresses()) != 0 || s.GetSource() != "" {
			t.Errorf("interface %d without address: %v, want info %q", i, s, want)
		}
	}
	scripted := interfaceStatuses(ifaces, addressPlan{never: true, info: "cable unplugged"}, false)
	if got := scripted[1].GetInfo(); got != "cable unplugged" {
		t.Errorf("scripted info = %q", got)
	}
}
