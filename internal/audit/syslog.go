package audit

import (
	"fmt"
	"log/syslog"
	"net"
	"net/url"
	"path"
	"strconv"
	"strings"
)

// SyslogAddress is where records are copied to: a local datagram socket
// (unixgram:///dev/log) or a remote syslog server (udp://host:514,
// tcp://host:514).
type SyslogAddress struct {
	// Network is "unixgram", "udp" or "tcp".
	Network string
	// Addr is the socket's path, or host:port.
	Addr string
}

// String is the address as the flag takes it.
func (a SyslogAddress) String() string {
	if a.Network == "unixgram" {
		return "unixgram://" + a.Addr
	}
	return a.Network + "://" + a.Addr
}

// ParseSyslogAddress checks s against the schemes the audit trail may send
// to (an allow-list: unixgram with an absolute path, udp or tcp with
// host:port and nothing else) and returns the address.
func ParseSyslogAddress(s string) (SyslogAddress, error) {
	u, err := url.Parse(s)
	if err != nil {
		return SyslogAddress{}, fmt.Errorf("syslog address %q: %w", s, err)
	}
	bad := func(why string) (SyslogAddress, error) {
		return SyslogAddress{}, fmt.Errorf("syslog address %q: %s; supported forms: unixgram:///path/to/socket, udp://host:port, tcp://host:port", s, why)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" || u.ForceQuery {
		return bad("no user, query or fragment is allowed")
	}
	switch u.Scheme {
	case "unixgram":
		if u.Host != "" {
			return bad("a unixgram address has no host: three slashes before an absolute path")
		}
		if !path.IsAbs(u.Path) || path.Clean(u.Path) != u.Path || u.Path == "/" {
			return bad("the socket must be a clean absolute path")
		}
		return SyslogAddress{Network: "unixgram", Addr: u.Path}, nil
	case "udp", "tcp":
		if u.Path != "" {
			return bad("a network address has no path")
		}
		host, port, err := net.SplitHostPort(u.Host)
		if err != nil || host == "" {
			return bad("the address must be host:port")
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || strings.TrimLeft(port, "0123456789") != "" {
			return bad("the port must be a number from 1 to 65535")
		}
		return SyslogAddress{Network: u.Scheme, Addr: u.Host}, nil
	default:
		return bad(fmt.Sprintf("unsupported scheme %q", u.Scheme))
	}
}

// syslogPriority: audit records are about who may do what, which syslog
// keeps apart from the rest (authpriv, as sudo's and sshd's records).
const (
	syslogPriority = syslog.LOG_AUTHPRIV | syslog.LOG_INFO
	syslogTag      = "virtplane-audit"
)

// dialSyslog connects to a; log/syslog reconnects by itself when a write
// fails.
func dialSyslog(a SyslogAddress) (*syslog.Writer, error) {
	return syslog.Dial(a.Network, a.Addr, syslogPriority, syslogTag)
}
