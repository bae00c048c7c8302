package validation

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// HostPolicy is the operator's policy on what an instance may take of the
// host it runs on: the addresses and ports its port forwards bind, and
// the bridges and libvirt networks it attaches to. It is made of
// allow-lists: what is not listed is refused, and some ports are never
// forwarded whatever the lists say (ReservedPorts). The API refuses
// objects that break it, and placement refuses instances that do (written
// before the policy changed, or straight into etcd); both call Check.
// The server's flags set it (--port-forward-addresses,
// --port-forward-ports, --allowed-bridges, --allowed-networks).
type HostPolicy struct {
	// ForwardAddresses are the host addresses forwards may bind. The
	// unspecified address 0.0.0.0 binds every address of the node, and is
	// allowed only when listed itself.
	ForwardAddresses []netip.Addr
	// ForwardPorts are the host port ranges forwards may bind.
	ForwardPorts []PortRange
	// Bridges and Networks are the Linux bridges and libvirt networks
	// instances may attach to.
	Bridges, Networks []string
	// Reserved are ports never forwarded, beside ReservedPorts: the
	// agent's own as the server is configured (agent/server adds them).
	Reserved []ReservedPort
}

// PortRange is First to Last, both included.
type PortRange struct{ First, Last uint16 }

// Contains reports whether port is in r.
func (r PortRange) Contains(port uint16) bool { return r.First <= port && port <= r.Last }

// String is "8080", or "1024-65535" for a range.
func (r PortRange) String() string {
	if r.First == r.Last {
		return strconv.Itoa(int(r.First))
	}
	return fmt.Sprintf("%d-%d", r.First, r.Last)
}

// ParsePortRange reads "8080" or "1024-65535" (ports 1 to 65535, the
// first not above the last).
func ParsePortRange(s string) (PortRange, error) {
	first, last, isRange := strings.Cut(s, "-")
	if !isRange {
		last = first
	}
	var r [2]uint16
	for i, p := range []string{first, last} {
		n, err := strconv.ParseUint(strings.TrimSpace(p), 10, 16)
		if err != nil || n == 0 {
			return PortRange{}, fmt.Errorf("%q: want a port (1-65535) or a range of them such as 1024-65535", s)
		}
		r[i] = uint16(n)
	}
	if r[0] > r[1] {
		return PortRange{}, fmt.Errorf("%q: the range's first port is above its last", s)
	}
	return PortRange{r[0], r[1]}, nil
}

// ReservedPort is ports no forward may bind, and whose they are.
type ReservedPort struct {
	PortRange
	Owner string // "libvirtd's TLS port": ends the refusal's message
}

// ReservedPorts are never forwarded, whatever the policy: a guest service
// on them would stand in for the agent or libvirt to whoever connects
// (a node's agent, another node's libvirtd, a migration's source). They
// are their owners' defaults; agent/server adds the ports it is
// configured with (HostPolicy.Reserved). Both protocols: a UDP forward
// on these ports has no use and would confuse whoever diagnoses them.
var ReservedPorts = []ReservedPort{
	{PortRange{2379, 2379}, "etcd's client port"},
	{PortRange{2380, 2380}, "etcd's peer port"},
	{PortRange{7443, 7443}, "the agent's TLS API port (--listen's usual port)"},
	{PortRange{9464, 9464}, "the agent's metrics port (--metrics-listen's default)"},
	{PortRange{16509, 16509}, "libvirtd's TCP port"},
	{PortRange{16514, 16514}, "libvirtd's TLS port, which migrations use"},
	{PortRange{49152, 49215}, "QEMU's live migration ports"},
}

// DefaultHostPolicy is the policy when the operator sets none: forwards
// on 127.0.0.1 only, on unprivileged ports; no bridge and no libvirt
// network.
func DefaultHostPolicy() *HostPolicy {
	return &HostPolicy{
		ForwardAddresses: []netip.Addr{netip.MustParseAddr(apiv1.DefaultPortForwardAddress)},
		ForwardPorts:     []PortRange{{1024, 65535}},
	}
}

// Check reports each part of spec (an instance spec at path) that breaks
// the policy, at its field: a forward's host address or port, a bridge or
// a libvirt network.
func (p *HostPolicy) Check(spec *apiv1.VirtualMachineInstanceSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	// Paths are made only for what is refused: placement checks every
	// instance it places, and what is allowed should cost no garbage.
	netPath := func(i int) *field.Path { return path.Child("networks").Index(i) }
	for i, n := range spec.GetNetworks() {
		for j, f := range n.GetUser().GetPortForwards() {
			if rs := p.forwardRefusals(f); len(rs) > 0 {
				errs = append(errs, refusalErrors(rs, netPath(i).Child("user", "port_forwards").Index(j))...)
			}
		}
		if b := n.GetBridge(); b != nil && !slices.Contains(p.Bridges, b.GetBridge()) {
			errs = append(errs, field.Forbidden(netPath(i).Child("bridge", "bridge"),
				fmt.Sprintf("bridge %q is not one instances may attach to; the server allows %s (its --allowed-bridges)", b.GetBridge(), listOrNone(p.Bridges))))
		}
		if ln := n.GetNetwork(); ln != nil && !slices.Contains(p.Networks, ln.GetName()) {
			errs = append(errs, field.Forbidden(netPath(i).Child("network", "name"),
				fmt.Sprintf("libvirt network %q is not one instances may attach to; the server allows %s (its --allowed-networks)", ln.GetName(), listOrNone(p.Networks))))
		}
	}
	return errs
}

// CheckForward reports what of forward f (at path) breaks the policy:
// its host address not listed, its host port outside the listed ranges or
// reserved (ReservedPorts, HostPolicy.Reserved). A forward with no host
// side a forward could bind (ForwardHostPort) is refused whole.
func (p *HostPolicy) CheckForward(f *apiv1.PortForward, path *field.Path) field.ErrorList {
	return refusalErrors(p.forwardRefusals(f), path)
}

// refusal is one thing of a forward the policy refuses: the field under
// the forward's path ("" for the forward itself), and why.
type refusal struct{ field, detail string }

// forwardRefusals is the forward policy: what of f it refuses, nil (and
// no garbage) when it allows f.
func (p *HostPolicy) forwardRefusals(f *apiv1.PortForward) []refusal {
	hp, ok := ForwardHostPort(f)
	if !ok {
		return []refusal{{"", "the forward binds no host address and port this server could allow"}}
	}
	var out []refusal
	if !slices.Contains(p.ForwardAddresses, hp.Addr) {
		out = append(out, refusal{"host_address",
			fmt.Sprintf("%s is not an address port forwards may bind; the server allows %s (its --port-forward-addresses)", hp.Addr, listOrNone(p.ForwardAddresses))})
	}
	if owner, reserved := p.reserved(hp.Port); reserved {
		out = append(out, refusal{"host_port", fmt.Sprintf("port %d is never forwarded: it is %s", hp.Port, owner)})
	} else if !slices.ContainsFunc(p.ForwardPorts, func(r PortRange) bool { return r.Contains(hp.Port) }) {
		out = append(out, refusal{"host_port",
			fmt.Sprintf("port %d is not one port forwards may bind; the server allows %s (its --port-forward-ports)", hp.Port, listOrNone(p.ForwardPorts))})
	}
	return out
}

// refusalErrors are rs as field errors under path.
func refusalErrors(rs []refusal, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, r := range rs {
		p := path
		if r.field != "" {
			p = path.Child(r.field)
		}
		errs = append(errs, field.Forbidden(p, r.detail))
	}
	return errs
}

// reserved says whose port is, when no forward may bind it.
func (p *HostPolicy) reserved(port uint16) (string, bool) {
	for _, l := range [][]ReservedPort{p.Reserved, ReservedPorts} {
		for _, r := range l {
			if r.Contains(port) {
				return r.Owner, true
			}
		}
	}
	return "", false
}

// listOrNone is "a, b" or "none".
func listOrNone[T any](l []T) string {
	if len(l) == 0 {
		return "none"
	}
	s := make([]string, len(l))
	for i, v := range l {
		s[i] = fmt.Sprint(v)
	}
	return strings.Join(s, ", ")
}
