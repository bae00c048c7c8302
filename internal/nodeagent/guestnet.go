package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/virtplane/terraform-provider-virtplane/internal/guestnet"
	"github.com/virtplane/terraform-provider-virtplane/internal/hostns"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher"
)

// startGuestFirewall installs the guest firewall (package guestnet:
// guests' QEMU may not open connections to this host's own addresses,
// loopback included, except the storage endpoints the storage room hands
// it) before the agent touches any guest, and keeps it until ctx ends;
// stop waits for that. A firewall that cannot be installed stops the
// agent: guests that reach the host's loopback reach the agent's API and
// metrics.
//
// uids are QEMU's users (qemuUsers): none when the guests are not QEMU
// processes on this host, and then nothing is installed.
//
// The table goes into the network namespace QEMU inherits from the
// libvirt daemon behind LibvirtURI (found by its socket, package hostns,
// as the node's bridges are; Options.BridgeNetNS when set): tests run
// private libvirtds in namespaces of their own, each node's table in its
// namespace. It stays when the agent stops: guests keep running.
func (a *Agent) startGuestFirewall(ctx context.Context, uids []uint32) (stop func(), err error) {
	if len(uids) == 0 {
		return func() {}, nil // no QEMU on this host (qemuUsers)
	}
	// nil: the agent's own namespace.
	var netns func() (string, error)
	if ns, err := qemuNetNS(a.opts); err != nil {
		// The daemon must be running for anything to work; without
		// it, assume it shares the agent's namespace.
		a.log.Warn("guest firewall: libvirt's daemon not found by its socket; installing in the agent's network namespace", "err", err)
	} else if same, err := guestnet.SameNetNS(ns, "/proc/self/ns/net"); err != nil || !same {
		a.log.Info("guest firewall: installing in libvirt's network namespace, not the agent's", "netns", ns)
		// Found again each time: the daemon may restart.
		netns = func() (string, error) { return qemuNetNS(a.opts) }
	}
	fw, err := guestnet.New(guestnet.Config{UIDs: uids, NetNS: netns, Clock: a.opts.Clock, Logger: a.log})
	if err != nil {
		return nil, err
	}
	ectx, cancel := context.WithTimeout(ctx, 30*time.Second)
	_, err = fw.Ensure(ectx)
	cancel()
	if err != nil {
		return nil, err
	}
	a.firewall.Store(fw)
	rctx, cancelRun := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); fw.Run(rctx) }()
	return func() { cancelRun(); <-done }, nil
}

// qemuNetNS is the network namespace the node's QEMUs run in: the
// libvirt daemon's (Options.BridgeNetNS, else found by its socket).
func qemuNetNS(o Options) (string, error) {
	if o.BridgeNetNS != "" {
		return o.BridgeNetNS, nil
	}
	uri := o.LibvirtURI
	if uri == "" {
		uri = launcher.DefaultLibvirtURI
	}
	return hostns.DaemonNetNS(uri)
}

// storageFirewall hands the storage room's endpoints to the guest
// firewall, once it runs; without one (no QEMU on this host) there is
// nothing to open.
type storageFirewall struct{ a *Agent }

func (s storageFirewall) SetStorageEndpoints(ctx context.Context, eps []netip.AddrPort) error {
	if fw := s.a.firewall.Load(); fw != nil {
		return fw.SetStorageEndpoints(ctx, eps)
	}
	return nil
}

// qemuUsers are the uids and gids QEMU runs as, from libvirt's
// capabilities; nil when this node's guests are not QEMU processes on this
// host (localQEMU), where neither the preflight, the guest firewall nor
// the images' group applies.
func (a *Agent) qemuUsers(ctx context.Context) (uids, gids []uint32, err error) {
	if local, err := a.localQEMU(); err != nil || !local {
		return nil, nil, err
	}
	uctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	uids, gids, err = guestnet.QEMUIDs(uctx, "", a.opts.LibvirtURI)
	if err != nil {
		return nil, nil, fmt.Errorf("which user QEMU runs as: %w", err)
	}
	return uids, gids, nil
}

// localQEMU reports whether this node's guests are QEMU processes on this
// host, the case in which host-side checks and rules apply: the real
// launcher tools on libvirt's local QEMU driver. Tests' fake tools and the
// test driver (test:///default) run no QEMU.
func (a *Agent) localQEMU() (bool, error) {
	if _, real := a.opts.Tools.(ExecTools); !real {
		return false, nil
	}
	return qemuDriverLocal(a.opts.LibvirtURI)
}

// qemuDriverLocal reports whether uri names libvirt's QEMU driver
// (qemu:///system, qemu+unix:///system...) and so guests that are QEMU
// processes; an error when they would run on another host, where a
// firewall here cannot confine them.
func qemuDriverLocal(uri string) (bool, error) {
	u, err := url.Parse(uri)
	if err != nil {
		return false, fmt.Errorf("libvirt URI %q: %w", uri, err)
	}
	driver, transport, _ := strings.Cut(u.Scheme, "+")
	if driver != "qemu" {
		return false, nil
	}
	if (transport != "" && transport != "unix") || (u.Hostname() != "" && u.Hostname() != "localhost") {
		return false, errors.New("guest firewall: libvirt URI " + uri + " names another host: the node agent must run on the host its guests run on")
	}
	return true, nil
}
