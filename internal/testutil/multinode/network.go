package multinode

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// netnsDir is where `ip netns` keeps its namespaces.
const netnsDir = "/run/netns"

// GuestBridge is the Linux bridge every node's network namespace holds
// for guests (interfaces of the bridge kind): its ports are the guests'
// taps and a veth to the hub's guest bridge, so guests on different
// nodes share one layer-2 segment, apart from the nodes' own network.
// The hub's guest bridge carries HubGuestAddr, so a test can reach
// guests from the hub namespace (HubExec). The bridges do not filter
// VLANs: this machine's kernel is built without bridge VLAN filtering
// (CONFIG_BRIDGE_VLAN_FILTERING), so VLAN-tagged guests cannot be tested
// here.
const GuestBridge = "vpguest0"

// HubGuestAddr is the hub's address on the guests' segment: in TEST-NET-1
// (192.0.2.0/24, RFC 5737, for documentation and never routed), not a
// link-local one, because a guest's link-local address does not count as
// the address Terraform's wait_for_ip waits for. The segment exists only
// inside the run's namespaces.
const HubGuestAddr = "192.0.2.254/24"

// makeNetwork makes the hub namespace with two bridges (unless the run
// joins another run's hub) and each node's namespace, joined to the hub's
// br0 by a veth pair (loopback and the veth up, the node's address on
// it), and holding GuestBridge joined to the hub's guest bridge by a
// second veth pair. Only a host link (Options.HostLink) adds anything to
// the host's own network namespace.
func (r *Run) makeNetwork(ctx context.Context) error {
	ip := func(args ...string) error { return run1(ctx, "ip", args...) }
	if r.hubRun == nil {
		if err := r.makeHub(ctx); err != nil {
			return err
		}
	}
	for _, n := range r.nodes {
		// Interface names hold at most 15 bytes: vm<6 hex>n<index>.
		nodeIf, hubIf := fmt.Sprintf("vm%sn%d", r.id, n.Index), fmt.Sprintf("vm%sh%d", r.id, n.Index)
		if err := ip("netns", "add", n.NetNS); err != nil {
			return err
		}
		for _, args := range [][]string{
			{"link", "add", nodeIf, "netns", n.NetNS, "type", "veth", "peer", "name", hubIf, "netns", r.hub},
			{"-n", n.NetNS, "addr", "add", n.Addr + "/24", "dev", nodeIf},
			{"-n", n.NetNS, "link", "set", "lo", "up"},
			{"-n", n.NetNS, "link", "set", nodeIf, "up"},
			{"-n", r.hub, "link", "set", hubIf, "master", "br0", "up"},
		} {
			if err := ip(args...); err != nil {
				return err
			}
		}
		if err := r.joinGuestSegment(ctx, n); err != nil {
			return err
		}
	}
	return nil
}

// makeHub makes the run's own hub: its namespace, the host link if asked
// for (first, since it may move the run to another subnet), br0 with the
// hub's address and the guests' bridge.
func (r *Run) makeHub(ctx context.Context) error {
	ip := func(args ...string) error { return run1(ctx, "ip", args...) }
	if err := ip("netns", "add", r.hub); err != nil {
		return err
	}
	// The bridges get fixed MAC addresses: a Linux bridge otherwise takes
	// the lowest of its ports', which changes as runs that share the hub
	// add and remove node ports, and the host's namespace (host link)
	// then keeps sending to the hub's address at a MAC gone from the
	// bridge until its ARP entry ages out (measured: a shared Ceph
	// cluster unreachable from the servers after one test's nodes left).
	for _, args := range [][]string{
		{"-n", r.hub, "link", "add", "br0", "address", hubMAC(r.id, 1), "type", "bridge"},
		{"-n", r.hub, "link", "add", "gbr0", "address", hubMAC(r.id, 2), "type", "bridge"},
		{"-n", r.hub, "link", "set", "lo", "up"},
	} {
		if err := ip(args...); err != nil {
			return err
		}
	}
	if r.hostLink {
		if err := r.makeHostLink(ctx); err != nil {
			return err
		}
	}
	for _, args := range [][]string{
		{"-n", r.hub, "addr", "add", r.hubAddrs().Addr + "/24", "dev", "br0"},
		{"-n", r.hub, "link", "set", "br0", "up"},
		{"-n", r.hub, "addr", "add", HubGuestAddr, "dev", "gbr0"},
		{"-n", r.hub, "link", "set", "gbr0", "up"},
	} {
		if err := ip(args...); err != nil {
			return err
		}
	}
	return nil
}

// hostLinkName is the host's end of run id's host link; its peer in the
// hub is hostLinkPeer. The sweep finds a dead run's by its id.
func hostLinkName(id string) string { return "vm" + id + "hl" }
func hostLinkPeer(id string) string { return "vm" + id + "hh" }

// subnetTries bounds how many subnets makeHostLink tries.
const subnetTries = 32

// makeHostLink joins the host's namespace to the hub's br0 by a veth
// pair with HostAddr on the host's end, and routes the hub's address, and
// only it, there: the host's namespace reaches the hub's services, not
// the nodes (whose libvirtds listen on TCP without authentication). That
// route is also the run's claim on the subnet in the host's namespace,
// which every run with a host link shares: when another run holds it
// already, ip route add fails with "File exists" and the run moves to
// another subnet (an address added with a prefix route would instead
// shadow or be shadowed by the other run's, silently).
func (r *Run) makeHostLink(ctx context.Context) error {
	host, peer := hostLinkName(r.id), hostLinkPeer(r.id)
	for _, args := range [][]string{
		{"link", "add", host, "type", "veth", "peer", "name", peer, "netns", r.hub},
		{"-n", r.hub, "link", "set", peer, "master", "br0", "up"},
		// No IPv6 link-local address: the host's namespace gets the one
		// IPv4 address and route, nothing more.
		{"link", "set", host, "addrgenmode", "none"},
		{"link", "set", host, "up"},
	} {
		if err := run1(ctx, "ip", args...); err != nil {
			return err
		}
	}
	for range subnetTries {
		h := r.hubAddrs()
		if err := run1(ctx, "ip", "addr", "add", h.HostAddr+"/32", "dev", host); err != nil {
			return err
		}
		err := run1(ctx, "ip", "route", "add", h.Addr+"/32", "dev", host, "src", h.HostAddr)
		if err == nil {
			return nil
		}
		if !strings.Contains(err.Error(), "File exists") {
			return err
		}
		if err := run1(ctx, "ip", "addr", "del", h.HostAddr+"/32", "dev", host); err != nil {
			return err
		}
		if err := r.pickSubnet(); err != nil {
			return err
		}
		r.setSubnet(r.subnet)
	}
	return fmt.Errorf("host link: %d subnets of 169.254.0.0/16 tried, each routed in the host's namespace already", subnetTries)
}

// joinGuestSegment makes GuestBridge in n's namespace and joins it to the
// hub's guest bridge.
func (r *Run) joinGuestSegment(ctx context.Context, n *Node) error {
	nodeIf, hubIf := fmt.Sprintf("vg%sn%d", r.id, n.Index), fmt.Sprintf("vg%sh%d", r.id, n.Index)
	for _, args := range [][]string{
		{"-n", n.NetNS, "link", "add", GuestBridge, "type", "bridge"},
		{"link", "add", nodeIf, "netns", n.NetNS, "type", "veth", "peer", "name", hubIf, "netns", r.hub},
		{"-n", n.NetNS, "link", "set", nodeIf, "master", GuestBridge, "up"},
		{"-n", n.NetNS, "link", "set", GuestBridge, "up"},
		{"-n", r.hub, "link", "set", hubIf, "master", "gbr0", "up"},
	} {
		if err := run1(ctx, "ip", args...); err != nil {
			return err
		}
	}
	return nil
}

// HubExec runs name with args in the run's hub network namespace (on
// the guests' segment, at HubGuestAddr) and returns its combined output:
// how a test reaches bridged guests without touching the host's network.
func (n *Node) HubExec(ctx context.Context, name string, args ...string) ([]byte, error) {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", n.HubNetNS, name}, args...)...).CombinedOutput()
}

// removeNetwork deletes the run's namespaces (their veths go with them)
// and its host link; ones that do not exist are fine. Whatever still runs
// in the run's own hub (a Ceph cluster nobody closed) is killed first:
// it would keep the namespace, and with it the host link, alive.
func (r *Run) removeNetwork(log Logger) error {
	var names []string
	var errs []error
	if r.hubRun == nil {
		if pids := pidsInNetNS(r.hub); len(pids) > 0 {
			log.Logf("multinode: run %s: killing processes %v left in the hub", r.id, pids)
		}
		errs = append(errs, killNetNS(r.hub, 15*time.Second), deleteLink(hostLinkName(r.id)))
		names = append(names, r.hub)
	}
	for _, n := range r.nodes {
		names = append(names, n.NetNS)
	}
	for _, ns := range names {
		errs = append(errs, deleteNetNS(ns))
	}
	return errors.Join(errs...)
}

// deleteLink deletes an interface of the host's namespace, and its veth
// peer with it, if it exists.
func deleteLink(name string) error {
	if _, err := net.InterfaceByName(name); err != nil {
		if strings.Contains(err.Error(), "no such network interface") {
			return nil
		}
		return fmt.Errorf("looking up interface %s: %w", name, err)
	}
	return run1(context.Background(), "ip", "link", "delete", name)
}

// deleteNetNS deletes one namespace made by ip netns add, if it exists.
func deleteNetNS(name string) error {
	if _, err := os.Stat(filepath.Join(netnsDir, name)); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return run1(context.Background(), "ip", "netns", "delete", name)
}

// pidsInNetNS lists the processes whose network namespace is the one
// named (under /run/netns): everything a node ran, whoever started it.
func pidsInNetNS(name string) []int {
	var ns syscall.Stat_t
	if err := syscall.Stat(filepath.Join(netnsDir, name), &ns); err != nil {
		return nil
	}
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 {
			continue
		}
		var st syscall.Stat_t
		if syscall.Stat(fmt.Sprintf("/proc/%d/ns/net", pid), &st) == nil && st.Dev == ns.Dev && st.Ino == ns.Ino {
			out = append(out, pid)
		}
	}
	return out
}

// run1 runs a command to completion; its output goes into the error.
func run1(ctx context.Context, name string, args ...string) error {
	_, err := output(ctx, name, args...)
	return err
}

// output runs a command and returns its standard output; the error
// quotes the command and its standard error.
func output(ctx context.Context, name string, args ...string) (string, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	return stdout.String(), nil
}

// hubMAC is a fixed, locally administered unicast MAC address for bridge
// n of run id's hub: 02:76, the run id's three bytes, n.
func hubMAC(id string, n int) string {
	b := []byte{0x02, 0x76, 0, 0, 0, byte(n)}
	if v, err := hex.DecodeString(id); err == nil && len(v) == 3 {
		copy(b[2:5], v)
	}
	return net.HardwareAddr(b).String()
}
