// Package guestnet keeps guests off the host they run on.
//
// A VM's NICs are QEMU user-mode networking (slirp): every connection a
// guest opens becomes a socket of the QEMU process on the host. slirp
// maps the gateway, 10.0.2.2 (and fec0::2), to the host's 127.0.0.1 (and
// ::1), so a guest reaches whatever listens on the host's loopback: the
// agent's /metrics and pprof, its API, a loopback etcd listener. Not
// naming the gateway does not help: slirp passes other destinations
// through, so packets a guest sends to 127.0.0.1 itself, or to any other
// address of the host, reach the host's services too (the guest test in
// internal/e2e shows all three).
//
// Neither QEMU 7.2 nor libvirt 9.0 can turn this off per domain: libslirp
// has disable_host_loopback, but QEMU never sets it (no -netdev user
// option), and it would only cover the gateway address anyway; libvirt's
// passt backend cannot pass passt's --no-map-gw; restrict=on cuts all
// outbound traffic. So the host refuses it: the Firewall owns an
// nftables table, virtplane_guestnet (family inet), in the network
// namespace QEMU runs in (libvirt's daemon's), whose output hook rejects
// new connections from sockets of the QEMU user (libvirt's DAC label) to
// any address of the host itself (fib daddr type local: 127.0.0.0/8, ::1
// and every other local address), except DNS (slirp forwards the guest's
// resolver to the host's, which may listen on loopback) and the storage
// endpoints QEMU itself uses on a hyperconverged host (exact address and
// port pairs of a Ceph cluster's monitors and OSDs, SetStorageEndpoints;
// storage.go says why no narrower exception exists). TCP is refused
// with a reset, so the guest sees "connection refused"; QEMU's sends of
// UDP and the rest fail. Replies of QEMU's own listeners (VNC, a TCP
// hostfwd), a UDP hostfwd's answers to its client (conntrack's reply
// direction: the client sent first) and connections older than the table
// pass.
//
// What stays reachable: every address that is not the host's own, as with
// any NAT: the LAN, other hosts' services (other nodes' agents and etcd
// among them: protect those with their own firewall and TLS), link-local
// and cloud metadata addresses, and addresses routed into other network
// namespaces on the host (containers). Processes of the QEMU user other
// than QEMU are confined the same way.
//
// The table is installed atomically and idempotently, kept (Run puts it
// back within a period if a firewall reload flushes it), and never
// removed by virtplane: guests outlive the agent. To remove it by hand:
// nft delete table inet virtplane_guestnet.
package guestnet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// DefaultPeriod is how often Run checks the table: a flushed ruleset
// leaves guests unconfined at most this long.
const DefaultPeriod = 10 * time.Second

// Config configures a Firewall.
type Config struct {
	// UIDs are the users QEMU runs as (QEMUIDs); required, never 0:
	// root's sockets are the host's own.
	UIDs []uint32
	// NetNS returns the file of the network namespace QEMU runs in
	// (DaemonNetNS), asked before each nft run since the daemon may
	// restart; nil is the caller's own namespace.
	NetNS func() (string, error)
	// NFT is the nft binary; "nft" from PATH when empty.
	NFT string
	// Period is how often Run checks the table; default DefaultPeriod.
	Period time.Duration
	Clock  clock.WithTicker
	Logger *slog.Logger
}

// Firewall installs and keeps the table.
type Firewall struct {
	nft    nft
	rules  []rule
	period time.Duration
	clock  clock.WithTicker
	log    *slog.Logger

	mu        sync.Mutex // one Ensure at a time
	installed bool       // by this Firewall, at least once
	eps       endpoints  // the storage sets' elements (SetStorageEndpoints)
}

// New checks cfg; it runs nothing.
func New(cfg Config) (*Firewall, error) {
	if len(cfg.UIDs) == 0 {
		return nil, errors.New("guest firewall: the QEMU user is required")
	}
	if slices.Contains(cfg.UIDs, 0) {
		return nil, errors.New("guest firewall: QEMU runs as root (libvirt's qemu.conf user), so its sockets cannot be told from the host's own: run QEMU as its own user (Debian's libvirt-qemu)")
	}
	uids := slices.Clone(cfg.UIDs)
	slices.Sort(uids)
	uids = slices.Compact(uids)
	f := &Firewall{
		nft:    nft{path: cfg.NFT, netns: cfg.NetNS},
		rules:  rules(uids),
		period: cfg.Period,
		clock:  cfg.Clock,
		log:    cfg.Logger,
	}
	if f.nft.path == "" {
		f.nft.path = "nft"
	}
	if f.period <= 0 {
		f.period = DefaultPeriod
	}
	if f.clock == nil {
		f.clock = clock.RealClock{}
	}
	if f.log == nil {
		f.log = slog.Default()
	}
	f.log = f.log.With("component", "guestnet", "table", family+" "+Table, "qemu_uids", uids)
	return f, nil
}

// Ensure installs the table unless it already holds exactly the
// firewall's rules, and reports whether it did.
func (f *Firewall) Ensure(ctx context.Context) (changed bool, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	listing, err := f.nft.listTable(ctx)
	if err != nil {
		return false, fmt.Errorf("guest firewall: %w", err)
	}
	why := "absent"
	if listing != nil {
		if why, err = verify(listing, f.rules, f.eps); err != nil {
			return false, fmt.Errorf("guest firewall: %w", err)
		}
		if why == "" {
			f.installed = true
			return false, nil
		}
	}
	if err := f.nft.apply(ctx, installDocument(f.rules, f.eps)); err != nil {
		return false, fmt.Errorf("guest firewall: installing: %w", err)
	}
	if f.installed {
		f.log.Warn("guest firewall was changed behind the agent's back; put back", "was", why)
	} else {
		f.log.Info("guest firewall installed: guests cannot open connections to this host's addresses", "was", why)
	}
	f.installed = true
	return true, nil
}

// Run checks the table every period, putting it back if it changed,
// until ctx ends. Failures are logged and retried next period.
func (f *Firewall) Run(ctx context.Context) {
	t := f.clock.NewTicker(f.period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			if _, err := f.Ensure(ctx); err != nil && ctx.Err() == nil {
				f.log.Error("guest firewall check failed; guests may reach this host", "err", err)
			}
		}
	}
}
