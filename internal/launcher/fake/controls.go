package fake

// What tests do to the fake: failures to inject, the fake libvirtd's
// domains to set up or change, launchers to crash or hang, and what was
// called.

import (
	"maps"
	"sort"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
)

// SetLaunchError makes every Launch fail with err (nil: succeed again).
func (m *Manager) SetLaunchError(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.launchErr = err
}

// SetSyncError makes Sync of domain fail with a libvirt error message
// (empty: succeed again).
func (m *Manager) SetSyncError(domain, libvirtMessage string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if libvirtMessage == "" {
		delete(m.syncErr, domain)
		return
	}
	m.syncErr[domain] = status.Error(codes.Unknown, libvirtMessage)
}

// Calls returns the calls so far.
func (m *Manager) Calls() []Call {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Call(nil), m.calls...)
}

// Count returns how many calls of op were made.
func (m *Manager) Count(op string) int {
	n := 0
	for _, c := range m.Calls() {
		if c.Op == op {
			n++
		}
	}
	return n
}

// Domain returns a copy of a domain.
func (m *Manager) Domain(name string) (Domain, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, ok := m.domains[name]
	if !ok {
		return Domain{}, false
	}
	c := *d
	c.Leases = append([]time.Duration(nil), d.Leases...)
	c.Overlays = maps.Clone(d.Overlays)
	c.DiskSizes = maps.Clone(d.DiskSizes)
	c.UnplugRequests = maps.Clone(d.UnplugRequests)
	c.Disks = nil
	for _, a := range d.Disks {
		c.Disks = append(c.Disks, proto.Clone(a).(*launcherpb.DiskAttachment))
	}
	return c, true
}

// Domains lists the domains sorted by name.
func (m *Manager) Domains() []Domain {
	m.mu.Lock()
	names := make([]string, 0, len(m.domains))
	for n := range m.domains {
		names = append(names, n)
	}
	m.mu.Unlock()
	sort.Strings(names)
	out := make([]Domain, 0, len(names))
	for _, n := range names {
		if d, ok := m.Domain(n); ok {
			out = append(out, d)
		}
	}
	return out
}

// AddDomain defines a domain directly in the fake libvirtd (an orphan, or
// one left by an earlier agent).
func (m *Manager) AddDomain(d Domain) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if d.UUID == "" {
		d.UUID = uuid.NewString()
	}
	if d.State == "" {
		d.State, d.Reason = StateRunning, "Booted"
	}
	c := d
	m.domains[d.Name] = &c
}

// SetDomainState changes a domain as the guest or libvirt would (guest
// power-off, crash) and tells the launchers' event streams.
func (m *Manager) SetDomainState(name, state, reason string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if d := m.domains[name]; d != nil {
		d.State, d.Reason = state, reason
		m.emit(name, "StateChanged")
	}
}

// SetInterfaces sets what the launcher reports of the domain's
// interfaces, as its address lookups would find them, and tells the
// launchers' event streams ("Interfaces").
func (m *Manager) SetInterfaces(name string, ifaces []*apiv1.InterfaceStatus, agentConnected bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if d := m.domains[name]; d != nil {
		d.Interfaces, d.GuestAgentConnected = ifaces, agentConnected
		m.emit(name, "Interfaces")
	}
}

// SetPowerOffAfterACPI sets how many ACPI presses domain needs (0: never).
func (m *Manager) SetPowerOffAfterACPI(name string, n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if d := m.domains[name]; d != nil {
		d.PowerOffAfterACPI = n
	}
}

// CrashLaunchers kills the launcher processes of domain: their calls fail
// with Unavailable, their event streams end, and they cannot be
// reattached. The domain keeps running.
func (m *Manager) CrashLaunchers(domain string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, p := range m.procs {
		if p.domain == domain && p.alive {
			m.exit(p)
		}
	}
}

// HangLaunchers makes the launchers of domain stop answering: calls block
// until their context ends.
func (m *Manager) HangLaunchers(domain string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, p := range m.procs {
		if p.domain == domain && p.alive {
			p.hung = true
		}
	}
}

// AliveLaunchers counts the launcher processes of domain that run.
func (m *Manager) AliveLaunchers(domain string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, p := range m.procs {
		if p.domain == domain && p.alive {
			n++
		}
	}
	return n
}
