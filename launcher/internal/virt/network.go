//go:build libvirt

package virt

import (
	"libvirt.org/go/libvirt"

	"github.com/virtplane/terraform-provider-virtplane/launcher/internal/driver"
)

var _ driver.NetworkDomain = (*domain)(nil)

// agentTimeout bounds a guest agent command (libvirt's default blocks
// until the guest answers). The launcher asks from a goroutine of its
// own, never an RPC, but a guest that stopped answering must not stall
// its address lookups for good.
const agentTimeout = 10

// HumanMonitorCommand runs an HMP command through libvirt's QEMU monitor.
func (d *domain) HumanMonitorCommand(cmd string) (string, error) {
	out, err := d.d.QemuMonitorCommand(cmd, libvirt.DOMAIN_QEMU_MONITOR_COMMAND_HMP)
	return out, d.wrap(err)
}

// InterfaceAddresses is virDomainInterfaceAddresses from src.
func (d *domain) InterfaceAddresses(src driver.AddressSource) ([]driver.GuestInterface, error) {
	if src == driver.SourceAgent {
		// Per domain, kept by libvirt while QEMU runs; set every time
		// since QEMU may have restarted meanwhile.
		if err := d.d.AgentSetResponseTimeout(agentTimeout, 0); err != nil {
			return nil, d.wrap(err)
		}
	}
	ifaces, err := d.d.ListAllInterfaceAddresses(libvirt.DomainInterfaceAddressesSource(src))
	if err != nil {
		return nil, d.wrap(err)
	}
	out := make([]driver.GuestInterface, 0, len(ifaces))
	for _, i := range ifaces {
		gi := driver.GuestInterface{Name: i.Name, MAC: i.Hwaddr}
		for _, a := range i.Addrs {
			gi.Addrs = append(gi.Addrs, a.Addr)
		}
		out = append(out, gi)
	}
	return out, nil
}
