// Package migrationdest is the one rule for a live migration's
// destination: the libvirt URI the source host's libvirtd connects to
// (peer-to-peer) and the address QEMU's stream goes to.
//
// The source's libvirtd opens whatever URI it is handed, as root: a
// qemu+ext:///system?command=/path URI runs that program, a qemu+ssh one
// runs ssh with the URI's options, and any host is reachable. So the
// destination is built by the server (Policy.Build, the migration
// controller's handoff) from what it knows: the target node's registered
// migration address and the cluster's transport and port, both operator
// configuration. No API caller may write it (the API server refuses any
// change), and whoever opens it checks it with Validate first: the source
// node agent (before it asks its launcher; also for launchers started
// before this rule, which outlive agent upgrades) and the launcher
// (before it calls libvirt), so a destination that reached the store some
// other way (old data, a store written to directly) still opens nothing
// but a libvirtd on a unicast address.
//
// The package imports nothing of the module: the API's validation, the
// controllers, the node agent and the launcher all use it.
package migrationdest

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// Transports of libvirt's remote driver a destination may use: TLS with
// libvirt's certificates (the default), or plain TCP when the operator
// chose it for a private network.
const (
	TransportTLS = "tls"
	TransportTCP = "tcp"
)

// libvirtd's default ports for the two transports (libvirtd.conf's
// tls_port and tcp_port).
const (
	DefaultPortTLS = 16514
	DefaultPortTCP = 16509
)

// path is the only libvirt driver path a destination names: the QEMU
// driver's system instance, where virtplane's domains live.
const path = "/system"

// transports lists what Policy.Transport takes.
func transports() []string { return []string{TransportTLS, TransportTCP} }

// scheme is the URI scheme of a transport.
func scheme(transport string) string { return "qemu+" + transport }

// Destination is where one migration goes.
type Destination struct {
	// LibvirtURI is the target's libvirtd, e.g.
	// qemu+tls://10.0.0.2:16514/system.
	LibvirtURI string
	// Address is the target's migration address, QEMU's stream's
	// destination; the URI's host is this address.
	Address string
}

// Policy is the cluster's: how sources reach targets (Transport, Port)
// and which addresses nodes may register (Networks). Operator
// configuration of the server (serve --migration-transport,
// --migration-libvirt-port, --migration-networks); the zero value is TLS
// on libvirtd's TLS port, any unicast address.
type Policy struct {
	// Transport is TransportTLS (also when empty) or TransportTCP.
	Transport string
	// Port is the targets' libvirtd port; 0 is the transport's default.
	Port int
	// Networks, when not empty, are the only networks nodes' migration
	// addresses may be in.
	Networks []netip.Prefix
}

// Validate refuses a policy that cannot work, naming the flag.
func (p Policy) Validate() error {
	if p.Transport != "" && !slices.Contains(transports(), p.Transport) {
		return fmt.Errorf("--migration-transport: unsupported value %q: supported values: %s", p.Transport, strings.Join(transports(), ", "))
	}
	if p.Port < 0 || p.Port > 65535 {
		return fmt.Errorf("--migration-libvirt-port: %d is not a port (1-65535, or 0 for the transport's default)", p.Port)
	}
	for _, n := range p.Networks {
		if !n.IsValid() || n != n.Masked() {
			return fmt.Errorf("--migration-networks: %s is not a network address (want %s)", n, n.Masked())
		}
	}
	return nil
}

// transport is the policy's transport, the default filled in.
func (p Policy) transport() string {
	if p.Transport == "" {
		return TransportTLS
	}
	return p.Transport
}

// port is the policy's libvirtd port, the transport's default filled in.
func (p Policy) port() int {
	switch {
	case p.Port > 0:
		return p.Port
	case p.transport() == TransportTCP:
		return DefaultPortTCP
	}
	return DefaultPortTLS
}

// CheckAddress reports why a node may not register s as its migration
// address: not a unicast IP literal (ParseAddress), or outside the
// operator's networks.
func (p Policy) CheckAddress(s string) error {
	a, err := ParseAddress(s)
	if err != nil {
		return err
	}
	if len(p.Networks) > 0 && !slices.ContainsFunc(p.Networks, func(n netip.Prefix) bool { return n.Contains(a) }) {
		nets := make([]string, len(p.Networks))
		for i, n := range p.Networks {
			nets[i] = n.String()
		}
		return fmt.Errorf("is not in the networks migrations may use (--migration-networks %s)", strings.Join(nets, ","))
	}
	return nil
}

// Build is the destination of a target node registered with address: the
// only way a destination is made.
func (p Policy) Build(address string) (Destination, error) {
	if err := p.CheckAddress(address); err != nil {
		return Destination{}, fmt.Errorf("migration address %q %w", address, err)
	}
	a := netip.MustParseAddr(address)
	return Destination{LibvirtURI: uri(p.transport(), a, p.port()), Address: address}, nil
}

// uri is the canonical destination URI.
func uri(transport string, a netip.Addr, port int) string {
	return scheme(transport) + "://" + net.JoinHostPort(a.String(), strconv.Itoa(port)) + path
}

// ParseAddress parses a migration address: an IP literal in canonical
// form (as netip prints it, so that one address has one spelling and two
// nodes cannot claim one host under two), without a zone, unicast, and
// neither loopback nor unspecified (every node has those: they name no
// host in particular).
func ParseAddress(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	switch {
	case err != nil:
		return netip.Addr{}, errors.New("is not an IP address")
	case a.Zone() != "":
		return netip.Addr{}, errors.New("must not have a zone")
	case a.Is4In6():
		return netip.Addr{}, fmt.Errorf("is an IPv4-mapped IPv6 address: write it as %s", a.Unmap())
	case a.String() != s:
		return netip.Addr{}, fmt.Errorf("must be written as %s", a)
	case a.IsLoopback():
		return netip.Addr{}, errors.New("is a loopback address: every host has it")
	case a.IsUnspecified():
		return netip.Addr{}, errors.New("is the unspecified address")
	case a.IsMulticast():
		return netip.Addr{}, errors.New("is a multicast address")
	case !a.IsGlobalUnicast() && !a.IsLinkLocalUnicast():
		return netip.Addr{}, errors.New("is not a unicast address")
	}
	return a, nil
}

// Validate reports why a migration must not go to (uri, address): the
// address is not a migration address (ParseAddress), or the URI is not
// exactly scheme://address:port/system with scheme qemu+tls or qemu+tcp:
// no user, query (where ext's command= and ssh's options live) or
// fragment, the host that very address, a numeric port. What passes is
// what some Policy.Build makes, spelt the same way, so no URI parser
// (Go's here, libvirt's in the daemon) can read it differently.
func Validate(rawURI, address string) error {
	a, err := ParseAddress(address)
	if err != nil {
		return fmt.Errorf("address %q %w", address, err)
	}
	u, err := url.Parse(rawURI)
	if err != nil {
		return errors.New("is not a URI")
	}
	schemes := []string{scheme(TransportTLS), scheme(TransportTCP)}
	switch {
	case !slices.Contains(schemes, u.Scheme):
		return fmt.Errorf("scheme %q is not one of %s", u.Scheme, strings.Join(schemes, ", "))
	case u.Opaque != "":
		return errors.New("must be scheme://host:port/system")
	case u.User != nil:
		return errors.New("must not name a user")
	case u.RawQuery != "" || u.ForceQuery:
		return errors.New("must not have a query (libvirt reads transport options, such as ext's command, from it)")
	case u.Fragment != "":
		return errors.New("must not have a fragment")
	case u.Path != path:
		return fmt.Errorf("path %q must be %s", u.Path, path)
	}
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil {
		return errors.New("must name the host and port, host:port")
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 1 || p > 65535 || strconv.Itoa(p) != port {
		return fmt.Errorf("port %q is not a port number", port)
	}
	if h, err := netip.ParseAddr(host); err != nil || h != a {
		return fmt.Errorf("host %q must be the target's migration address %s", host, address)
	}
	if want := uri(strings.TrimPrefix(u.Scheme, "qemu+"), a, p); rawURI != want {
		return fmt.Errorf("must be written as %s", want)
	}
	return nil
}
