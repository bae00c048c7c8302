package driver

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/launcher/internal/domxml"
)

// How often the launcher looks up its domain's interface addresses: every
// AddressFastInterval for AddressFastPeriod after the domain starts,
// arrives by migration, or its guest agent connects (or the launcher
// itself starts), then every AddressSlowInterval. A guest configures its
// network in its first seconds (DHCP, the guest agent starting), which
// the fast lookups catch within 2 s; after that addresses rarely change
// (a renewal, an operator), and each lookup costs libvirt calls and, with
// an agent, a round trip through the guest, so half a minute is enough.
const (
	AddressFastInterval = 2 * time.Second
	AddressFastPeriod   = time.Minute
	AddressSlowInterval = 30 * time.Second
)

// addresses is the driver's last look at the domain's interfaces, which
// every DomainStatus carries without waiting on libvirt or the guest.
type addresses struct {
	mu     sync.Mutex
	ifaces []*apiv1.InterfaceStatus
	agent  bool
	// kick asks the watcher for a lookup now and fast ones after it.
	kick chan struct{}
}

// kickAddresses asks for a lookup now; it never blocks.
func (d *Driver) kickAddresses() {
	select {
	case d.addrs.kick <- struct{}{}:
	default:
	}
}

// watchAddresses looks the addresses up on the driver's clock, in the
// background: an RPC only ever reads what it found last.
//
// The domain's interfaces and its guest agent's connection come from the
// live XML, which changes only with an event (a start, a device added or
// removed, an arrival by migration, the agent connecting), and every
// event kicks the watcher. So the XML is read and parsed once per kick,
// not at every lookup: on a host starting many guests, reading and
// parsing every running domain's XML every two seconds was a fifth of the
// launchers' CPU (docs/performance.md). Between kicks, a lookup asks only
// the address sources, and a domain without interfaces costs nothing.
func (d *Driver) watchAddresses() {
	defer d.wg.Done()
	fastUntil := d.clock.Now().Add(AddressFastPeriod)
	var live *domxml.LiveNetwork // the running domain's, since the last kick; nil: read it again
	for {
		live = d.refreshAddresses(live)
		t := d.clock.NewTimer(addressInterval(d.clock.Now(), fastUntil))
		select {
		case <-d.done:
			t.Stop()
			return
		case <-d.addrs.kick:
			t.Stop()
			fastUntil = d.clock.Now().Add(AddressFastPeriod)
			live = nil
		case <-t.C():
		}
	}
}

// addressInterval is the wait before the next lookup.
func addressInterval(now, fastUntil time.Time) time.Duration {
	if now.Before(fastUntil) {
		return AddressFastInterval
	}
	return AddressSlowInterval
}

// refreshAddresses looks the addresses up and, when they changed,
// publishes a status (event "Interfaces"), which makes the node agent
// write them into the VMI. It returns the live network view to reuse for
// the next lookup (nil when there is none to reuse).
func (d *Driver) refreshAddresses(live *domxml.LiveNetwork) *domxml.LiveNetwork {
	ifaces, agent, live, err := d.lookupAddresses(live)
	if err != nil {
		d.log.Debug("looking up interface addresses", "err", err)
		return nil
	}
	d.addrs.mu.Lock()
	changed := agent != d.addrs.agent || !slices.EqualFunc(ifaces, d.addrs.ifaces, func(a, b *apiv1.InterfaceStatus) bool { return proto.Equal(a, b) })
	d.addrs.ifaces, d.addrs.agent = ifaces, agent
	d.addrs.mu.Unlock()
	if !changed {
		return live
	}
	st, err := d.currentStatus()
	if err != nil {
		d.log.Warn("cannot read domain status after an address change", "error", err)
		return live
	}
	d.log.Info("interface addresses changed", "interfaces", describeInterfaces(ifaces), "guest_agent", agent)
	d.publish(st, "Interfaces")
	return live
}

// describeInterfaces is a short form for the log.
func describeInterfaces(ifaces []*apiv1.InterfaceStatus) string {
	var parts []string
	for _, s := range ifaces {
		what := strings.Join(s.GetIpAddresses(), ",")
		if what == "" {
			what = "none"
		} else {
			what += " (" + s.GetSource() + ")"
		}
		parts = append(parts, s.GetName()+"="+what)
	}
	return strings.Join(parts, " ")
}

// reportedAddresses is what statusOf reports for an active domain.
func (d *Driver) reportedAddresses() ([]*apiv1.InterfaceStatus, bool) {
	d.addrs.mu.Lock()
	defer d.addrs.mu.Unlock()
	out := make([]*apiv1.InterfaceStatus, len(d.addrs.ifaces))
	for i, s := range d.addrs.ifaces {
		out[i] = proto.Clone(s).(*apiv1.InterfaceStatus)
	}
	return out, d.addrs.agent
}

// sourceResult is one address source's answer.
type sourceResult struct {
	ifaces []GuestInterface
	err    error
}

// lookupAddresses asks, for the running domain: libvirt's DHCP leases
// when it has a libvirt network interface, the neighbour table when it
// has a bridge interface, the guest agent (through libvirt) when its
// channel is connected. It reads the live XML only when live is nil, and
// returns the view it used (nil for a domain that is not running, which
// has no addresses).
func (d *Driver) lookupAddresses(live *domxml.LiveNetwork) ([]*apiv1.InterfaceStatus, bool, *domxml.LiveNetwork, error) {
	if live != nil && len(live.Interfaces) == 0 {
		// Nothing to ask until an event says the domain changed.
		return nil, live.AgentConnected, live, nil
	}
	dom, err := d.lookup()
	if err != nil || dom == nil {
		return nil, false, nil, err
	}
	defer dom.Free()
	st, _, err := dom.GetState()
	if err != nil {
		return nil, false, nil, fmt.Errorf("get domain state: %w", err)
	}
	if !st.Active() {
		return nil, false, nil, nil
	}
	if live == nil {
		x, err := dom.GetXMLDesc()
		if err != nil {
			return nil, false, nil, fmt.Errorf("read the live domain XML: %w", err)
		}
		parsed, err := domxml.ParseLiveNetwork(x)
		if err != nil {
			return nil, false, nil, err
		}
		live = &parsed
	}
	nd, _ := dom.(NetworkDomain)
	results := map[AddressSource]*sourceResult{}
	ask := func(src AddressSource) {
		if nd == nil {
			return
		}
		r := &sourceResult{}
		r.ifaces, r.err = nd.InterfaceAddresses(src)
		results[src] = r
	}
	has := func(kind string) bool {
		return slices.ContainsFunc(live.Interfaces, func(li domxml.LiveInterface) bool { return li.Kind == kind })
	}
	if has(domxml.KindNetwork) {
		ask(SourceLease)
	}
	if has(domxml.KindBridge) {
		// The neighbour table of QEMU's namespace, read here rather than
		// through libvirt's ARP source (package neighbours says why).
		r := &sourceResult{}
		if pid := d.qemuPid(); pid == 0 {
			r.err = fmt.Errorf("QEMU's process is unknown (no %s.pid in %s)", d.cfg.DomainName, d.cfg.QEMUPidDir)
		} else {
			r.ifaces, r.err = d.cfg.Neighbours(pid)
		}
		results[SourceARP] = r
	}
	if live.AgentConnected {
		ask(SourceAgent)
	}
	return interfaceStatuses(*live, results), live.AgentConnected, live, nil
}

// interfaceStatuses turns libvirt's answers into the status of each of
// virtplane's interfaces, in the definition's (the spec's) order: the
// guest agent's addresses when it knows the interface's MAC (it also
// names the guest's interface), else the DHCP lease (network kind) or
// neighbour entry (bridge kind); with none, info says why.
func interfaceStatuses(live domxml.LiveNetwork, results map[AddressSource]*sourceResult) []*apiv1.InterfaceStatus {
	var out []*apiv1.InterfaceStatus
	for _, li := range live.Interfaces {
		if li.Name == "" {
			continue // not one of the spec's
		}
		s := &apiv1.InterfaceStatus{Name: li.Name, MacAddress: li.MAC}
		var why []string
		if r := results[SourceAgent]; r != nil {
			gi, found := byMAC(r.ifaces, li.MAC)
			switch {
			case r.err != nil:
				why = append(why, "the guest agent did not answer: "+r.err.Error())
			case found && fill(s, gi.Addrs, apiv1.InterfaceSourceAgent):
				s.InterfaceName = gi.Name
				out = append(out, s)
				continue
			default:
				why = append(why, "the guest agent reports no address for "+li.MAC)
			}
		} else {
			why = append(why, "the guest agent is not connected")
		}
		var src AddressSource
		var source, table, none string
		switch li.Kind {
		case domxml.KindNetwork:
			src, source, table, none = SourceLease, apiv1.InterfaceSourceLease, "the DHCP leases", "no DHCP lease for "+li.MAC
		case domxml.KindBridge:
			src, source, table, none = SourceARP, apiv1.InterfaceSourceARP, "the neighbour table", "no neighbour entry for "+li.MAC
		}
		if r := results[src]; source != "" && r != nil {
			gi, found := byMAC(r.ifaces, li.MAC)
			switch {
			case r.err != nil:
				why = append([]string{fmt.Sprintf("reading %s: %v", table, r.err)}, why...)
			case found && fill(s, gi.Addrs, source):
				out = append(out, s)
				continue
			default:
				why = append([]string{none}, why...)
			}
		}
		s.Info = strings.Join(why, "; ")
		out = append(out, s)
	}
	return out
}

// byMAC finds the interface of mac (any case, any separator net.ParseMAC
// reads).
func byMAC(ifaces []GuestInterface, mac string) (GuestInterface, bool) {
	for _, gi := range ifaces {
		if hw, err := net.ParseMAC(gi.MAC); err == nil && hw.String() == mac {
			return gi, true
		}
	}
	return GuestInterface{}, false
}

// fill sets s's addresses from addrs: IPv4 first, without IPv6
// link-local ones, duplicates or what is no IP address, at most
// validation.MaxInterfaceIPs. It reports whether any was left.
func fill(s *apiv1.InterfaceStatus, addrs []string, source string) bool {
	var v4, v6 []string
	seen := map[netip.Addr]bool{}
	for _, a := range addrs {
		ip, err := netip.ParseAddr(a)
		if err != nil || seen[ip] {
			continue
		}
		seen[ip] = true
		ip = ip.Unmap().WithZone("")
		switch {
		case ip.Is4():
			v4 = append(v4, ip.String())
		case !ip.IsLinkLocalUnicast():
			v6 = append(v6, ip.String())
		}
	}
	all := append(v4, v6...)
	if len(all) == 0 {
		return false
	}
	s.IpAddresses = all[:min(len(all), validation.MaxInterfaceIPs)]
	s.IpAddress = s.IpAddresses[0]
	s.Source = source
	s.Info = ""
	return true
}
