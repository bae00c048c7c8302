package multinode

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
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

// makeNetwork makes the hub namespace with two bridges and each node's
// namespace, joined to the hub's br0 by a veth pair (loopback and the
// veth up, the node's address on it), and holding GuestBridge joined to
// the hub's guest bridge by a second veth pair. Nothing is added to the
// host's own network namespace.
func (r *Run) makeNetwork(ctx context.Context) error {
	ip := func(args ...string) error { return run1(ctx, "ip", args...) }
	if err := ip("netns", "add", r.hub); err != nil {
		return err
	}
	for _, args := range [][]string{
		{"-n", r.hub, "link", "add", "br0", "type", "bridge"},
		{"-n", r.hub, "link", "add", "gbr0", "type", "bridge"},
		{"-n", r.hub, "link", "set", "lo", "up"},
		{"-n", r.hub, "link", "set", "br0", "up"},
		{"-n", r.hub, "addr", "add", HubGuestAddr, "dev", "gbr0"},
		{"-n", r.hub, "link", "set", "gbr0", "up"},
	} {
		if err := ip(args...); err != nil {
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

// removeNetwork deletes the run's namespaces (their veths go with them);
// ones that do not exist are fine.
func (r *Run) removeNetwork() error {
	names := []string{r.hub}
	for _, n := range r.nodes {
		names = append(names, n.NetNS)
	}
	var errs []error
	for _, ns := range names {
		errs = append(errs, deleteNetNS(ns))
	}
	return errors.Join(errs...)
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
