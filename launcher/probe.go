package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"runtime"

	"golang.org/x/sys/unix"

	"github.com/virtplane/terraform-provider-virtplane/internal/launcher"
	"github.com/virtplane/terraform-provider-virtplane/launcher/internal/domxml"
	"github.com/virtplane/terraform-provider-virtplane/launcher/internal/driver"
	"github.com/virtplane/terraform-provider-virtplane/launcher/internal/virt"
)

// oneShot runs the one-shot command name (probe, list-domains,
// list-networks): it parses
// --libvirt-uri and --qemu-pid-dir from args, connects to libvirt, and
// prints what run returns as JSON. The exit code is 2 for bad flags, 1
// for a failure.
func oneShot(name string, args []string, run func(conn libvirtConn, uri, pidDir string) (any, error)) int {
	var uri, pidDir string
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.StringVar(&uri, "libvirt-uri", defaultURI(), "libvirt connection URI (env VIRTPLANE_LIBVIRT_URI)")
	fs.StringVar(&pidDir, "qemu-pid-dir", driver.DefaultQEMUPidDir, "where libvirtd writes QEMU pid files")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	conn, err := openLibvirt(uri, virt.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return fail(name, err)
	}
	defer conn.Close()
	out, err := run(conn, uri, pidDir)
	if err != nil {
		return fail(name, err)
	}
	return printJSON(out)
}

func printJSON(v any) int {
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		fmt.Fprintln(os.Stderr, "virtplane-launcher:", err)
		return 1
	}
	return 0
}

func fail(cmd string, err error) int {
	fmt.Fprintf(os.Stderr, "virtplane-launcher %s: %v\n", cmd, err)
	return 1
}

// probe prints launcher.ProbeResult.
func probe(args []string) int { return oneShot("probe", args, probeHost) }

func probeHost(conn libvirtConn, uri, _ string) (any, error) {
	h, err := conn.HostInfo()
	if err != nil {
		return nil, err
	}
	r := launcher.ProbeResult{
		LibvirtURI:      uri,
		LibvirtVersion:  h.LibvirtVersion,
		HypervisorType:  h.HypervisorType,
		QEMUVersion:     h.HypervisorVersion,
		Hostname:        h.Hostname,
		Architecture:    runtime.GOARCH,
		CPUs:            int(h.CPUs),
		MemoryKiB:       h.MemoryKiB,
		LauncherVersion: version,
	}
	r.KVMUsable, r.KVMReason = launcher.KVMUsable()
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		r.KernelVersion = unix.ByteSliceToString(u.Release[:])
		r.Architecture = unix.ByteSliceToString(u.Machine[:])
	}
	return r, nil
}

// listDomains prints every domain with virtplane metadata as
// []launcher.DomainInfo.
func listDomains(args []string) int { return oneShot("list-domains", args, domainInfos) }

func domainInfos(conn libvirtConn, _, pidDir string) (any, error) {
	doms, err := conn.ListAllDomains()
	if err != nil {
		return nil, err
	}
	out := []launcher.DomainInfo{}
	for _, d := range doms {
		info, ok, err := describe(d, pidDir)
		d.Free()
		if err != nil {
			// A domain may vanish between list and query; skip it.
			if errors.Is(err, driver.ErrNoDomain) {
				continue
			}
			return nil, err
		}
		if ok {
			out = append(out, info)
		}
	}
	return out, nil
}

func describe(d driver.Domain, pidDir string) (launcher.DomainInfo, bool, error) {
	s, err := d.GetMetadata(domxml.Namespace)
	if errors.Is(err, driver.ErrNoMetadata) {
		return launcher.DomainInfo{}, false, nil
	}
	if err != nil {
		return launcher.DomainInfo{}, false, err
	}
	md, err := domxml.ParseMetadata(s)
	if err != nil {
		return launcher.DomainInfo{}, false, err
	}
	name, err := d.GetName()
	if err != nil {
		return launcher.DomainInfo{}, false, err
	}
	uuid, err := d.GetUUIDString()
	if err != nil {
		return launcher.DomainInfo{}, false, err
	}
	st, reason, err := d.GetState()
	if err != nil {
		return launcher.DomainInfo{}, false, err
	}
	info := launcher.DomainInfo{
		Name: name, UUID: uuid, State: st.String(), Reason: driver.ReasonName(st, reason),
		VMIUID: md.UID, VMINamespace: md.Namespace, VMIName: md.Name,
		GracePeriodSeconds: md.GracePeriodSeconds, PausedByUser: md.PausedByUser,
		ShutdownRequestedAt: md.ShutdownRequestedAt, NodeFailurePolicy: md.NodeFailurePolicy, Node: md.Node,
	}
	if st.Active() {
		info.QEMUPid = driver.ReadQEMUPid(pidDir, name)
	}
	return info, true, nil
}

// listNetworks prints the active libvirt networks as
// []launcher.NetworkInfo, sorted by name.
func listNetworks(args []string) int { return oneShot("list-networks", args, networkInfos) }

func networkInfos(conn libvirtConn, _, _ string) (any, error) {
	nets, err := conn.ListNetworks()
	if err != nil {
		return nil, err
	}
	out := make([]launcher.NetworkInfo, 0, len(nets)) // [] rather than null when none
	for _, n := range nets {
		out = append(out, launcher.NetworkInfo{Name: n.Name, Bridge: n.Bridge})
	}
	return out, nil
}
