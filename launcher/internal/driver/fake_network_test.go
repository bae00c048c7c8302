package driver

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/virtplane/terraform-provider-virtplane/launcher/internal/domxml"
)

// The fake's network: QEMU's slirp host forwards behind HMP (answering
// as QEMU 7.2 does: nothing on success, a message on failure) and the
// addresses libvirt's sources report.

// fakeNet is one domain's network state.
type fakeNet struct {
	forwards map[string][]forward // by netdev id
	// addrs and addrErr are what InterfaceAddresses returns per source.
	addrs   map[AddressSource][]GuestInterface
	addrErr map[AddressSource]error
}

var _ NetworkDomain = (*fakeDomain)(nil)

// network returns the domain's network state, made on first use; call
// with c.mu held.
func (s *fakeState) network() *fakeNet {
	if s.net == nil {
		s.net = &fakeNet{forwards: map[string][]forward{},
			addrs: map[AddressSource][]GuestInterface{}, addrErr: map[AddressSource]error{}}
	}
	return s.net
}

// setBusy makes QEMU fail to bind host port p, as if another socket had
// it.
func (c *fakeConn) setBusy(p int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.busyPorts == nil {
		c.busyPorts = map[int]bool{}
	}
	c.busyPorts[p] = true
}

// withNet runs fn on the domain's network state under the lock.
func (c *fakeConn) withNet(name string, fn func(n *fakeNet)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fn(c.doms[name].network())
}

func (d *fakeDomain) HumanMonitorCommand(cmd string) (out string, err error) {
	verb, _, _ := strings.Cut(cmd, " ")
	err = d.with("HMP "+verb, func(s *fakeState) error {
		if !s.state.Active() {
			return fmt.Errorf("Requested operation is not valid: domain is not running")
		}
		n := s.network()
		live, err := domxml.ParseLiveNetwork(s.xml)
		if err != nil {
			return err
		}
		netdevs := map[string]bool{}
		for _, li := range live.Interfaces {
			if li.Kind == domxml.KindUser {
				netdevs[domxml.NetdevID(li.Alias)] = true
			}
		}
		f := strings.Fields(cmd)
		switch {
		case cmd == "info usernet":
			var b strings.Builder
			for netdev := range netdevs {
				fmt.Fprintf(&b, "Hub -1 (%s):\r\n  Protocol[State]    FD  Source Address  Port   Dest. Address  Port RecvQ SendQ\r\n", netdev)
				for _, fw := range n.forwards[netdev] {
					addr := fw.hostAddr.String()
					if fw.hostAddr.IsUnspecified() {
						addr = "*"
					}
					fmt.Fprintf(&b, "  %s[HOST_FORWARD]  16 %15s %5d       10.0.2.15 %5d     0     0\r\n", strings.ToUpper(fw.proto), addr, fw.hostPort, fw.guestPort)
				}
				// A connection is no forward.
				b.WriteString("  TCP[ESTABLISHED]   19       10.0.2.15 40000        10.0.2.2  8080     0     0\r\n")
			}
			out = b.String()
		case len(f) == 3 && f[0] == "hostfwd_add":
			if !netdevs[f[1]] {
				out = fmt.Sprintf("unrecognized netdev id '%s'\r\n", f[1])
				return nil
			}
			fw, ok := parseRule(f[2])
			switch {
			case !ok:
				out = fmt.Sprintf("Invalid host forwarding rule '%s' (Bad host address)\r\n", f[2])
			case d.c.busyPorts[fw.hostPort] || n.has(f[1], fw):
				out = fmt.Sprintf("Could not set up host forwarding rule '%s'\r\n", f[2])
			default:
				n.forwards[f[1]] = append(n.forwards[f[1]], fw)
			}
		case len(f) == 3 && f[0] == "hostfwd_remove":
			fw, ok := parseRule(f[2] + "-:1")
			if !ok || !n.has(f[1], fw) {
				out = fmt.Sprintf("invalid format or host forwarding rule for %s not found\r\n", f[2])
				return nil
			}
			var kept []forward
			for _, h := range n.forwards[f[1]] {
				if !h.sameHost(fw) {
					kept = append(kept, h)
				}
			}
			n.forwards[f[1]] = kept
			out = fmt.Sprintf("host forwarding rule for %s removed\r\n", f[2])
		default:
			out = "unknown command: '" + f[0] + "'\r\n"
		}
		return nil
	})
	return out, err
}

func (n *fakeNet) has(netdev string, fw forward) bool {
	for _, h := range n.forwards[netdev] {
		if h.sameHost(fw) {
			return true
		}
	}
	return false
}

// parseRule reads "proto:addr:port-:guestport" with an IPv4 or empty
// host address, as QEMU 7.2 does.
func parseRule(rule string) (forward, bool) {
	host, guest, ok := strings.Cut(rule, "-:")
	if !ok {
		return forward{}, false
	}
	parts := strings.Split(host, ":")
	if len(parts) != 3 {
		return forward{}, false
	}
	addr := netip.IPv4Unspecified()
	if parts[1] != "" {
		var err error
		if addr, err = netip.ParseAddr(parts[1]); err != nil || !addr.Is4() {
			return forward{}, false
		}
	}
	hp, err1 := strconv.Atoi(parts[2])
	gp, err2 := strconv.Atoi(guest)
	if err1 != nil || err2 != nil {
		return forward{}, false
	}
	return forward{proto: parts[0], hostAddr: addr, hostPort: hp, guestPort: gp}, true
}

func (d *fakeDomain) InterfaceAddresses(src AddressSource) (out []GuestInterface, err error) {
	err = d.with(fmt.Sprintf("InterfaceAddresses(%d)", src), func(s *fakeState) error {
		n := s.network()
		if e := n.addrErr[src]; e != nil {
			return e
		}
		out = append(out, n.addrs[src]...)
		return nil
	})
	return out, err
}

// neighbours is the harness's Config.Neighbours: the fake domain's
// SourceARP entries, for QEMU's pid as written by writeQEMUPid.
func (h *harness) neighbours(pid int) ([]GuestInterface, error) {
	if pid != testQEMUPid {
		return nil, fmt.Errorf("no process %d", pid)
	}
	h.conn.mu.Lock()
	defer h.conn.mu.Unlock()
	s := h.conn.doms[testDomain]
	if s == nil {
		return nil, nil
	}
	n := s.network()
	return append([]GuestInterface(nil), n.addrs[SourceARP]...), n.addrErr[SourceARP]
}
