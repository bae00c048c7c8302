package multinode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/virtplane/terraform-provider-virtplane/internal/procfs"
)

// Virsh runs virsh against the node (-c URI) and returns its standard
// output; the error quotes its standard error.
func (n *Node) Virsh(ctx context.Context, args ...string) (string, error) {
	return output(ctx, "virsh", append([]string{"-c", n.URI}, args...)...)
}

// Domains lists the names of the node's domains, running or not.
func (n *Node) Domains(ctx context.Context) ([]string, error) {
	out, err := n.Virsh(ctx, "list", "--all", "--name")
	if err != nil {
		return nil, err
	}
	return strings.Fields(out), nil
}

// HasDomain reports whether the node's libvirtd knows domain name.
func (n *Node) HasDomain(ctx context.Context, name string) (bool, error) {
	ds, err := n.Domains(ctx)
	return slices.Contains(ds, name), err
}

// DomainState is `virsh domstate` of domain name ("running", "shut off"...).
func (n *Node) DomainState(ctx context.Context, name string) (string, error) {
	out, err := n.Virsh(ctx, "domstate", name)
	return strings.TrimSpace(out), err
}

// DestroyAll destroys and undefines every domain of the node; nothing
// on a node that was powered off (its QEMUs are dead, its libvirtd too).
func (n *Node) DestroyAll(ctx context.Context) error {
	if n.PoweredOff() {
		return nil
	}
	ds, err := n.Domains(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, d := range ds {
		// Not running is fine; what must succeed is that it is gone.
		_, _ = n.Virsh(ctx, "destroy", d)
		if ok, _ := n.HasDomain(ctx, d); !ok {
			continue // transient: destroy removed it
		}
		if _, err := n.Virsh(ctx, "undefine", d, "--nvram", "--managed-save", "--snapshots-metadata", "--checkpoints-metadata"); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// QEMUPid is the QEMU process of the node's running domain name, from
// its libvirtd's pid file; 0 when there is none.
func (n *Node) QEMUPid(domain string) int {
	b, err := os.ReadFile(filepath.Join(n.QEMUPidDir(), domain+".pid"))
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || !procfs.Alive(pid) {
		return 0
	}
	return pid
}

// Pids lists the live processes in the node's network namespace: its
// daemons, its QEMUs and the holder of its mount namespace.
func (n *Node) Pids() []int {
	var out []int
	for _, pid := range pidsInNetNS(n.NetNS) {
		if procfs.Alive(pid) {
			out = append(out, pid)
		}
	}
	return out
}

// Runs reports whether process pid runs on the node: in its network
// namespace. (Not necessarily in its mount namespace: libvirt starts each
// QEMU in a mount namespace of its own, below the node's.)
func (n *Node) Runs(pid int) (bool, error) {
	return sameFile(fmt.Sprintf("/proc/%d/ns/net", pid), filepath.Join(netnsDir, n.NetNS))
}

func sameFile(a, b string) (bool, error) {
	var sa, sb syscall.Stat_t
	if err := syscall.Stat(a, &sa); err != nil {
		return false, err
	}
	if err := syscall.Stat(b, &sb); err != nil {
		return false, err
	}
	return sa.Dev == sb.Dev && sa.Ino == sb.Ino, nil
}
