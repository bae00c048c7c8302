package proc

import (
	"fmt"
	"net"
	"net/netip"
)

// FreeAddr is an address of 127.0.0.1 whose port was free for network
// ("tcp" or "udp") a moment ago: for a child's listen flag that does not
// report the port it bound, a peer URL that others must know before the
// child starts, or the host port of a QEMU forward. Another process may
// take the port before the child binds it, so pick it just before the
// start.
func FreeAddr(network string) (netip.AddrPort, error) {
	var (
		addr    netip.AddrPort
		release func() error
	)
	switch network {
	case "tcp":
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return netip.AddrPort{}, fmt.Errorf("finding a free port: %w", err)
		}
		addr, release = l.Addr().(*net.TCPAddr).AddrPort(), l.Close
	case "udp":
		c, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			return netip.AddrPort{}, fmt.Errorf("finding a free port: %w", err)
		}
		addr, release = c.LocalAddr().(*net.UDPAddr).AddrPort(), c.Close
	default:
		return netip.AddrPort{}, fmt.Errorf("finding a free port: network %q is neither tcp nor udp", network)
	}
	if err := release(); err != nil {
		return netip.AddrPort{}, fmt.Errorf("finding a free port: %w", err)
	}
	return addr, nil
}
