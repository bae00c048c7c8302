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

// makeNetwork makes the hub namespace with a bridge and each node's
// namespace, joined to the bridge by a veth pair, loopback and the veth
// up and the node's address on it. Nothing is added to the host's own
// network namespace.
func (r *Run) makeNetwork(ctx context.Context) error {
	ip := func(args ...string) error { return run1(ctx, "ip", args...) }
	if err := ip("netns", "add", r.hub); err != nil {
		return err
	}
	for _, args := range [][]string{
		{"-n", r.hub, "link", "add", "br0", "type", "bridge"},
		{"-n", r.hub, "link", "set", "lo", "up"},
		{"-n", r.hub, "link", "set", "br0", "up"},
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
	}
	return nil
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
