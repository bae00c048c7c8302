// Package fake is an in-memory launcher.Manager for node agent tests. It
// models the part of the real system the node agent depends on: libvirtd
// owns the domains, so they outlive launcher processes (a crashed launcher
// leaves its guest running, and a new launcher adopts it on Sync), and a
// launcher that is gone answers nothing and cannot be reattached.
//
// Errors look like the real client's: gRPC status errors, Unavailable when
// the launcher is gone, Unknown with libvirt's message for libvirt errors.
package fake

import (
	"context"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
)

// libvirt states and reasons the fake produces.
const (
	StateRunning  = "Running"
	StatePaused   = "Paused"
	StateShutoff  = "Shutoff"
	StateCrashed  = "Crashed"
	ReasonUnknown = "Unknown"
)

// Domain is a fake libvirt domain.
type Domain struct {
	Name, UUID, VMIUID, VMIKey string
	State, Reason              string
	PausedByUser               bool
	ShutdownRequestedAt        int64
	GracePeriodSeconds         int64
	// Starts counts guest boots: a restart of the guest shows here.
	Starts int
	// ACPIPresses counts Shutdown calls.
	ACPIPresses int
	// PowerOffAfterACPI is how many ACPI presses the guest needs before it
	// powers off; 0 ignores them (a guest without ACPI support).
	PowerOffAfterACPI int
	// Leases are the RenewLease durations received, in order.
	Leases []time.Duration
	// NodeFailurePolicy is what Sync recorded in the domain metadata.
	NodeFailurePolicy string
	// Node is the VMI's node when Sync defined the domain.
	Node string
	// Interfaces and GuestAgentConnected are what the launcher reports of
	// the running domain's network (SetInterfaces).
	Interfaces          []*apiv1.InterfaceStatus
	GuestAgentConnected bool
	// Overlays are the snapshot overlays the running domain's disks write
	// to, by volume path (SnapshotDisks), and Freezes counts the guest
	// file system freezes.
	Overlays map[string]string
	Freezes  int
	// Frozen: a Freeze with a guest agent not thawed yet.
	Frozen bool
	// DiskSizes is each disk's size as the guest sees it, by disk name:
	// what a Sync of a running domain grew it to (size_bytes; never
	// shrunk).
	DiskSizes map[string]int64
	// Disks are the running domain's disks, in libvirt's order: those
	// Sync started it with, then those plugged in (hotplug.go).
	Disks []*launcherpb.DiskAttachment
	// HoldUnplugs: the guest does not release unplugged disks until
	// ReleaseDisk.
	HoldUnplugs bool
	// UnplugRequests counts the unplugs asked of the guest, by disk.
	UnplugRequests map[string]int
}

// Call is one recorded call.
type Call struct {
	Op     string // Launch, Reattach, Sync, Shutdown, Kill, Delete, Pause, Unpause, GetDomain, Ping, RenewLease, Events, Detach, Stop
	Domain string
	Pid    int
	Lease  time.Duration // RenewLease
}

type proc struct {
	pid    int
	domain string
	alive  bool
	hung   bool
	subs   map[chan *launcherpb.DomainEvent]struct{}
}

// Manager is the fake launcher.Manager and the fake libvirtd behind it.
type Manager struct {
	mu        sync.Mutex
	domains   map[string]*Domain
	procs     map[int]*proc
	nextPid   int
	calls     []Call
	launchErr error
	syncErr   map[string]error
	// migrations are the launchers' migration records, by domain.
	migrations map[string]*launcherpb.MigrationStatus
	// snapshotErr fails SnapshotDisks, by domain.
	snapshotErr map[string]error
	// Now is the time SnapshotDisks reports; time.Now when nil.
	Now func() time.Time
	// PowerOffAfterACPI is given to new domains (default 1: the guest
	// obeys the first ACPI press).
	PowerOffAfterACPI int
	// OnCall, when set, sees every call as it is made (outside the lock),
	// so tests can interleave it with other events.
	OnCall func(c Call)
}

var _ launcher.Manager = (*Manager)(nil)

// New returns a fake with no domains.
func New() *Manager {
	return &Manager{domains: map[string]*Domain{}, procs: map[int]*proc{}, nextPid: 1000,
		syncErr: map[string]error{}, PowerOffAfterACPI: 1}
}

func (m *Manager) record(c Call) {
	m.calls = append(m.calls, c)
}

func (m *Manager) notify(c Call) {
	m.mu.Lock()
	hook := m.OnCall
	m.mu.Unlock()
	if hook != nil {
		hook(c)
	}
}

// Launch starts a fake launcher process for domainName.
func (m *Manager) Launch(ctx context.Context, vmi *apiv1.VirtualMachineInstance, domainName string) (launcher.Client, launcher.Handle, error) {
	c := Call{Op: "Launch", Domain: domainName}
	defer func() { m.notify(c) }()
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return nil, launcher.Handle{}, err
	}
	if m.launchErr != nil {
		m.record(c)
		return nil, launcher.Handle{}, m.launchErr
	}
	// Like the real launcher's flock: one launcher per domain, and a hung
	// one still holds it.
	for _, p := range m.procs {
		if p.domain == domainName && p.alive {
			m.record(c)
			return nil, launcher.Handle{}, fmt.Errorf("launch %s: launcher exited: another launcher (pid %d) already manages this domain", domainName, p.pid)
		}
	}
	m.nextPid++
	p := &proc{pid: m.nextPid, domain: domainName, alive: true, subs: map[chan *launcherpb.DomainEvent]struct{}{}}
	m.procs[p.pid] = p
	c.Pid = p.pid
	m.record(c)
	md := vmi.GetMetadata()
	h := launcher.Handle{
		Version: launcher.HandleVersion, VMIUID: md.GetUid(), VMIKey: md.GetNamespace() + "/" + md.GetName(),
		DomainName: domainName, Protocol: "grpc", ProtocolVersion: 1, Network: "unix",
		Addr: fmt.Sprintf("/run/fake/launcher-%d.sock", p.pid), Pid: p.pid,
	}
	return &client{m: m, pid: p.pid, domain: domainName}, h, nil
}

// Reattach connects to a launcher that still runs, and fails fast otherwise.
func (m *Manager) Reattach(ctx context.Context, h launcher.Handle) (launcher.Client, error) {
	c := Call{Op: "Reattach", Domain: h.DomainName, Pid: h.Pid}
	defer func() { m.notify(c) }()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.record(c)
	p := m.procs[h.Pid]
	if p == nil || !p.alive || p.domain != h.DomainName {
		return nil, status.Errorf(codes.Unavailable, "reattaching to launcher pid %d: process not found", h.Pid)
	}
	if p.hung {
		m.mu.Unlock()
		<-ctx.Done()
		m.mu.Lock()
		return nil, status.Errorf(codes.DeadlineExceeded, "reattaching to launcher pid %d: %v", h.Pid, ctx.Err())
	}
	return &client{m: m, pid: p.pid, domain: h.DomainName}, nil
}

// KillLauncher ends the launcher process of h, hung or not, if it is one
// for h's domain.
func (m *Manager) KillLauncher(_ context.Context, h launcher.Handle) error {
	c := Call{Op: "KillLauncher", Domain: h.DomainName, Pid: h.Pid}
	defer func() { m.notify(c) }()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.record(c)
	if p := m.procs[h.Pid]; p != nil && p.alive && p.domain == h.DomainName {
		m.exit(p)
	}
	return nil
}

func (m *Manager) exit(p *proc) {
	p.alive = false
	for ch := range p.subs {
		close(ch)
	}
	p.subs = map[chan *launcherpb.DomainEvent]struct{}{}
}

// emit sends the domain's status to every event stream of its launchers;
// the caller holds m.mu.
func (m *Manager) emit(domain, event string) {
	st := m.statusLocked(domain)
	for _, p := range m.procs {
		if p.domain != domain || !p.alive {
			continue
		}
		for ch := range p.subs {
			select {
			case ch <- &launcherpb.DomainEvent{Status: st, Event: event}:
			default: // a slow reader misses an event, as with a real stream it would lag
			}
		}
	}
}

func (m *Manager) statusLocked(domain string) *launcherpb.DomainStatus {
	d := m.domains[domain]
	if d == nil {
		return &launcherpb.DomainStatus{Exists: false, Name: domain}
	}
	st := &launcherpb.DomainStatus{
		Exists: true, State: d.State, Reason: d.Reason, Uuid: d.UUID, Name: d.Name, VmiUid: d.VMIUID,
		PausedByUser: d.PausedByUser, ShutdownRequestedAt: d.ShutdownRequestedAt,
	}
	if d.State == StateRunning || d.State == StatePaused {
		for _, i := range d.Interfaces {
			st.Interfaces = append(st.Interfaces, proto.Clone(i).(*apiv1.InterfaceStatus))
		}
		st.GuestAgentConnected = d.GuestAgentConnected
	}
	return st
}
