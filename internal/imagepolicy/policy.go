// Package imagepolicy is where nodes may download Images from and how much
// a download may cost: the server's policy (serve --image-* flags), which
// nodes receive with every heartbeat, the one rule that decides whether a
// node may connect to an address (Policy.Check), and the HTTP client that
// applies it at connect time (NewClient). docs/security.md, "Image
// downloads", is the operator's view of it.
package imagepolicy

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/api/resource"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
)

// Policy is the server's policy for image downloads.
type Policy struct {
	// SourceCIDRs are the ranges nodes may connect to besides global
	// unicast addresses (--image-source-cidrs). An address inside one is
	// allowed even when it is loopback or the node's own: the operator
	// named it.
	SourceCIDRs []netip.Prefix
	// DefaultMaxSize is spec.max_size of Images that set none, and
	// MaxSizeCap the most one may set, in bytes.
	DefaultMaxSize, MaxSizeCap int64
	// MaxVirtualSize is the largest virtual size (the disk a guest sees)
	// of an image a node keeps after a download, or copies into a
	// persistent volume, in bytes.
	MaxVirtualSize int64
	// Timeout bounds one download, from its request to its last byte.
	Timeout time.Duration
	// A download that gets fewer than MinSpeed bytes a second over
	// MinSpeedTime is stopped (curl's --speed-limit and --speed-time).
	MinSpeed     int64
	MinSpeedTime time.Duration
}

// The defaults, which serve's flags show.
const (
	DefaultMaxSize      = "10Gi"
	DefaultMaxSizeCap   = "100Gi"
	DefaultVirtualSize  = "2Ti"
	DefaultTimeout      = time.Hour
	DefaultMinSpeed     = "1Ki"
	DefaultMinSpeedTime = time.Minute
)

// Default is the policy of a server started without --image-* flags: no
// range beyond global unicast, the default bounds.
func Default() Policy {
	return Policy{
		DefaultMaxSize: bytesOf(DefaultMaxSize), MaxSizeCap: bytesOf(DefaultMaxSizeCap),
		MaxVirtualSize: bytesOf(DefaultVirtualSize), Timeout: DefaultTimeout,
		MinSpeed: bytesOf(DefaultMinSpeed), MinSpeedTime: DefaultMinSpeedTime,
	}
}

func bytesOf(q string) int64 {
	v := resource.MustParse(q)
	return v.Value()
}

// Complete fills what is zero with the defaults (SourceCIDRs stay as
// they are: none is the default).
func (p *Policy) Complete() {
	d := Default()
	for _, f := range []struct{ v, def *int64 }{
		{&p.DefaultMaxSize, &d.DefaultMaxSize}, {&p.MaxSizeCap, &d.MaxSizeCap},
		{&p.MaxVirtualSize, &d.MaxVirtualSize}, {&p.MinSpeed, &d.MinSpeed},
	} {
		if *f.v == 0 {
			*f.v = *f.def
		}
	}
	if p.Timeout == 0 {
		p.Timeout = d.Timeout
	}
	if p.MinSpeedTime == 0 {
		p.MinSpeedTime = d.MinSpeedTime
	}
}

// Validate reports settings that cannot work, naming serve's flags.
func (p Policy) Validate() error {
	var errs []error
	for _, f := range []struct {
		flag string
		v    int64
	}{
		{"--image-max-size", p.DefaultMaxSize}, {"--image-max-size-cap", p.MaxSizeCap},
		{"--image-max-virtual-size", p.MaxVirtualSize}, {"--image-pull-timeout", int64(p.Timeout)},
		{"--image-pull-min-speed", p.MinSpeed}, {"--image-pull-min-speed-time", int64(p.MinSpeedTime)},
	} {
		if f.v <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive", f.flag))
		}
	}
	if p.DefaultMaxSize > p.MaxSizeCap {
		errs = append(errs, fmt.Errorf("--image-max-size (%s) must not exceed --image-max-size-cap (%s)", Bytes(p.DefaultMaxSize), Bytes(p.MaxSizeCap)))
	}
	if p.Timeout > 0 && p.Timeout < time.Second || p.MinSpeedTime > 0 && p.MinSpeedTime < time.Second {
		errs = append(errs, errors.New("--image-pull-timeout and --image-pull-min-speed-time must be at least 1s"))
	}
	for _, c := range p.SourceCIDRs {
		if !c.IsValid() || c != c.Masked() {
			errs = append(errs, fmt.Errorf("--image-source-cidrs: %s is not a network address in CIDR form", c))
		}
	}
	return errors.Join(errs...)
}

// ParseCIDRs parses the policy's source networks as a node receives them
// (ParsePrefix each); what fails names source_cidrs.
func ParseCIDRs(ss []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range ss {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		p, err := ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("source_cidrs: %w", err)
		}
		out = append(out, p)
	}
	return out, nil
}

// ParsePrefix parses a network in CIDR notation as the server's network
// flags take them (--image-source-cidrs, --migration-networks): written
// as its network address (10.0.0.1/8 is refused: 10.0.0.0/8, or one
// address, /32?), and an IPv4-mapped network (::ffff:10.0.0.0/104) taken
// as the IPv4 network it maps, so that an address matches whichever way
// it is written.
func ParsePrefix(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is not a network in CIDR notation (10.0.0.0/8, fd00::/8; one address: 192.0.2.7/32)", s)
	}
	if p != p.Masked() {
		return netip.Prefix{}, fmt.Errorf("%q has host bits set: did you mean %s?", s, p.Masked())
	}
	if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
		p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	return p, nil
}

// Proto is p as the server sends it to nodes.
func (p Policy) Proto() *apiv1.ImagePullPolicy {
	out := &apiv1.ImagePullPolicy{
		DefaultMaxSizeBytes: p.DefaultMaxSize, MaxSizeCapBytes: p.MaxSizeCap, MaxVirtualSizeBytes: p.MaxVirtualSize,
		TimeoutSeconds: int64(p.Timeout / time.Second), MinBytesPerSecond: p.MinSpeed,
		MinSpeedSeconds: int64(p.MinSpeedTime / time.Second),
	}
	for _, c := range p.SourceCIDRs {
		out.SourceCidrs = append(out.SourceCidrs, c.String())
	}
	return out
}

// maxSeconds keeps durations from overflowing.
const maxSeconds = int64(100 * 365 * 24 * time.Hour / time.Second)

// FromProto is the policy a node received; an invalid one is refused
// (the node keeps what it had).
func FromProto(m *apiv1.ImagePullPolicy) (Policy, error) {
	if m == nil {
		return Policy{}, errors.New("the server sent no image pull policy")
	}
	cidrs, err := ParseCIDRs(m.GetSourceCidrs())
	if err != nil {
		return Policy{}, err
	}
	if m.GetTimeoutSeconds() > maxSeconds || m.GetMinSpeedSeconds() > maxSeconds {
		return Policy{}, errors.New("image pull policy: durations out of range")
	}
	p := Policy{
		SourceCIDRs: cidrs, DefaultMaxSize: m.GetDefaultMaxSizeBytes(), MaxSizeCap: m.GetMaxSizeCapBytes(),
		MaxVirtualSize: m.GetMaxVirtualSizeBytes(), Timeout: time.Duration(m.GetTimeoutSeconds()) * time.Second,
		MinSpeed: m.GetMinBytesPerSecond(), MinSpeedTime: time.Duration(m.GetMinSpeedSeconds()) * time.Second,
	}
	if err := p.Validate(); err != nil {
		return Policy{}, fmt.Errorf("image pull policy: %w", err)
	}
	return p, nil
}

// MaxSizeFor is the most a node downloads of an Image with spec: its
// max_size, else the default, and never more than the cap (an Image
// written before the cap was lowered, or straight into the store).
func (p Policy) MaxSizeFor(spec *apiv1.ImageSpec) int64 {
	n := p.DefaultMaxSize
	if b, ok := validation.ByteQuantity(spec.GetMaxSize()); ok {
		n = b
	}
	return min(n, p.MaxSizeCap)
}

// Bytes renders n bytes as a quantity ("10Gi", "1536Mi", "1000"): how
// messages and flags show sizes.
func Bytes(n int64) string {
	return resource.NewQuantity(n, resource.BinarySI).String()
}

// Current is the policy a node received last, for concurrent readers; a
// node that has none yet downloads nothing.
type Current struct {
	p atomic.Pointer[taken]
}

// taken is a policy and the message it came in (nil when Set).
type taken struct {
	policy Policy
	msg    *apiv1.ImagePullPolicy
}

// Take keeps the policy m carries, as a heartbeat's answer brought it.
// The server sends the same message with every heartbeat: one equal to
// the last taken is not parsed again, and changed is false. An invalid
// one is refused with the error, and the last one kept.
func (c *Current) Take(m *apiv1.ImagePullPolicy) (p Policy, changed bool, err error) {
	if old := c.p.Load(); old != nil && old.msg != nil && proto.Equal(old.msg, m) {
		return old.policy, false, nil
	}
	if p, err = FromProto(m); err != nil {
		return Policy{}, false, err
	}
	c.p.Store(&taken{policy: p, msg: proto.Clone(m).(*apiv1.ImagePullPolicy)})
	return p, true, nil
}

// Set replaces the policy with p (a puller's tests).
func (c *Current) Set(p Policy) {
	c.p.Store(&taken{policy: p})
}

// Get returns the policy, ok false while there is none.
func (c *Current) Get() (Policy, bool) {
	if t := c.p.Load(); t != nil {
		return t.policy, true
	}
	return Policy{}, false
}
