package imagepolicy

import (
	"fmt"
	"net/netip"
	"slices"
)

// RefusedError is a destination the policy refuses.
type RefusedError struct {
	Addr netip.Addr
	// Why, as a noun phrase: "a loopback address".
	Why string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("refused: %s is %s; allow it with --image-source-cidrs", e.Addr, e.Why)
}

// Check decides whether a node may connect to addr to download an image:
// nil when it may, a *RefusedError saying why not. own are the node's own
// addresses. It is an allow-list: global unicast addresses are allowed,
// except the node's own; every other address (loopback, link-local with
// cloud metadata at 169.254.169.254, unspecified, multicast, broadcast,
// private, shared, documentation, benchmarking, reserved, IPv6 outside
// 2000::/3, and the IPv6 forms that embed an IPv4 address) only inside
// p.SourceCIDRs, which allow any address, the node's own included. An
// IPv4-mapped IPv6 address is judged as the IPv4 address it maps.
func (p Policy) Check(addr netip.Addr, own []netip.Addr) error {
	if !addr.IsValid() {
		return &RefusedError{Addr: addr, Why: "not an IP address"}
	}
	a := addr.WithZone("").Unmap()
	for _, c := range p.SourceCIDRs {
		if c.Contains(a) {
			return nil
		}
	}
	if why := notGlobal(a); why != "" {
		return &RefusedError{Addr: addr, Why: why}
	}
	if slices.ContainsFunc(own, func(o netip.Addr) bool { return o.WithZone("").Unmap() == a }) {
		return &RefusedError{Addr: addr, Why: "an address of this node"}
	}
	return nil
}

// block is a range that is not global unicast, and what it is.
type block struct {
	prefix netip.Prefix
	why    string
}

func blocks(bs ...block) []block { return bs }

func b(cidr, why string) block { return block{netip.MustParsePrefix(cidr), why} }

// IANA's special-purpose registries (RFC 6890 and updates): the IPv4
// ranges that are not global unicast. What is not here is allowed.
var ipv4Blocks = blocks(
	b("0.0.0.0/8", "the unspecified address or \"this network\" (0.0.0.0/8)"),
	b("10.0.0.0/8", "a private address (RFC 1918)"),
	b("100.64.0.0/10", "a shared address (RFC 6598, carrier-grade NAT)"),
	b("127.0.0.0/8", "a loopback address"),
	b("169.254.0.0/16", "a link-local address (cloud metadata services answer at 169.254.169.254)"),
	b("172.16.0.0/12", "a private address (RFC 1918)"),
	b("192.0.0.0/24", "an IETF protocol assignment (192.0.0.0/24)"),
	b("192.0.2.0/24", "a documentation address"),
	b("192.88.99.0/24", "a 6to4 relay anycast address"),
	b("192.168.0.0/16", "a private address (RFC 1918)"),
	b("198.18.0.0/15", "a benchmarking address (RFC 2544)"),
	b("198.51.100.0/24", "a documentation address"),
	b("203.0.113.0/24", "a documentation address"),
	b("224.0.0.0/4", "a multicast address"),
	b("255.255.255.255/32", "the broadcast address"),
	b("240.0.0.0/4", "a reserved address (240.0.0.0/4)"),
)

// ipv6Global is IPv6 global unicast; ipv6Blocks are the ranges in it that
// are not global, or that carry an IPv4 address a relay would reach.
var ipv6Global = netip.MustParsePrefix("2000::/3")

var ipv6Blocks = blocks(
	b("2001:db8::/32", "a documentation address"),
	b("2001::/32", "a Teredo address (it embeds an IPv4 address)"),
	b("2001::/23", "an IETF protocol assignment (2001::/23)"),
	b("2002::/16", "a 6to4 address (it embeds an IPv4 address)"),
	b("3fff::/20", "a documentation address"),
)

// ipv6Outside names the common ranges outside 2000::/3, for the message.
var ipv6Outside = blocks(
	b("::/128", "the unspecified address"),
	b("::1/128", "a loopback address"),
	b("64:ff9b::/96", "a NAT64 address (it embeds an IPv4 address)"),
	b("64:ff9b:1::/48", "a NAT64 address (it embeds an IPv4 address)"),
	b("::/96", "an IPv4-compatible address (deprecated)"),
	b("fc00::/7", "a unique local address (fc00::/7)"),
	b("fe80::/10", "a link-local address"),
	b("fec0::/10", "a site-local address (deprecated)"),
	b("ff00::/8", "a multicast address"),
)

// notGlobal says what a (unmapped, no zone) is when it is not a global
// unicast address another host would answer at, "" when it is one.
func notGlobal(a netip.Addr) string {
	if a.Is4() {
		return firstBlock(ipv4Blocks, a)
	}
	if !ipv6Global.Contains(a) {
		if why := firstBlock(ipv6Outside, a); why != "" {
			return why
		}
		return "not a global unicast address (IPv6 outside 2000::/3)"
	}
	return firstBlock(ipv6Blocks, a)
}

func firstBlock(bs []block, a netip.Addr) string {
	for _, bl := range bs {
		if bl.prefix.Contains(a) {
			return bl.why
		}
	}
	return ""
}
