package driver

import (
	"bufio"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// forward is one port forward of a user (slirp) interface, as QEMU's
// hostfwd rules have it: QEMU listens on hostAddr:hostPort and passes
// what arrives to the guest's guestPort (on slirp's first DHCP address,
// 10.0.2.15).
type forward struct {
	proto     string // tcp or udp
	hostAddr  netip.Addr
	hostPort  int
	guestPort int
}

// forwardOf applies the API's defaults (tcp, 127.0.0.1) to f.
func forwardOf(f *apiv1.PortForward) (forward, error) {
	proto := f.GetProtocol()
	if proto == "" {
		proto = apiv1.DefaultPortForwardProtocol
	}
	addr := f.GetHostAddress()
	if addr == "" {
		addr = apiv1.DefaultPortForwardAddress
	}
	ip, err := netip.ParseAddr(addr)
	if err != nil {
		return forward{}, fmt.Errorf("port forward to guest port %d: host address %q: %w", f.GetGuestPort(), addr, err)
	}
	return forward{proto: proto, hostAddr: ip, hostPort: int(f.GetHostPort()), guestPort: int(f.GetGuestPort())}, nil
}

// String names the forward in errors: "127.0.0.1:18080/tcp → guest 80".
func (f forward) String() string {
	return fmt.Sprintf("%s/%s → guest %d", netip.AddrPortFrom(f.hostAddr, uint16(f.hostPort)), f.proto, f.guestPort)
}

// hostPart is the rule's "proto:addr:port", which hostfwd_remove takes.
// QEMU 7.2 parses only IPv4 host addresses; an IPv6 one is written as
// QEMU's newer versions take it, and QEMU's refusal is reported.
func (f forward) hostPart() string {
	addr := f.hostAddr.String()
	if f.hostAddr.Is6() {
		addr = "[" + addr + "]"
	}
	return fmt.Sprintf("%s:%s:%d", f.proto, addr, f.hostPort)
}

// rule is the hostfwd rule: the guest address left to slirp's default.
func (f forward) rule() string { return fmt.Sprintf("%s-:%d", f.hostPart(), f.guestPort) }

func (f forward) sameHost(g forward) bool {
	return f.proto == g.proto && f.hostAddr == g.hostAddr && f.hostPort == g.hostPort
}

// parseUsernet reads the host forwards of netdev from HMP's `info
// usernet`, which QEMU 7.2 prints as (CRLF line ends):
//
//	Hub -1 (hostua-net-default):
//	  Protocol[State]    FD  Source Address  Port   Dest. Address  Port RecvQ SendQ
//	  TCP[HOST_FORWARD]  16       127.0.0.1 18080       10.0.2.15    80     0     0
//	  UDP[HOST_FORWARD]  17               * 18081       10.0.2.15    53     0     0
//
// "*" is the unspecified address. Lines of open connections (TCP[...] in
// other states) are not forwards.
func parseUsernet(out, netdev string) []forward {
	var fs []forward
	mine := false
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "Hub ") {
			mine = strings.HasSuffix(line, "("+netdev+"):")
			continue
		}
		f := strings.Fields(line)
		if !mine || len(f) < 6 {
			continue
		}
		var proto string
		switch f[0] {
		case "TCP[HOST_FORWARD]":
			proto = "tcp"
		case "UDP[HOST_FORWARD]":
			proto = "udp"
		default:
			continue
		}
		addr := f[2]
		if addr == "*" {
			addr = "0.0.0.0"
		}
		ip, err1 := netip.ParseAddr(addr)
		hp, err2 := strconv.Atoi(f[3])
		gp, err3 := strconv.Atoi(f[5])
		if err1 != nil || err2 != nil || err3 != nil {
			continue
		}
		fs = append(fs, forward{proto: proto, hostAddr: ip, hostPort: hp, guestPort: gp})
	}
	return fs
}

// ensureForwards makes QEMU forward want on netdev, by HMP through
// libvirt (which marks the domain tainted, custom-monitor, in its log: the
// monitor was used behind its back; nothing else changes), adding what `info
// usernet` does not list (hostfwd_add refuses a second rule on the same
// host port, so adding blindly would fail on a launcher that comes back
// to a running domain) and replacing a rule on the same host port that
// goes to another guest port. qemuPid, when known, lets an error say why
// a port could not be bound.
func ensureForwards(nd NetworkDomain, netdev string, want []forward, qemuPid int) error {
	out, err := nd.HumanMonitorCommand("info usernet")
	if err != nil {
		return fmt.Errorf("listing the port forwards of %s: %w", netdev, err)
	}
	have := parseUsernet(out, netdev)
	for _, f := range want {
		exists := false
		for _, h := range have {
			if !h.sameHost(f) {
				continue
			}
			if h.guestPort == f.guestPort {
				exists = true
				break
			}
			if err := hmp(nd, "hostfwd_remove "+netdev+" "+h.hostPart()); err != nil {
				return fmt.Errorf("port forward %s: removing the rule to guest port %d: %w", f, h.guestPort, err)
			}
		}
		if exists {
			continue
		}
		if err := hmp(nd, "hostfwd_add "+netdev+" "+f.rule()); err != nil {
			return fmt.Errorf("port forward %s: %w%s", f, err, bindHint(f, qemuPid, err))
		}
	}
	return nil
}

// hmp runs cmd, whose success HMP prints as nothing (hostfwd_remove
// says what it removed).
func hmp(nd NetworkDomain, cmd string) error {
	out, err := nd.HumanMonitorCommand(cmd)
	if err != nil {
		return err
	}
	out = strings.TrimSpace(out)
	if out == "" || strings.HasPrefix(cmd, "hostfwd_remove") && strings.HasSuffix(out, " removed") {
		return nil
	}
	return fmt.Errorf("QEMU: %s", out)
}

// bindHint says why QEMU could not bind f, which its message ("Could not
// set up host forwarding rule") does not: another socket has the port in
// QEMU's network namespace, or the port is privileged (QEMU runs as an
// unprivileged user under qemu:///system), or an IPv6 address.
func bindHint(f forward, qemuPid int, err error) string {
	switch {
	case f.hostAddr.Is6() && strings.Contains(err.Error(), "Bad host address"):
		return " (this QEMU forwards from IPv4 host addresses only)"
	case !strings.Contains(err.Error(), "Could not set up"):
		return ""
	case qemuPid > 0 && portInUse(qemuPid, f.proto, f.hostPort):
		return fmt.Sprintf(" (%s port %d is in use on the host)", f.proto, f.hostPort)
	case f.hostPort < 1024:
		return fmt.Sprintf(" (port %d is privileged; QEMU runs as an unprivileged user)", f.hostPort)
	}
	return " (is the host address one of this host's?)"
}

// portInUse reports whether a socket of proto is bound to port in the
// network namespace of process pid: a TCP listener, or any UDP socket.
func portInUse(pid int, proto string, port int) bool {
	for _, v := range []string{"", "6"} {
		f, err := os.Open(filepath.Join("/proc", strconv.Itoa(pid), "net", proto+v))
		if err != nil {
			continue
		}
		found := procNetHasPort(f, proto, port)
		f.Close()
		if found {
			return true
		}
	}
	return false
}

// procNetHasPort scans a /proc/net/{tcp,udp}[6] table: "sl local_address
// rem_address st ...", addresses as hex ADDR:PORT, state 0A for LISTEN.
func procNetHasPort(f *os.File, proto string, port int) bool {
	sc := bufio.NewScanner(f)
	sc.Scan() // the header
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 4 {
			continue
		}
		_, hexPort, ok := strings.Cut(fields[1], ":")
		if !ok {
			continue
		}
		p, err := strconv.ParseUint(hexPort, 16, 16)
		if err != nil || int(p) != port {
			continue
		}
		if proto == "udp" || fields[3] == "0A" {
			return true
		}
	}
	return false
}
