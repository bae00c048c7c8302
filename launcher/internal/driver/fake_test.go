package driver

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"libvirt.org/go/libvirtxml"

	"github.com/virtplane/terraform-provider-virtplane/launcher/internal/domxml"
)

// fakeConn is an in-memory libvirt: enough state to drive the driver's
// decisions, plus the lifecycle events libvirt would emit.
type fakeConn struct {
	mu      sync.Mutex
	doms    map[string]*fakeState
	events  chan Event
	calls   []string
	fail    map[string]error // method name → error to return once
	nextID  int
	offline bool
	jobs    map[string]*fakeJob // migration jobs, by domain (fake_migrate_test.go)
	// busyPorts are host ports QEMU cannot bind (fake_network_test.go).
	busyPorts map[int]bool
	// snaps is the online snapshot state (fake_snapshot_test.go).
	snaps *fakeSnap
	// hang makes the next Create hang until a Destroy
	// (fake_hang_test.go).
	hang, hanging chan struct{}
	// capacity is each disk's size as the guest sees it, by target
	// (fake_resize_test.go).
	capacity map[string]uint64
	// unplugHold: the guest keeps unplugged disks (fake_hotplug_test.go).
	unplugHold bool
}

type fakeState struct {
	name     string
	uuid     string
	state    State
	reason   int
	xml      string
	metadata string // element, "" when none
	net      *fakeNet
}

func newFakeConn() *fakeConn {
	return &fakeConn{doms: map[string]*fakeState{}, events: make(chan Event, 256), fail: map[string]error{}}
}

func (c *fakeConn) record(call string) error {
	c.calls = append(c.calls, call)
	if c.offline {
		return ErrNotConnected
	}
	if err, ok := c.fail[call]; ok {
		delete(c.fail, call)
		return err
	}
	return nil
}

func (c *fakeConn) emit(name string, typ, detail int) {
	c.events <- Event{Kind: EventLifecycle, Domain: name, Type: typ, Detail: detail}
}

func (c *fakeConn) failNext(call string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fail[call] = err
}

func (c *fakeConn) setOffline(v bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offline = v
}

func (c *fakeConn) callLog() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.calls...)
}

func (c *fakeConn) callsMatching(prefix string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, call := range c.calls {
		if strings.HasPrefix(call, prefix) {
			n++
		}
	}
	return n
}

func (c *fakeConn) LookupDomainByName(name string) (Domain, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.record("Lookup"); err != nil {
		return nil, err
	}
	if _, ok := c.doms[name]; !ok {
		return nil, fmt.Errorf("lookup %s: %w", name, ErrNoDomain)
	}
	return &fakeDomain{c: c, name: name}, nil
}

func (c *fakeConn) DomainDefineXML(x string) (Domain, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.record("Define"); err != nil {
		return nil, err
	}
	var def libvirtxml.Domain
	if err := def.Unmarshal(x); err != nil {
		return nil, err
	}
	s := c.doms[def.Name]
	if s == nil {
		c.nextID++
		s = &fakeState{name: def.Name, uuid: fmt.Sprintf("00000000-0000-0000-0000-%012d", c.nextID), state: StateShutoff}
		c.doms[def.Name] = s
	}
	s.xml = x
	s.metadata = ""
	if def.Metadata != nil {
		md, err := domxml.ParseMetadata(def.Metadata.XML)
		if err != nil {
			return nil, err
		}
		if s.metadata, err = md.MarshalElement(); err != nil {
			return nil, err
		}
	}
	c.emit(def.Name, 0, 0)
	return &fakeDomain{c: c, name: def.Name}, nil
}

// put adds a domain as if another process had defined it.
func (c *fakeConn) put(s *fakeState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.doms[s.name] = s
}

func (c *fakeConn) get(name string) *fakeState {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.doms[name]; ok {
		cp := *s
		return &cp
	}
	return nil
}

type fakeDomain struct {
	c    *fakeConn
	name string
}

// with runs fn on the domain's state under the lock.
func (d *fakeDomain) with(call string, fn func(s *fakeState) error) error {
	d.c.mu.Lock()
	defer d.c.mu.Unlock()
	if err := d.c.record(call); err != nil {
		return err
	}
	s, ok := d.c.doms[d.name]
	if !ok {
		return ErrNoDomain
	}
	return fn(s)
}

func (d *fakeDomain) GetName() (string, error) { return d.name, nil }

func (d *fakeDomain) GetUUIDString() (uuid string, err error) {
	err = d.with("GetUUID", func(s *fakeState) error { uuid = s.uuid; return nil })
	return uuid, err
}

func (d *fakeDomain) GetState() (st State, reason int, err error) {
	err = d.with("GetState", func(s *fakeState) error { st, reason = s.state, s.reason; return nil })
	return st, reason, err
}

func (d *fakeDomain) GetXMLDesc() (x string, err error) {
	err = d.with("GetXMLDesc", func(s *fakeState) error { x = s.xml; return nil })
	return x, err
}

func (d *fakeDomain) GetMetadata(uri string) (m string, err error) {
	err = d.with("GetMetadata", func(s *fakeState) error {
		if uri != domxml.Namespace || s.metadata == "" {
			return ErrNoMetadata
		}
		m = s.metadata
		return nil
	})
	return m, err
}

func (d *fakeDomain) SetMetadata(element, key, uri string) error {
	return d.with("SetMetadata", func(s *fakeState) error {
		if uri != domxml.Namespace || key != domxml.NamespacePrefix {
			return errors.New("unexpected namespace")
		}
		s.metadata = element
		return nil
	})
}

func (d *fakeDomain) transition(call string, from []State, to State, reason, evType, evDetail int) error {
	return d.with(call, func(s *fakeState) error {
		ok := false
		for _, f := range from {
			ok = ok || s.state == f
		}
		if !ok {
			return fmt.Errorf("%s: domain is %s", call, s.state)
		}
		s.state, s.reason = to, reason
		d.c.emit(d.name, evType, evDetail)
		return nil
	})
}

func (d *fakeDomain) Create(paused bool) error {
	if hang := d.c.takeHang(); hang != nil {
		return d.hangingCreate(hang) // fake_hang_test.go
	}
	if paused {
		return d.transition("Create(paused)", []State{StateShutoff, StateCrashed}, StatePaused, ReasonPausedUser, 3, 0)
	}
	return d.transition("Create", []State{StateShutoff, StateCrashed}, StateRunning, 1, 2, 0)
}

func (d *fakeDomain) Shutdown() error {
	// A guest with no OS ignores ACPI: only the call is recorded.
	return d.with("Shutdown", func(s *fakeState) error {
		if !s.state.Active() {
			return errors.New("domain is not running")
		}
		return nil
	})
}

func (d *fakeDomain) Destroy(graceful bool) error {
	d.c.unhang()
	call := "Destroy"
	if graceful {
		call = "Destroy(graceful)"
	}
	return d.transition(call, []State{StateRunning, StatePaused, StateBlocked, StateShutdown, StatePMSuspended, StateCrashed}, StateShutoff, ReasonShutoffDestroyed, 5, 1)
}

func (d *fakeDomain) Undefine() error {
	return d.with("Undefine", func(s *fakeState) error {
		if s.state.Active() {
			return errors.New("cannot undefine an active domain")
		}
		delete(d.c.doms, d.name)
		d.c.emit(d.name, 1, 0)
		return nil
	})
}

func (d *fakeDomain) Suspend() error {
	return d.transition("Suspend", []State{StateRunning}, StatePaused, ReasonPausedUser, 3, 0)
}

func (d *fakeDomain) Resume() error {
	return d.transition("Resume", []State{StatePaused}, StateRunning, 5, 4, 0)
}

func (d *fakeDomain) Free() {}
