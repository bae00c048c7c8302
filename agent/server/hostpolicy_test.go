package server

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
)

// The ports the agent is configured to listen on, and the one the nodes'
// libvirtds take migrations on, are never forwarded, whatever the
// operator's ranges allow, and the operator's lists are kept (copied: the
// caller's policy is not changed).
func TestHostPolicyReservesTheAgentsPorts(t *testing.T) {
	given := &validation.HostPolicy{
		ForwardAddresses: []netip.Addr{netip.MustParseAddr("0.0.0.0")},
		ForwardPorts:     []validation.PortRange{{First: 1, Last: 65535}},
		Bridges:          []string{"vpguest0"},
	}
	o := Options{
		Listen: "0.0.0.0:17443", MetricsListen: "127.0.0.1:19464",
		EtcdListenClient: []string{"https://127.0.0.1:12379", "unixs:///run/etcd.sock"},
		EtcdPeerListen:   []string{"https://10.0.0.1:12380"},
		HostPolicy:       given,
	}
	o.ControllerOptions.Migration.Destinations.Port = 16600
	p := o.hostPolicy()
	for port, owner := range map[int32]string{
		17443: "the agent's TLS API port (--listen)",
		19464: "the agent's metrics port (--metrics-listen)",
		12379: "the embedded etcd's client port (--etcd-listen-client)",
		12380: "the embedded etcd's peer port (--etcd-peer-listen)",
		7443:  "the agent's TLS API port",
		16514: "libvirtd's TLS port",
		16600: "libvirtd's port for migrations (--migration-libvirt-port)",
	} {
		errs := p.CheckForward(&apiv1.PortForward{HostAddress: "0.0.0.0", HostPort: port, GuestPort: 80}, field.NewPath("f"))
		if len(errs) != 1 || !strings.Contains(errs[0].Detail, "never forwarded: it is "+owner) {
			t.Errorf("port %d: %v, want it refused as %s", port, errs, owner)
		}
	}
	if errs := p.CheckForward(&apiv1.PortForward{HostAddress: "0.0.0.0", HostPort: 22, GuestPort: 22}, field.NewPath("f")); len(errs) > 0 {
		t.Errorf("port 22, which the operator allows: %v", errs)
	}
	if len(p.Bridges) != 1 || len(given.Reserved) != 0 {
		t.Errorf("the operator's policy: bridges %v; the caller's reserved ports changed to %v", p.Bridges, given.Reserved)
	}

	// None given: the defaults, with the agent's ports.
	o = Options{MetricsListen: "127.0.0.1:0"}
	p = o.hostPolicy()
	def := validation.DefaultHostPolicy()
	if len(p.Reserved) != 0 || !slices.Equal(p.ForwardAddresses, def.ForwardAddresses) || !slices.Equal(p.ForwardPorts, def.ForwardPorts) ||
		p.Bridges != nil || p.Networks != nil {
		t.Errorf("no policy given: %+v, want the defaults (a port chosen when binding is not known)", p)
	}
}
