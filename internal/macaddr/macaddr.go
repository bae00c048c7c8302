// Package macaddr assigns MAC addresses to interfaces that name none: the
// API to a VM's template, the pool controller to each VM it makes.
package macaddr

import (
	"crypto/rand"
	"net"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// Assign gives every interface of spec that names no MAC address one,
// once: the one it had in old (the stored template, on an update; by
// interface name), else a new random locally administered unicast
// address. A VM's MACs thus stay what they were across restarts,
// migrations and updates that leave them out (Terraform's, say), so DHCP
// leases and ARP entries outside keep pointing at the guest. Interfaces
// that name one keep theirs; validation checks it.
func Assign(spec, old *apiv1.VirtualMachineInstanceSpec) {
	kept := map[string]string{}
	for _, i := range old.GetDomain().GetDevices().GetInterfaces() {
		if i.GetMacAddress() != "" {
			kept[i.GetName()] = i.GetMacAddress()
		}
	}
	used := map[string]bool{}
	for _, i := range spec.GetDomain().GetDevices().GetInterfaces() {
		if hw, err := net.ParseMAC(i.GetMacAddress()); err == nil {
			used[hw.String()] = true
		}
	}
	for _, i := range spec.GetDomain().GetDevices().GetInterfaces() {
		if i == nil || i.GetMacAddress() != "" {
			continue
		}
		if mac, ok := kept[i.GetName()]; ok && !used[mac] {
			i.MacAddress = mac
			used[mac] = true
			continue
		}
		for {
			mac := randomMAC()
			if !used[mac] {
				i.MacAddress = mac
				used[mac] = true
				break
			}
		}
	}
}

// randomMAC is a random unicast MAC with the locally administered bit
// set (02:xx:...): it never clashes with a vendor's.
func randomMAC() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	b[0] = b[0]&^0x01 | 0x02
	return net.HardwareAddr(b).String()
}
