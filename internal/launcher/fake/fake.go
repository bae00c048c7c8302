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
	"os"
	"sort"
	"sync"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

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

// --- test controls ---------------------------------------------------------

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
	return &launcherpb.DomainStatus{
		Exists: true, State: d.State, Reason: d.Reason, Uuid: d.UUID, Name: d.Name, VmiUid: d.VMIUID,
		PausedByUser: d.PausedByUser, ShutdownRequestedAt: d.ShutdownRequestedAt,
	}
}

// --- client ------------------------------------------------------------------

type client struct {
	m      *Manager
	pid    int
	domain string
}

var _ launcher.Client = (*client)(nil)

// enter records the call and checks the launcher answers; it returns with
// m.mu held on success.
func (c *client) enter(ctx context.Context, call Call) error {
	call.Domain, call.Pid = c.domain, c.pid
	c.m.notify(call)
	c.m.mu.Lock()
	c.m.record(call)
	p := c.m.procs[c.pid]
	if p == nil || !p.alive {
		c.m.mu.Unlock()
		return status.Errorf(codes.Unavailable, "launcher pid %d: connection refused", c.pid)
	}
	if p.hung {
		c.m.mu.Unlock()
		<-ctx.Done()
		return status.Errorf(codes.DeadlineExceeded, "launcher pid %d: %v", c.pid, ctx.Err())
	}
	if err := ctx.Err(); err != nil {
		c.m.mu.Unlock()
		return status.FromContextError(err).Err()
	}
	return nil
}

func (c *client) Sync(ctx context.Context, vmi *apiv1.VirtualMachineInstance, opts *launcherpb.SyncOptions) (*launcherpb.DomainStatus, error) {
	if err := c.enter(ctx, Call{Op: "Sync"}); err != nil {
		return nil, err
	}
	m := c.m
	defer m.mu.Unlock()
	if opts.GetDomainName() != c.domain {
		return nil, status.Errorf(codes.InvalidArgument, "launcher manages %s, not %s", c.domain, opts.GetDomainName())
	}
	if err := m.syncErr[c.domain]; err != nil {
		return nil, err
	}
	md := vmi.GetMetadata()
	d := m.domains[c.domain]
	if d != nil && d.VMIUID != md.GetUid() {
		return nil, status.Errorf(codes.FailedPrecondition, "domain %s belongs to VMI uid %s, not %s", c.domain, d.VMIUID, md.GetUid())
	}
	phase := vmi.GetStatus().GetPhase()
	if d == nil {
		d = &Domain{Name: c.domain, UUID: uuid.NewString(), VMIUID: md.GetUid(), VMIKey: md.GetNamespace() + "/" + md.GetName(),
			State: StateShutoff, Reason: ReasonUnknown, PowerOffAfterACPI: m.PowerOffAfterACPI,
			Node: vmi.GetStatus().GetNodeName()}
		m.domains[c.domain] = d
		m.emit(c.domain, "Defined/Added")
	}
	d.GracePeriodSeconds = vmi.GetSpec().GetTerminationGracePeriodSeconds()
	if p := opts.GetNodeFailurePolicy(); p != "" {
		d.NodeFailurePolicy = p
	}
	// Like libvirt, starting needs every file the domain points at.
	if d.State == StateShutoff && phase != apiv1.PhaseRunning && !apiv1.IsFinal(phase) {
		for _, p := range append([]string{opts.GetKernelPath(), opts.GetInitrdPath()}, diskPaths(opts)...) {
			if p == "" {
				continue
			}
			if _, err := os.Stat(p); err != nil {
				return nil, status.Errorf(codes.Unknown, "Cannot access storage file '%s': No such file or directory", p)
			}
		}
		// A new boot; spec.paused ("start --paused") boots paused, as a
		// user pause that Sync will not undo.
		d.ShutdownRequestedAt, d.ACPIPresses = 0, 0
		d.State, d.Reason, d.PausedByUser = StateRunning, "Booted", false
		if vmi.GetSpec().GetPaused() {
			d.State, d.Reason, d.PausedByUser = StatePaused, "StartingUp", true
		}
		d.Starts++
		m.emit(c.domain, "Started/Booted")
	}
	if d.State == StatePaused && !d.PausedByUser {
		d.State, d.Reason = StateRunning, "Unpaused"
		m.emit(c.domain, "Resumed/Unpaused")
	}
	return m.statusLocked(c.domain), nil
}

func diskPaths(opts *launcherpb.SyncOptions) []string {
	var out []string
	for _, d := range opts.GetDisks() {
		out = append(out, d.GetPath())
	}
	return out
}

func (c *client) Shutdown(ctx context.Context) (*launcherpb.DomainStatus, error) {
	if err := c.enter(ctx, Call{Op: "Shutdown"}); err != nil {
		return nil, err
	}
	m := c.m
	defer m.mu.Unlock()
	d := m.domains[c.domain]
	if d == nil {
		return m.statusLocked(c.domain), nil
	}
	if d.State == StateRunning || d.State == StatePaused {
		if d.ShutdownRequestedAt == 0 {
			d.ShutdownRequestedAt = time.Now().Unix()
		}
		d.ACPIPresses++
		if d.PowerOffAfterACPI > 0 && d.ACPIPresses >= d.PowerOffAfterACPI && d.State == StateRunning {
			d.State, d.Reason = StateShutoff, "Shutdown"
			m.emit(c.domain, "Stopped/Shutdown")
		}
	}
	return m.statusLocked(c.domain), nil
}

func (c *client) Kill(ctx context.Context) (*launcherpb.DomainStatus, error) {
	if err := c.enter(ctx, Call{Op: "Kill"}); err != nil {
		return nil, err
	}
	m := c.m
	defer m.mu.Unlock()
	if d := m.domains[c.domain]; d != nil && d.State != StateShutoff {
		d.State, d.Reason = StateShutoff, "Destroyed"
		m.emit(c.domain, "Stopped/Destroyed")
	}
	return m.statusLocked(c.domain), nil
}

func (c *client) Delete(ctx context.Context) (*launcherpb.DomainStatus, error) {
	if err := c.enter(ctx, Call{Op: "Delete"}); err != nil {
		return nil, err
	}
	m := c.m
	defer m.mu.Unlock()
	if d := m.domains[c.domain]; d != nil {
		if d.State != StateShutoff {
			return nil, status.Errorf(codes.FailedPrecondition, "domain %s is %s; kill it first", c.domain, d.State)
		}
		delete(m.domains, c.domain)
		m.emit(c.domain, "Undefined/Removed")
	}
	return m.statusLocked(c.domain), nil
}

func (c *client) Pause(ctx context.Context) (*launcherpb.DomainStatus, error) {
	if err := c.enter(ctx, Call{Op: "Pause"}); err != nil {
		return nil, err
	}
	m := c.m
	defer m.mu.Unlock()
	if d := m.domains[c.domain]; d != nil && d.State == StateRunning {
		d.State, d.Reason, d.PausedByUser = StatePaused, "User", true
		m.emit(c.domain, "Suspended/Paused")
	}
	return m.statusLocked(c.domain), nil
}

func (c *client) Unpause(ctx context.Context) (*launcherpb.DomainStatus, error) {
	if err := c.enter(ctx, Call{Op: "Unpause"}); err != nil {
		return nil, err
	}
	m := c.m
	defer m.mu.Unlock()
	if d := m.domains[c.domain]; d != nil && d.State == StatePaused {
		d.State, d.Reason, d.PausedByUser = StateRunning, "Unpaused", false
		m.emit(c.domain, "Resumed/Unpaused")
	}
	return m.statusLocked(c.domain), nil
}

func (c *client) GetDomain(ctx context.Context) (*launcherpb.DomainStatus, error) {
	if err := c.enter(ctx, Call{Op: "GetDomain"}); err != nil {
		return nil, err
	}
	defer c.m.mu.Unlock()
	return c.m.statusLocked(c.domain), nil
}

func (c *client) Ping(ctx context.Context) error {
	if err := c.enter(ctx, Call{Op: "Ping"}); err != nil {
		return err
	}
	c.m.mu.Unlock()
	return nil
}

func (c *client) RenewLease(ctx context.Context, validFor time.Duration) error {
	if err := c.enter(ctx, Call{Op: "RenewLease", Lease: validFor}); err != nil {
		return err
	}
	defer c.m.mu.Unlock()
	if d := c.m.domains[c.domain]; d != nil {
		d.Leases = append(d.Leases, validFor)
	}
	return nil
}

func (c *client) Events(ctx context.Context) (<-chan *launcherpb.DomainEvent, error) {
	if err := c.enter(ctx, Call{Op: "Events"}); err != nil {
		return nil, err
	}
	m := c.m
	defer m.mu.Unlock()
	p := m.procs[c.pid]
	ch := make(chan *launcherpb.DomainEvent, 64)
	ch <- &launcherpb.DomainEvent{Status: m.statusLocked(c.domain), Event: "Current"}
	p.subs[ch] = struct{}{}
	go func() {
		<-ctx.Done()
		m.mu.Lock()
		defer m.mu.Unlock()
		if _, ok := p.subs[ch]; ok {
			delete(p.subs, ch)
			close(ch)
		}
	}()
	return ch, nil
}

func (c *client) Detach() {
	call := Call{Op: "Detach", Domain: c.domain, Pid: c.pid}
	c.m.notify(call)
	c.m.mu.Lock()
	defer c.m.mu.Unlock()
	c.m.record(call)
}

func (c *client) Stop(ctx context.Context) error {
	call := Call{Op: "Stop", Domain: c.domain, Pid: c.pid}
	c.m.notify(call)
	c.m.mu.Lock()
	defer c.m.mu.Unlock()
	c.m.record(call)
	// Stopping works on a hung launcher too: the real one is killed by pid.
	if p := c.m.procs[c.pid]; p != nil && p.alive {
		c.m.exit(p)
	}
	return nil
}
