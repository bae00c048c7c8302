package server

import (
	"net"
	"net/url"
	"slices"
	"strconv"

	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
)

// hostPolicy is o.HostPolicy (the defaults when nil) with the ports this
// agent is configured to listen on reserved, beside the usual ones
// (validation.ReservedPorts): a guest forwarded there would answer for the
// agent or its etcd on the node's other addresses, or take the port
// before the agent gets it back after a restart. So is the nodes'
// libvirtd port the cluster migrates through when the operator moved it
// (--migration-libvirt-port): a guest there would stand in for a target's
// libvirtd. A port chosen when binding (":0", tests) is not known here.
func (o *Options) hostPolicy() *validation.HostPolicy {
	p := validation.DefaultHostPolicy()
	if o.HostPolicy != nil {
		c := *o.HostPolicy
		p = &c
	}
	p.Reserved = slices.Clone(p.Reserved)
	reserve := func(port, owner string) {
		if n, err := strconv.ParseUint(port, 10, 16); err == nil && n > 0 {
			r := validation.PortRange{First: uint16(n), Last: uint16(n)}
			p.Reserved = append(p.Reserved, validation.ReservedPort{PortRange: r, Owner: owner})
		}
	}
	if port := o.ControllerOptions.Migration.Destinations.Port; port > 0 {
		reserve(strconv.Itoa(port), "libvirtd's port for migrations (--migration-libvirt-port)")
	}
	for _, l := range []struct{ addr, owner string }{
		{o.Listen, "the agent's TLS API port (--listen)"},
		{o.MetricsListen, "the agent's metrics port (--metrics-listen)"},
	} {
		if _, port, err := net.SplitHostPort(l.addr); err == nil {
			reserve(port, l.owner)
		}
	}
	for _, l := range []struct {
		urls  []string
		owner string
	}{
		{o.EtcdListenClient, "the embedded etcd's client port (--etcd-listen-client)"},
		{o.EtcdPeerListen, "the embedded etcd's peer port (--etcd-peer-listen)"},
	} {
		for _, s := range l.urls {
			if u, err := url.Parse(s); err == nil {
				reserve(u.Port(), l.owner)
			}
		}
	}
	return p
}
