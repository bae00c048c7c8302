package command

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
)

// parseHostPolicy reads args as serve's host-policy flags.
func parseHostPolicy(args ...string) (*validation.HostPolicy, error) {
	var h hostPolicyFlags
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	addHostPolicyFlags(fs, &h)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	return h.policy()
}

// serve's flags default to the secure policy, read lists as operators
// write them, and refuse values that name nothing, naming the flag.
func TestHostPolicyFlags(t *testing.T) {
	p, err := parseHostPolicy()
	def := validation.DefaultHostPolicy()
	if err != nil || !slices.Equal(p.ForwardAddresses, def.ForwardAddresses) || !slices.Equal(p.ForwardPorts, def.ForwardPorts) ||
		len(p.Bridges) != 0 || len(p.Networks) != 0 {
		t.Fatalf("no flags: %+v, %v; want the defaults (127.0.0.1, 1024-65535, no bridge, no network)", p, err)
	}
	p, err = parseHostPolicy("--port-forward-addresses", "127.0.0.1,0.0.0.0", "--port-forward-ports", "8080,20000-20099",
		"--allowed-bridges", "vpguest0", "--allowed-bridges", "br0", "--allowed-networks", "isolated")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join([]string{listOf(p.ForwardAddresses), listOf(p.ForwardPorts), strings.Join(p.Bridges, ","), strings.Join(p.Networks, ",")}, " "); got !=
		"127.0.0.1,0.0.0.0 8080,20000-20099 vpguest0,br0 isolated" {
		t.Errorf("policy = %s", got)
	}
	p, err = parseHostPolicy("--port-forward-addresses", "")
	if err != nil || len(p.ForwardAddresses) != 0 {
		t.Errorf("an empty list allows no forward: %+v, %v", p, err)
	}
	for _, tc := range []struct{ args []string }{
		{[]string{"--port-forward-addresses", "localhost"}},
		{[]string{"--port-forward-ports", "0-1023"}},
		{[]string{"--port-forward-ports", "9000-8000"}},
		{[]string{"--allowed-bridges", "../br0"}},
		{[]string{"--allowed-networks", "a/b"}},
	} {
		if _, err := parseHostPolicy(tc.args...); err == nil || !strings.Contains(err.Error(), tc.args[0]) {
			t.Errorf("%q: %v, want an error naming %s", tc.args, err, tc.args[0])
		}
	}
}

func listOf[T fmt.Stringer](l []T) string {
	s := make([]string, len(l))
	for i, v := range l {
		s[i] = v.String()
	}
	return strings.Join(s, ",")
}
