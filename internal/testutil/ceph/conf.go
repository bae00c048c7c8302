package ceph

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"regexp"
	"strings"
)

// Ports of the monitor: msgr2 and the legacy msgr1.
const (
	monPortV2 = 3300
	monPortV1 = 6789
)

// defaultBlockSize is the OSD's BlueStore file: sparse, so it costs only
// what is written.
const defaultBlockSize = 10 << 30

// pathChars are the characters a path may hold in ceph.conf: '#' and ';'
// start comments there, '$' expands a metavariable, '\' escapes, and
// whitespace or a newline would end or split the value.
var pathChars = regexp.MustCompile(`^/[A-Za-z0-9/_.+-]*$`)

// nameChars are the characters of pool, user and namespace names: they
// become arguments of ceph and rbd, and must never pass for an option.
var nameChars = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)

// checkName refuses a name that nameChars does not allow, naming field.
func checkName(field, v string) error {
	if len(v) > 64 || !nameChars.MatchString(v) {
		return fmt.Errorf("ceph: %s %q: want 1 to 64 of A-Z a-z 0-9 _ . -, not starting with _ . -", field, v)
	}
	return nil
}

// complete checks opts and fills in the defaults.
func (o *Options) complete() error {
	if o.Dir == "" || !filepath.IsAbs(o.Dir) || filepath.Clean(o.Dir) != o.Dir || !pathChars.MatchString(o.Dir) || o.Dir == "/" {
		return fmt.Errorf("ceph: Options.Dir %q: want a clean absolute path of A-Z a-z 0-9 / _ . + -, not /", o.Dir)
	}
	if err := checkName("Options.NetNS", o.NetNS); err != nil {
		return err
	}
	a, err := netip.ParseAddr(o.Addr)
	if err != nil || !a.Is4() || a.IsUnspecified() || a.IsMulticast() {
		return fmt.Errorf("ceph: Options.Addr %q: want a unicast IPv4 address", o.Addr)
	}
	if o.Pool == "" {
		o.Pool = "vp"
	}
	if err := checkName("Options.Pool", o.Pool); err != nil {
		return err
	}
	if o.BlockSize == 0 {
		o.BlockSize = defaultBlockSize
	}
	if o.BlockSize < 1<<30 {
		return fmt.Errorf("ceph: Options.BlockSize %d: want at least 1 GiB (BlueStore's own metadata takes hundreds of MiB)", o.BlockSize)
	}
	if o.Log == nil {
		o.Log = discard{}
	}
	return nil
}

type discard struct{}

func (discard) Logf(string, ...any) {}

// monHost is the monitor's address vector, as mon host and monmaptool
// take it.
func monHost(addr string) string {
	return fmt.Sprintf("[v2:%s:%d,v1:%s:%d]", addr, monPortV2, addr, monPortV1)
}

// renderConf is the cluster's ceph.conf: the reference's
// (../shared/reference/ceph-rbd.md), every path under dir. opts is
// checked (complete): no value here can break the file's syntax.
func renderConf(fsid string, opts Options) string {
	d, ip := opts.Dir, opts.Addr
	global := [][2]string{
		{"fsid", fsid},
		{"mon host", monHost(ip)},
		{"public addr", ip},
		// Without it the OSD binds its cluster and heartbeat ports on
		// 0.0.0.0.
		{"cluster addr", ip},
		{"auth cluster required", "cephx"},
		{"auth service required", "cephx"},
		{"auth client required", "cephx"},
		// Else HEALTH_WARN.
		{"auth allow insecure global id reclaim", "false"},
		{"keyring", d + "/$cluster.$name.keyring"},
		{"run dir", d + "/run"},
		{"admin socket", d + "/run/$cluster-$name.asok"},
		{"pid file", d + "/run/$cluster-$name.pid"},
		{"log file", d + "/log/$cluster-$name.log"},
		{"mon data", d + "/mon/$cluster-$id"},
		{"osd data", d + "/osd/$cluster-$id"},
		{"osd pool default size", "1"},
		{"osd pool default min size", "1"},
		{"osd pool default pg num", "8"},
		{"osd pool default pgp num", "8"},
		{"osd pool default pg autoscale mode", "off"},
		{"mon allow pool size one", "true"},
		{"mon allow pool delete", "true"},
		// Else HEALTH_WARN for pools of size 1.
		{"mon warn on pool no redundancy", "false"},
		// A build disk is often fuller than the default 30% free.
		{"mon data avail warn", "2"},
		{"mon data avail crit", "1"},
		{"osd crush chooseleaf type", "0"},
		{"osd objectstore", "bluestore"},
		// BlueStore makes osd/ceph-0/block itself, sparse.
		{"bluestore block create", "true"},
		{"bluestore block size", fmt.Sprint(opts.BlockSize)},
		{"bluestore fsck on mkfs", "false"},
		{"bluestore fsck on mount", "false"},
		{"osd memory target", "939524096"},
		// These two halve the start (11.4 s to 6 s, measured).
		{"paxos propose interval", "0.05"},
		{"paxos min wait", "0.01"},
	}
	// Clients only (the CLIs): a monitor that is gone fails a call in
	// seconds, not after librados' default 300 s.
	client := [][2]string{
		{"client mount timeout", "30"},
	}
	var b strings.Builder
	b.WriteString("# written by internal/testutil/ceph\n[global]\n")
	for _, kv := range global {
		fmt.Fprintf(&b, "%s = %s\n", kv[0], kv[1])
	}
	b.WriteString("[client]\n")
	for _, kv := range client {
		fmt.Fprintf(&b, "%s = %s\n", kv[0], kv[1])
	}
	return b.String()
}
