package fakenode

import (
	"fmt"
	"net"
	"strings"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// What a fake guest's interfaces report: the addresses a real node would
// find (a DHCP lease, an ARP entry, the guest agent), scripted.

// guestInterface is what the node knows of an instance's interface from
// its spec.
type guestInterface struct {
	name, mac string
	// kind is the network's: user, bridge or network; on is the bridge
	// or libvirt network's name.
	kind, on string
}

// guestInterfaces reads the instance's interfaces and their networks'
// kinds, in spec order.
func guestInterfaces(vmi *apiv1.VirtualMachineInstance) []guestInterface {
	nets := map[string]*apiv1.Network{}
	for _, n := range vmi.GetSpec().GetNetworks() {
		nets[n.GetName()] = n
	}
	var out []guestInterface
	for _, i := range vmi.GetSpec().GetDomain().GetDevices().GetInterfaces() {
		g := guestInterface{name: i.GetName(), mac: i.GetMacAddress(), kind: "user"}
		switch n := nets[i.GetName()]; {
		case n.GetBridge() != nil:
			g.kind, g.on = "bridge", n.GetBridge().GetBridge()
		case n.GetNetwork() != nil:
			g.kind, g.on = "network", n.GetNetwork().GetName()
		}
		out = append(out, g)
	}
	return out
}

// addressPlan is a parsed AnnotationAddresses.
type addressPlan struct {
	delay time.Duration
	never bool
	// info replaces the kind's own explanation while there is no
	// address; "" keeps it.
	info string
}

// parseAddressScript reads an AnnotationAddresses value; def is the delay
// when it sets none. A value it cannot read gives addresses at once, as
// an empty one does: a typo shows as a test that does not wait.
func parseAddressScript(s string, def time.Duration) addressPlan {
	action, arg, _ := strings.Cut(s, ":")
	switch action {
	case "never":
		return addressPlan{never: true, info: arg}
	case "after":
		if d, err := time.ParseDuration(arg); err == nil {
			return addressPlan{delay: d}
		}
	}
	return addressPlan{delay: def}
}

// interfaceStatuses is status.interfaces: each interface's name and MAC,
// with its address when withAddress, else why there is none.
func interfaceStatuses(ifaces []guestInterface, plan addressPlan, withAddress bool) []*apiv1.InterfaceStatus {
	out := make([]*apiv1.InterfaceStatus, 0, len(ifaces))
	for _, i := range ifaces {
		s := &apiv1.InterfaceStatus{Name: i.name, MacAddress: i.mac}
		ip := AddressFor(i.mac)
		if withAddress && ip != "" {
			s.IpAddress, s.IpAddresses = ip, []string{ip}
			s.Source = map[string]string{"user": apiv1.InterfaceSourceAgent, "bridge": apiv1.InterfaceSourceARP,
				"network": apiv1.InterfaceSourceLease}[i.kind]
			if i.kind == "user" {
				s.InterfaceName = "eth0" // the guest agent says
			}
		} else {
			s.Info = noAddressInfo(i, plan)
		}
		out = append(out, s)
	}
	return out
}

// noAddressInfo says why interface i has no address, as the real node
// agent would for its kind, unless the script gave a reason.
func noAddressInfo(i guestInterface, plan addressPlan) string {
	switch {
	case plan.info != "":
		return plan.info
	case i.mac == "":
		return "the interface has no MAC address"
	case i.kind == "network":
		return fmt.Sprintf("no DHCP lease for %s in network %s", i.mac, i.on)
	case i.kind == "bridge":
		return fmt.Sprintf("no neighbour entry for %s on bridge %s", i.mac, i.on)
	}
	return "the guest agent is not connected"
}

// AddressFor is the address a fake guest's interface with MAC mac gets:
// 10.0.2.x, x from the MAC's last byte (10 to 249), so that tests can
// predict it; "" for a MAC it cannot parse.
func AddressFor(mac string) string {
	hw, err := net.ParseMAC(mac)
	if err != nil || len(hw) == 0 {
		return ""
	}
	return fmt.Sprintf("10.0.2.%d", 10+int(hw[len(hw)-1])%240)
}
