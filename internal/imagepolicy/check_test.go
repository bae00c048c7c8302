package imagepolicy

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

func TestCheck(t *testing.T) {
	own := []netip.Addr{netip.MustParseAddr("203.0.114.9"), netip.MustParseAddr("2a01:4f8::9"), netip.MustParseAddr("127.0.0.1")}
	none := Policy{}
	allow := func(cidrs ...string) Policy {
		p, err := ParseCIDRs(cidrs)
		if err != nil {
			t.Fatal(err)
		}
		return Policy{SourceCIDRs: p}
	}
	for _, tc := range []struct {
		addr string
		p    Policy
		why  string // "" allowed
	}{
		// Global unicast.
		{"151.101.2.132", none, ""},
		{"2a04:4e42::644", none, ""},
		{"::ffff:151.101.2.132", none, ""},
		// Loopback, every way it is written.
		{"127.0.0.1", none, "a loopback address"},
		{"127.8.9.10", none, "a loopback address"},
		{"::1", none, "a loopback address"},
		{"::ffff:127.0.0.1", none, "a loopback address"},
		// Cloud metadata and other link-local.
		{"169.254.169.254", none, "link-local"},
		{"::ffff:169.254.169.254", none, "link-local"},
		{"fe80::1", none, "a link-local address"},
		{"fe80::1%eth0", none, "a link-local address"},
		{"fd00:ec2::254", none, "unique local"},
		// Unspecified (connecting to it reaches this host), multicast,
		// broadcast, reserved.
		{"0.0.0.0", none, "unspecified"},
		{"0.1.2.3", none, "unspecified"},
		{"::", none, "the unspecified address"},
		{"224.0.0.1", none, "a multicast address"},
		{"239.255.255.250", none, "a multicast address"},
		{"ff02::1", none, "a multicast address"},
		{"255.255.255.255", none, "the broadcast address"},
		{"240.0.0.1", none, "reserved"},
		// Private, shared, documentation, benchmarking.
		{"10.1.2.3", none, "RFC 1918"},
		{"172.16.0.1", none, "RFC 1918"},
		{"172.31.255.255", none, "RFC 1918"},
		{"172.32.0.1", none, ""},
		{"192.168.1.1", none, "RFC 1918"},
		{"::ffff:10.0.0.1", none, "RFC 1918"},
		{"100.64.0.1", none, "carrier-grade NAT"},
		{"100.128.0.1", none, ""},
		{"192.0.2.1", none, "documentation"},
		{"198.18.0.1", none, "benchmarking"},
		{"192.0.0.170", none, "IETF protocol"},
		{"fc00::1", none, "unique local"},
		{"fec0::2", none, "site-local"},
		{"2001:db8::1", none, "documentation"},
		// IPv6 forms that embed an IPv4 address a relay would reach.
		{"64:ff9b::a9fe:a9fe", none, "NAT64"},
		{"2002:a9fe:a9fe::1", none, "6to4"},
		{"2001:0:4136:e378:8000:63bf:3fff:fdd2", none, "Teredo"},
		{"::a9fe:a9fe", none, "IPv4-compatible"},
		{"4000::1", none, "outside 2000::/3"},
		// The node's own addresses, global ones too.
		{"203.0.114.9", none, "an address of this node"},
		{"::ffff:203.0.114.9", none, "an address of this node"},
		{"2a01:4f8::9", none, "an address of this node"},
		{"203.0.114.10", none, ""},
		// What the operator allows is allowed, loopback and own included,
		// and only that.
		{"10.1.2.3", allow("10.0.0.0/8"), ""},
		{"::ffff:10.1.2.3", allow("10.0.0.0/8"), ""},
		{"10.1.2.3", allow("::ffff:10.0.0.0/104"), ""},
		{"11.1.2.3", allow("10.0.0.0/8"), ""},
		{"172.16.0.1", allow("10.0.0.0/8"), "RFC 1918"},
		{"127.0.0.2", allow("127.0.0.2/32"), ""},
		{"127.0.0.1", allow("127.0.0.2/32"), "a loopback address"},
		{"127.0.0.3", allow("127.0.0.2/32"), "a loopback address"},
		{"203.0.114.9", allow("203.0.114.9/32"), ""},
		{"fd12::7", allow("fd12::/16"), ""},
		{"fd13::7", allow("fd12::/16"), "unique local"},
		{"169.254.169.254", allow("0.0.0.0/0"), ""},
	} {
		a := netip.MustParseAddr(tc.addr)
		err := tc.p.Check(a, own)
		switch {
		case tc.why == "" && err != nil:
			t.Errorf("Check(%s, %v) = %v, want allowed", tc.addr, tc.p.SourceCIDRs, err)
		case tc.why != "" && (err == nil || !strings.Contains(err.Error(), tc.why)):
			t.Errorf("Check(%s, %v) = %v, want refused as %q", tc.addr, tc.p.SourceCIDRs, err, tc.why)
		}
		var re *RefusedError
		if err != nil && (!errors.As(err, &re) || !strings.HasPrefix(err.Error(), "refused: "+tc.addr+" is ") ||
			!strings.HasSuffix(err.Error(), "; allow it with --image-source-cidrs")) {
			t.Errorf("Check(%s) error %q does not name the address and the flag", tc.addr, err)
		}
	}
	if err := none.Check(netip.Addr{}, nil); err == nil {
		t.Error("the zero Addr passed")
	}
}

func TestParseCIDRs(t *testing.T) {
	got, err := ParseCIDRs([]string{"10.0.0.0/8", " fd00::/8 ", "", "::ffff:192.168.0.0/112", "127.0.0.2/32"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"10.0.0.0/8", "fd00::/8", "192.168.0.0/16", "127.0.0.2/32"}
	if len(got) != len(want) {
		t.Fatalf("ParseCIDRs = %v, want %v", got, want)
	}
	for i := range want {
		if got[i].String() != want[i] {
			t.Errorf("ParseCIDRs[%d] = %s, want %s", i, got[i], want[i])
		}
	}
	for _, bad := range []string{"10.0.0.1/8", "10.0.0.0", "example.com/8", "10.0.0.0/33", "fd00::1/8"} {
		// The flags name themselves (pflag); from the wire it is the field.
		if _, err := ParseCIDRs([]string{bad}); err == nil || !strings.Contains(err.Error(), "source_cidrs: ") || !strings.Contains(err.Error(), bad) {
			t.Errorf("ParseCIDRs(%q) = %v, want an error naming the field and the value", bad, err)
		}
	}
}

func TestPolicyRoundTripAndValidate(t *testing.T) {
	p := Default()
	p.SourceCIDRs, _ = ParseCIDRs([]string{"10.0.0.0/8", "fd00::/8"})
	back, err := FromProto(p.Proto())
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(back.Proto(), p.Proto()) {
		t.Errorf("round trip: %v, want %v", back.Proto(), p.Proto())
	}
	if _, err := FromProto(nil); err == nil {
		t.Error("no policy passed")
	}
	bad := Default()
	bad.DefaultMaxSize = bad.MaxSizeCap + 1
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "--image-max-size (") {
		t.Errorf("default above the cap: %v", err)
	}
	m := Default().Proto()
	m.TimeoutSeconds = -1
	if _, err := FromProto(m); err == nil || !strings.Contains(err.Error(), "--image-pull-timeout") {
		t.Errorf("negative timeout: %v", err)
	}
	var z Policy
	z.Complete()
	if !proto.Equal(z.Proto(), Default().Proto()) {
		t.Errorf("Complete of the zero policy = %v, want the default", z.Proto())
	}
}

// TestCurrentTake: the first policy is taken; the same message again is
// no change and keeps it; an invalid one is refused and the last kept;
// another valid one replaces it. The message taken is the node's copy.
func TestCurrentTake(t *testing.T) {
	var c Current
	if _, ok := c.Get(); ok {
		t.Fatal("a new Current has a policy")
	}
	m := Default().Proto()
	m.SourceCidrs = []string{"10.0.0.0/8"}
	if p, changed, err := c.Take(m); err != nil || !changed || len(p.SourceCIDRs) != 1 {
		t.Fatalf("first Take = %v, %v, %v", p.Proto(), changed, err)
	}
	again := proto.Clone(m).(*apiv1.ImagePullPolicy)
	if p, changed, err := c.Take(again); err != nil || changed || p.SourceCIDRs[0].String() != "10.0.0.0/8" {
		t.Fatalf("the same message again = %v, %v, %v; want no change", p.Proto(), changed, err)
	}
	m.SourceCidrs[0] = "192.168.0.0/16" // the caller's message, not the node's copy
	bad := Default().Proto()
	bad.MaxSizeCapBytes = 1
	if _, changed, err := c.Take(bad); err == nil || changed {
		t.Fatalf("invalid Take = %v, %v; want refused", changed, err)
	}
	if p, _ := c.Get(); p.SourceCIDRs[0].String() != "10.0.0.0/8" {
		t.Fatalf("after an invalid one: %v, want the last valid", p.Proto())
	}
	if p, changed, err := c.Take(again); err != nil || changed || p.SourceCIDRs[0].String() != "10.0.0.0/8" {
		t.Fatalf("the kept message again = %v, %v, %v; want no change", p.Proto(), changed, err)
	}
	if p, changed, err := c.Take(Default().Proto()); err != nil || !changed || len(p.SourceCIDRs) != 0 {
		t.Fatalf("another policy = %v, %v, %v; want taken", p.Proto(), changed, err)
	}
}

// FuzzCheck holds Check to what the standard library knows of addresses
// and to the rules every caller relies on: an address is judged the same
// whether written as IPv4 or IPv4-mapped IPv6, an allowed CIDR allows,
// the node's own addresses and what is not global unicast are refused
// unless allowed, and nothing panics.
func FuzzCheck(f *testing.F) {
	for _, s := range []struct {
		addr []byte
		cidr string
	}{
		{[]byte{127, 0, 0, 1}, ""}, {[]byte{169, 254, 169, 254}, "127.0.0.2/32"}, {[]byte{10, 0, 0, 1}, "10.0.0.0/8"},
		{netip.MustParseAddr("::ffff:127.0.0.1").AsSlice(), "::ffff:127.0.0.0/104"},
		{netip.MustParseAddr("fe80::1").AsSlice(), "fe80::/10"}, {netip.MustParseAddr("2a00::1").AsSlice(), "2a00::1/128"},
		{[]byte{8, 8, 8, 8}, "0.0.0.0/0"},
	} {
		f.Add(s.addr, s.cidr, false)
	}
	f.Fuzz(func(t *testing.T, raw []byte, cidr string, isOwn bool) {
		a, ok := netip.AddrFromSlice(raw)
		if !ok {
			return
		}
		var p Policy
		if cidrs, err := ParseCIDRs([]string{cidr}); err == nil {
			p.SourceCIDRs = cidrs
		}
		var own []netip.Addr
		if isOwn {
			own = []netip.Addr{a}
		}
		err := p.Check(a, own)
		u := a.Unmap()
		if a.Is4In6() {
			if other := p.Check(u, own); (err == nil) != (other == nil) {
				t.Fatalf("%s and %s judged differently: %v, %v", a, u, err, other)
			}
		}
		allowed := false
		for _, c := range p.SourceCIDRs {
			allowed = allowed || c.Contains(u)
		}
		switch {
		case allowed && err != nil:
			t.Fatalf("%s is inside %v but refused: %v", a, p.SourceCIDRs, err)
		case allowed:
		case isOwn && err == nil:
			t.Fatalf("the node's own %s allowed", a)
		case err == nil && (!u.IsGlobalUnicast() || u.IsPrivate() || u.IsLoopback() || u.IsLinkLocalUnicast() || u.IsMulticast() || u.IsUnspecified()):
			t.Fatalf("%s is not a global unicast address but was allowed", a)
		case err != nil && !strings.HasSuffix(err.Error(), "; allow it with --image-source-cidrs"):
			t.Fatalf("%s: refusal %q does not say how to allow it", a, err)
		}
	})
}
