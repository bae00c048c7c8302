package storage

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// routeSource is the source address the kernel picks for dst in the
// network namespace at nsPath ("" for the agent's own): the route's
// preferred source, as a connection to dst would use it.
func routeSource(nsPath string, dst netip.Addr) (netip.Addr, error) {
	ns := netns.None()
	if nsPath != "" {
		h, err := netns.GetFromPath(nsPath)
		if err != nil {
			return netip.Addr{}, fmt.Errorf("network namespace %s: %w", nsPath, err)
		}
		defer h.Close()
		ns = h
	}
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("netlink: %w", err)
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
