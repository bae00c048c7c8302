package guestnet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"libvirt.org/go/libvirtxml"
)

// QEMUIDs returns the users and the groups libvirt runs QEMU as, each
// sorted and without repeats, from its capabilities (`virsh -c uri
// capabilities`; virsh is libvirt-clients): the base labels of the DAC
// security model, "+<uid>:+<gid>" per domain type (qemu, kvm). They
// follow qemu.conf's user and group; a domain may override its label,
// which virtplane's never do.
func QEMUIDs(ctx context.Context, virsh, uri string) (uids, gids []uint32, err error) {
	if virsh == "" {
		virsh = "virsh"
	}
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, virsh, "-c", uri, "capabilities")
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, nil, fmt.Errorf("libvirt capabilities (%s -c %s capabilities): %w: %s", virsh, uri, err, bytes.TrimSpace(stderr.Bytes()))
	}
	return qemuIDs(string(out))
}

func qemuIDs(capsXML string) (uids, gids []uint32, err error) {
	var caps libvirtxml.Caps
	if err := caps.Unmarshal(capsXML); err != nil {
		return nil, nil, fmt.Errorf("libvirt capabilities: %w", err)
	}
	for _, m := range caps.Host.SecModel {
		if m.Name != "dac" {
			continue
		}
		for _, l := range m.Labels {
			if l.Type != "qemu" && l.Type != "kvm" {
				continue
			}
			uid, gid, err := labelIDs(l.Value)
			if err != nil {
				return nil, nil, fmt.Errorf("libvirt capabilities: DAC base label %q of %s domains: %w", l.Value, l.Type, err)
			}
			uids, gids = append(uids, uid), append(gids, gid)
		}
	}
	if len(uids) == 0 {
		return nil, nil, errors.New("libvirt capabilities name no DAC base label for qemu or kvm domains: which user QEMU runs as is unknown")
	}
	slices.Sort(uids)
	slices.Sort(gids)
	return slices.Compact(uids), slices.Compact(gids), nil
}

// labelIDs reads the user and the group of a DAC label, "user:group",
// each "+<id>" as libvirt writes it, or a name.
func labelIDs(label string) (uid, gid uint32, err error) {
	name, group, ok := strings.Cut(label, ":")
	if !ok || name == "" || group == "" {
		return 0, 0, errors.New("not user:group")
	}
	if uid, err = labelID("uid", name, lookupUID); err != nil {
		return 0, 0, err
	}
	if gid, err = labelID("gid", group, lookupGID); err != nil {
		return 0, 0, err
	}
	return uid, gid, nil
}

// labelID reads one half of a DAC label: "+<id>", or a name lookup
// turns into its id; kind ("uid", "gid") names it in errors.
func labelID(kind, s string, lookup func(string) (string, error)) (uint32, error) {
	id, ok := strings.CutPrefix(s, "+")
	if !ok {
		var err error
		if id, err = lookup(s); err != nil {
			return 0, err
		}
	}
	n, err := strconv.ParseUint(id, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("%s %q of %s: %w", kind, id, s, err)
	}
	return uint32(n), nil
}

func lookupUID(name string) (string, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return "", err
	}
	return u.Uid, nil
}

func lookupGID(name string) (string, error) {
	g, err := user.LookupGroup(name)
	if err != nil {
		return "", err
	}
	return g.Gid, nil
}

// ErrNoDaemon: no running libvirt daemon was found by its pid file.
var ErrNoDaemon = errors.New("no running libvirt QEMU daemon (virtqemud or libvirtd) found")

// daemons are the libvirt daemons that start QEMU, by their pid files'
// and processes' names: the modular one first.
var daemons = []string{"virtqemud", "libvirtd"}

// DaemonNetNS returns the network namespace file of the running libvirt
// daemon that starts QEMU (root's pid file in runDir, /run when empty):
// QEMU runs in the namespace it inherits from the daemon, which need not
// be the agent's (tests put node agents in namespaces of their own).
func DaemonNetNS(runDir string) (string, error) {
	if runDir == "" {
		runDir = "/run"
	}
	for _, d := range daemons {
		b, err := os.ReadFile(filepath.Join(runDir, d+".pid"))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return "", err
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 0 {
			continue
		}
		// A stale pid file may name another process by now.
		comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if err != nil || strings.TrimSpace(string(comm)) != d {
			continue
		}
		return fmt.Sprintf("/proc/%d/ns/net", pid), nil
	}
	return "", ErrNoDaemon
}
