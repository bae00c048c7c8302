package command

import (
	"fmt"
	"net/netip"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
)

// hostPolicyFlags are the host-resource policy as serve's flags give it
// (docs/security.md#host-resources): allow-lists, with secure defaults.
type hostPolicyFlags struct {
	addresses, ports, bridges, networks []string
}

func addHostPolicyFlags(f *pflag.FlagSet, h *hostPolicyFlags) {
	f.StringSliceVar(&h.addresses, "port-forward-addresses", []string{apiv1.DefaultPortForwardAddress},
		"roles all and server: host addresses VMs' port forwards may bind; 0.0.0.0 (every address of the node) only when listed; empty: no forwards")
	f.StringSliceVar(&h.ports, "port-forward-ports", []string{"1024-65535"},
		"roles all and server: host ports or ranges (8080, 1024-65535) port forwards may bind; the agent's, etcd's and libvirtd's ports and QEMU's migration ports 49152-49215 never are")
	f.StringSliceVar(&h.bridges, "allowed-bridges", nil, "roles all and server: Linux bridges of the nodes VMs may attach to (default none)")
	f.StringSliceVar(&h.networks, "allowed-networks", nil, "roles all and server: libvirt networks of the nodes VMs may attach to (default none)")
}

// policy reads the flags, refusing values that name nothing a VM could
// use, each error naming its flag.
func (h hostPolicyFlags) policy() (*validation.HostPolicy, error) {
	p := &validation.HostPolicy{}
	for _, s := range h.addresses {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			return nil, fmt.Errorf("--port-forward-addresses: %q is not an IP address such as 127.0.0.1", s)
		}
		p.ForwardAddresses = append(p.ForwardAddresses, a.Unmap())
	}
	for _, s := range h.ports {
		r, err := validation.ParsePortRange(s)
		if err != nil {
			return nil, fmt.Errorf("--port-forward-ports: %w", err)
		}
		p.ForwardPorts = append(p.ForwardPorts, r)
	}
	for _, l := range []struct {
		flag  string
		names []string
		valid func(string, *field.Path) field.ErrorList
		into  *[]string
	}{
		{"--allowed-bridges", h.bridges, validation.ValidateNodeBridgeName, &p.Bridges},
		{"--allowed-networks", h.networks, validation.ValidateNodeNetworkName, &p.Networks},
	} {
		for i, name := range l.names {
			if errs := l.valid(name, field.NewPath(l.flag).Index(i)); len(errs) > 0 {
				return nil, errs.ToAggregate()
			}
			*l.into = append(*l.into, name)
		}
	}
	return p, nil
}
