package netinventory

import (
	"errors"
	"fmt"
	"slices"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// dumpRetries bounds how often an interrupted link dump is repeated: the
// kernel interrupts a dump when links change under it, which a host
// starting guests (taps come and go) does often, but not for long.
const dumpRetries = 5

// ListBridges returns the names of the Linux bridges in the network
// namespace at nsPath (/proc/PID/ns/net, /run/netns/NAME), or in the
// calling process's own when nsPath is empty, sorted. It asks the kernel
// over rtnetlink rather than reading /sys/class/net, which shows the
// namespace sysfs was mounted in, not necessarily the process's.
func ListBridges(nsPath string) ([]string, error) {
	ns := netns.None() // the process's own
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
	defer h.Close()
	var links []netlink.Link
	for try := 1; ; try++ {
		links, err = h.LinkList()
		if err == nil {
			break
		}
		if !errors.Is(err, netlink.ErrDumpInterrupted) || try == dumpRetries {
			return nil, fmt.Errorf("listing links: %w", err)
		}
	}
	var out []string
	for _, l := range links {
		if l.Type() == "bridge" {
			out = append(out, l.Attrs().Name)
		}
	}
	slices.Sort(out)
	return out, nil
}
