package command

import (
	"net/netip"
	"strings"

	"github.com/virtplane/terraform-provider-virtplane/internal/imagepolicy"
)

// prefixes is a flag of comma-separated networks in CIDR notation, for
// every network flag of the server (--migration-networks,
// --image-source-cidrs), each read by imagepolicy.ParsePrefix, the one
// rule of how a network is written.
type prefixes []netip.Prefix

func (p *prefixes) String() string {
	s := make([]string, len(*p))
	for i, n := range *p {
		s[i] = n.String()
	}
	return strings.Join(s, ",")
}

func (p *prefixes) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		n, err := imagepolicy.ParsePrefix(s)
		if err != nil {
			return err
		}
		*p = append(*p, n)
	}
	return nil
}

func (p *prefixes) Type() string { return "CIDRs" }
