package ceph

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"
)

// QEMUConf is the ceph.conf a node gives QEMU's rbd driver (a disk's
// <config file>): without it librados reads the host's /etc/ceph/ceph.conf
// if any, and waits 300 s for a monitor that does not answer. It bounds
// the monitor waits only, with the CLIs' ConnectTimeout, and holds no
// secret (the key reaches QEMU as a libvirt secret).
//
// It never sets rados_osd_op_timeout: that bounds every OSD operation of
// a running guest too, and turned an 8 s OSD stall into an I/O error in
// the guest (docs/notes/storage-probes.md). An OSD that does not answer
// at start is bounded by the launcher instead.
func QEMUConf() []byte {
	secs := strconv.Itoa(int(ConnectTimeout / time.Second))
	return []byte("# written by virtplane: bounded waits for QEMU's rbd disks; no secret\n" +
		"[global]\n" +
		"client_mount_timeout = " + secs + "\n" +
		"rados_mon_op_timeout = " + secs + "\n")
}

// ErrNoCephx: the cluster's monitors accept a client that does not
// authenticate. Every process that reaches them, a guest through its
// user-mode network among them, could then read and write its pools.
var ErrNoCephx = errors.New("the monitors accept clients without cephx authentication")

// CheckCephx returns ErrNoCephx when the monitors accept a client that
// offers no authentication (auth_client_required none), and nil when they
// refuse it: what a guest that reaches them could do, tried rather than
// read from the cluster's settings (auth_service_required), which a
// 'profile rbd' user may not read. Other failures (no monitor answered)
// are returned as they are.
func (c *Conn) CheckCephx(ctx context.Context) error {
	secs := strconv.Itoa(int(ConnectTimeout / time.Second))
	// No key file: the client has nothing but its name.
	_, err := c.exec(ctx, "ceph",
		"--conf", "/dev/null",
		"--mon-host", strings.Join(c.Monitors, ","),
		"--id", c.User,
		"--auth-client-required", "none",
		"--client-mount-timeout", secs,
		"--rados-mon-op-timeout", secs,
		"--no-mon-config",
		"mon", "dump", "--format", "json")
	switch {
	case err == nil:
		return ErrNoCephx
	case errors.Is(err, ErrDenied):
		return nil
	}
	return fmt.Errorf("checking that the monitors require cephx: %w", err)
}

// Endpoints are the addresses the cluster's clients connect to: every
// public messenger address (v2 and v1) of its monitors, from the monmap
// (the class's monitor list may name only some of them), and of its OSDs,
// from the osdmap, plus the connection's own monitor list. The OSDs'
// cluster and heartbeat addresses are left out: clients never use them.
// They are what a node's guest firewall lets QEMU reach when they are
// local to the node (a hyperconverged host; package guestnet).
func (c *Conn) Endpoints(ctx context.Context) ([]netip.AddrPort, error) {
	var out []netip.AddrPort
	for _, m := range c.Monitors {
		if ap, ok := endpoint(m); ok {
			out = append(out, ap)
		}
	}
	mons, err := c.run(ctx, "ceph", "mon", "dump", "--format", "json")
	if err != nil {
		return nil, fmt.Errorf("ceph mon dump: %w", err)
	}
	var monmap struct {
		Mons []struct {
			PublicAddrs addrvec `json:"public_addrs"`
		} `json:"mons"`
	}
	if err := json.Unmarshal(mons, &monmap); err != nil {
		return nil, fmt.Errorf("ceph mon dump: %w", err)
	}
	for _, m := range monmap.Mons {
		out = append(out, m.PublicAddrs.endpoints()...)
	}
	osds, err := c.run(ctx, "ceph", "osd", "dump", "--format", "json")
	if err != nil {
		return nil, fmt.Errorf("ceph osd dump: %w", err)
	}
	var osdmap struct {
		OSDs []struct {
			PublicAddrs addrvec `json:"public_addrs"`
		} `json:"osds"`
	}
	if err := json.Unmarshal(osds, &osdmap); err != nil {
		return nil, fmt.Errorf("ceph osd dump: %w", err)
	}
	for _, o := range osdmap.OSDs {
		out = append(out, o.PublicAddrs.endpoints()...)
	}
	return SortEndpoints(out), nil
}

// addrvec is a Ceph entity's address vector, as `--format json` prints it.
type addrvec struct {
	Addrvec []struct {
		Type string `json:"type"` // v2, v1
		Addr string `json:"addr"` // "10.1.2.3:6800", "[fd00::1]:6800"
	} `json:"addrvec"`
}

func (v addrvec) endpoints() []netip.AddrPort {
	var out []netip.AddrPort
	for _, a := range v.Addrvec {
		if ap, ok := endpoint(a.Addr); ok {
			out = append(out, ap)
		}
	}
	return out
}

// endpoint parses "ip:port"; an OSD that never came up has a blank or
// unspecified address, which is left out.
func endpoint(s string) (netip.AddrPort, bool) {
	ap, err := netip.ParseAddrPort(s)
	if err != nil || ap.Port() == 0 || ap.Addr().IsUnspecified() {
		return netip.AddrPort{}, false
	}
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()), true
}

// SortEndpoints sorts eps and drops repeats, in place.
func SortEndpoints(eps []netip.AddrPort) []netip.AddrPort {
	slices.SortFunc(eps, func(a, b netip.AddrPort) int { return a.Compare(b) })
	return slices.Compact(eps)
}
