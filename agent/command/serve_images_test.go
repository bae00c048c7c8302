package command

import (
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/virtplane/terraform-provider-virtplane/internal/imagepolicy"
)

// TestImagePolicyFlags: the defaults are imagepolicy's, the flags set
// every part of the policy, and what cannot work is refused naming the
// flag.
func TestImagePolicyFlags(t *testing.T) {
	parse := func(args ...string) (imagepolicy.Policy, error) {
		f := pflag.NewFlagSet("serve", pflag.ContinueOnError)
		var p imagepolicy.Policy
		fl := addImagePolicyFlags(f, &p)
		if err := f.Parse(args); err != nil {
			return p, err
		}
		return p, fl.complete(&p)
	}
	p, err := parse()
	if err != nil {
		t.Fatal(err)
	}
	d := imagepolicy.Default()
	if len(p.SourceCIDRs) != 0 || p.DefaultMaxSize != d.DefaultMaxSize || p.MaxSizeCap != d.MaxSizeCap || p.MaxVirtualSize != d.MaxVirtualSize ||
		p.Timeout != d.Timeout || p.MinSpeed != d.MinSpeed || p.MinSpeedTime != d.MinSpeedTime {
		t.Fatalf("defaults %+v, want %+v", p, d)
	}
	p, err = parse("--image-source-cidrs", "10.0.0.0/8,127.0.0.2/32", "--image-max-size", "1Gi", "--image-max-size-cap", "2Gi",
		"--image-max-virtual-size", "100Gi", "--image-pull-timeout", "5m", "--image-pull-min-speed", "10Ki", "--image-pull-min-speed-time", "20s")
	if err != nil {
		t.Fatal(err)
	}
	if len(p.SourceCIDRs) != 2 || p.SourceCIDRs[1].String() != "127.0.0.2/32" || p.DefaultMaxSize != 1<<30 || p.MaxSizeCap != 2<<30 ||
		p.MaxVirtualSize != 100<<30 || p.Timeout != 5*time.Minute || p.MinSpeed != 10<<10 || p.MinSpeedTime != 20*time.Second {
		t.Fatalf("parsed %+v", p)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--image-source-cidrs", "10.0.0.1/8"}, "host bits"},
		{[]string{"--image-source-cidrs", "example.com"}, "--image-source-cidrs"},
		{[]string{"--image-max-size", "200Gi"}, "must not exceed --image-max-size-cap"},
		{[]string{"--image-pull-timeout", "0s"}, "--image-pull-timeout must be positive"},
		{[]string{"--image-max-virtual-size", "0"}, "--image-max-virtual-size must be positive"},
	} {
		if _, err := parse(tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}
}
