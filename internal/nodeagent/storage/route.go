package storage

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// routeHandle is a netlink handle in the network namespace at nsPath (""
// for the agent's own).
func routeHandle(nsPath string) (*netlink.Handle, error) {
	ns := netns.None()
	if nsPath != "" {
		h, err := netns.GetFromPath(nsPath)
		if err != nil {
			return nil, fmt.Errorf("network namespace %s: %w", nsPath, err)
		}
		defer h.Close()
		ns = h
	}
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("netlink: %w", err)
	}
	return h, nil
}

// anyLocal says whether any of addrs is an address of the namespace at
// nsPath itself (its route is of type local: what the guest firewall's
// "fib daddr type local" matches).
func anyLocal(nsPath string, addrs []netip.Addr) (bool, error) {
	if len(addrs) == 0 {
		return false, nil
	}
	h, err := routeHandle(nsPath)
	if err != nil {
		return false, err
	}
	defer h.Close()
	for _, a := range addrs {
		// No route (an IPv6 address on a host without IPv6): not local.
		routes, _ := h.RouteGet(net.IP(a.AsSlice()))
		for _, r := range routes {
			if r.Type == unix.RTN_LOCAL {
				return true, nil
			}
		}
	}
	return false, nil
}

// routeSource is the source address the kernel picks for dst in the
// network namespace at nsPath ("" for the agent's own): the route's
// preferred source, as a connection to dst would use it.
func routeSource(nsPath string, dst netip.Addr) (netip.Addr, error) {
	h, err := routeHandle(nsPath)
	if err != nil {
		return netip.Addr{}, err
	}
	defer h.Close()
	routes, err := h.RouteGet(net.IP(dst.AsSlice()))
	if err != nil {
		return netip.Addr{}, fmt.Errorf("route to %s: %w", dst, err)
	}
	for _, r := range routes {
		if a, ok := netip.AddrFromSlice(r.Src); ok && a.IsValid() && !a.IsUnspecified() {
			return a.Unmap(), nil
		}
	}
	return netip.Addr{}, fmt.Errorf("route to %s: no source address", dst)
}
