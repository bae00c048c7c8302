package command

import (
	"github.com/spf13/pflag"
	k8sresource "k8s.io/apimachinery/pkg/api/resource"

	"github.com/virtplane/terraform-provider-virtplane/internal/imagepolicy"
)

// imagePolicyFlags are the server's policy of image downloads
// (docs/security.md, "Image downloads"); complete fills the policy from
// them once the flags are parsed.
type imagePolicyFlags struct {
	maxSize, maxSizeCap, virtual, rate k8sresource.QuantityValue
}

func addImagePolicyFlags(f *pflag.FlagSet, p *imagepolicy.Policy) *imagePolicyFlags {
	fl := &imagePolicyFlags{
		maxSize:    k8sresource.QuantityValue{Quantity: k8sresource.MustParse(imagepolicy.DefaultMaxSize)},
		maxSizeCap: k8sresource.QuantityValue{Quantity: k8sresource.MustParse(imagepolicy.DefaultMaxSizeCap)},
		virtual:    k8sresource.QuantityValue{Quantity: k8sresource.MustParse(imagepolicy.DefaultVirtualSize)},
		rate:       k8sresource.QuantityValue{Quantity: k8sresource.MustParse(imagepolicy.DefaultMinSpeed)},
	}
	f.Var((*prefixes)(&p.SourceCIDRs), "image-source-cidrs", "ranges nodes may download Images from besides global unicast addresses, e.g. 10.20.0.0/16,fd00::/8 (default: none; loopback, link-local, private and the node's own addresses are refused; an address inside one of these is allowed even if it is loopback or the node's own)")
	f.Var(&fl.maxSize, "image-max-size", "spec.max_size of Images that set none: a download that grows past it is stopped and nothing is kept")
	f.Var(&fl.maxSizeCap, "image-max-size-cap", "the largest spec.max_size an Image may set")
	f.Var(&fl.virtual, "image-max-virtual-size", "the largest virtual size (the disk a guest sees) of an image a node keeps after a download or copies into a persistent volume")
	f.DurationVar(&p.Timeout, "image-pull-timeout", imagepolicy.DefaultTimeout, "how long one image download may take; a download that takes longer is stopped and nothing is kept")
	f.Var(&fl.rate, "image-pull-min-speed", "bytes per second a download must average over --image-pull-min-speed-time, else it is stopped (curl's --speed-limit)")
	f.DurationVar(&p.MinSpeedTime, "image-pull-min-speed-time", imagepolicy.DefaultMinSpeedTime, "see --image-pull-min-speed (curl's --speed-time)")
	return fl
}

// complete parses what needs parsing into p.
func (fl *imagePolicyFlags) complete(p *imagepolicy.Policy) error {
	p.DefaultMaxSize, p.MaxSizeCap = fl.maxSize.Value(), fl.maxSizeCap.Value()
	p.MaxVirtualSize, p.MinSpeed = fl.virtual.Value(), fl.rate.Value()
	return p.Validate()
}
