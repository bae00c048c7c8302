//go:build libvirt

package virt

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"libvirt.org/go/libvirt"

	"github.com/virtplane/terraform-provider-virtplane/launcher/internal/driver"
)

// Keepalive makes a hung libvirtd look like a dropped connection (and so
// trigger a reconnect) after about interval × count seconds.
const (
	keepaliveInterval = 5
	keepaliveCount    = 3
)

// Connection is a libvirt connection that re-opens itself when libvirtd
// goes away (restart, upgrade) and re-registers its event callbacks.
// It implements driver.Conn.
type Connection struct {
	uri    string
	log    *slog.Logger
	events func(driver.Event)

	mu           sync.Mutex
	conn         *libvirt.Connect // nil while disconnected
	callbackIDs  []int
	reconnecting bool
	closed       bool
	done         chan struct{}
	// focus is the domain whose events alone the launcher wants ("" for
	// every domain's), focusedOn the one the registered callbacks are
	// narrowed to ("" while they take every domain's: focus is not
	// defined yet, or the connection is new).
	focus, focusedOn string
}

var _ driver.Conn = (*Connection)(nil)

// Open connects to uri. It starts the event loop if needed; it fails if
// libvirt cannot be reached now (later drops are repaired in the
// background).
func Open(uri string, opts Options) (*Connection, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if err := StartEventLoop(opts.Logger); err != nil {
		return nil, err
	}
	c := &Connection{uri: uri, log: opts.Logger.With("libvirt_uri", uri), events: opts.Events, done: make(chan struct{})}
	conn, ids, _, err := c.dial("")
	if err != nil {
		return nil, err
	}
	c.conn, c.callbackIDs = conn, ids
	return c, nil
}

// dial opens a connection and registers the callbacks: for the domain
// named focus when it is defined (focusedOn is then focus), else for
// every domain.
func (c *Connection) dial(focus string) (_ *libvirt.Connect, ids []int, focusedOn string, _ error) {
	conn, err := libvirt.NewConnect(c.uri)
	if err != nil {
		return nil, nil, "", fmt.Errorf("connect to %s: %w", c.uri, err)
	}
	// Not every driver has keepalives (test:///, embedded ones); that is fine.
	_ = conn.SetKeepAlive(keepaliveInterval, keepaliveCount)
	if err := conn.RegisterCloseCallback(func(_ *libvirt.Connect, reason libvirt.ConnectCloseReason) {
		c.lost(conn, reason)
	}); err != nil {
		c.log.Debug("close callback not supported", "error", err)
	}
	var dom *libvirt.Domain
	if focus != "" && c.events != nil {
		if dom, err = conn.LookupDomainByName(focus); err == nil {
			defer func() { _ = dom.Free() }()
			focusedOn = focus
		} else {
			dom = nil
		}
	}
	if ids, err = c.register(conn, dom); err != nil {
		_, _ = conn.Close()
		return nil, nil, "", err
	}
	return conn, ids, focusedOn, nil
}

// register registers the event callbacks: for dom's events only, or for
// every domain's when dom is nil.
func (c *Connection) register(conn *libvirt.Connect, dom *libvirt.Domain) ([]int, error) {
	if c.events == nil {
		return nil, nil
	}
	id, err := conn.DomainEventLifecycleRegister(dom, func(_ *libvirt.Connect, d *libvirt.Domain, ev *libvirt.DomainEventLifecycle) {
		// GetName reads the name the event carried: no RPC here.
		name, _ := d.GetName()
		c.events(driver.Event{Kind: driver.EventLifecycle, Domain: name, Type: int(ev.Event), Detail: ev.Detail})
	})
	if err != nil {
		return nil, fmt.Errorf("register lifecycle events on %s: %w", c.uri, err)
	}
	ids := []int{id}
	// The guest agent connecting is when its addresses become known.
	// Drivers without agents (test:///) do not have the event; the
	// launcher then finds the agent's state by polling.
	id, err = conn.DomainEventAgentLifecycleRegister(dom, func(_ *libvirt.Connect, d *libvirt.Domain, ev *libvirt.DomainEventAgentLifecycle) {
		name, _ := d.GetName()
		c.events(driver.Event{Kind: driver.EventAgent, Domain: name, Type: int(ev.State), Detail: int(ev.Reason)})
	})
	if err != nil {
		c.log.Debug("guest agent lifecycle events not supported", "error", err)
	} else {
		ids = append(ids, id)
	}
	// A guest releasing an unplugged disk (or refusing to).
	id, err = conn.DomainEventDeviceRemovedRegister(dom, func(_ *libvirt.Connect, d *libvirt.Domain, ev *libvirt.DomainEventDeviceRemoved) {
		name, _ := d.GetName()
		c.events(driver.Event{Kind: driver.EventDeviceRemoved, Domain: name, Alias: ev.DevAlias})
	})
	if err != nil {
		c.log.Debug("device removed events not supported", "error", err)
	} else {
		ids = append(ids, id)
	}
	id, err = conn.DomainEventDeviceRemovalFailedRegister(dom, func(_ *libvirt.Connect, d *libvirt.Domain, ev *libvirt.DomainEventDeviceRemovalFailed) {
		name, _ := d.GetName()
		c.events(driver.Event{Kind: driver.EventDeviceRemovalFailed, Domain: name, Alias: ev.DevAlias})
	})
	if err != nil {
		c.log.Debug("device removal failed events not supported", "error", err)
	} else {
		ids = append(ids, id)
	}
	return ids, nil
}

// FocusEvents narrows the event callbacks to the domain named name, once
// it is defined (and again after every reconnect). Registered for every
// domain, each launcher was sent every event of every domain on the host
// and dropped all but its own: starting N guests cost N² event
// deliveries, in libvirtd and in the launchers' event loops, which
// profiles of a 100-VM start showed as the largest share of the
// launchers' CPU (docs/performance.md). libvirt filters a domain's
// callbacks by UUID, so a domain undefined and defined again needs
// UnfocusEvents in between; the driver does that on the Undefined event.
// A domain not defined yet leaves the callbacks as they are, and no error.
func (c *Connection) FocusEvents(name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.focus = name
	if c.conn == nil || c.events == nil || c.focusedOn == name {
		return nil
	}
	dom, err := c.conn.LookupDomainByName(name)
	if err != nil {
		var lerr libvirt.Error
		if errors.As(err, &lerr) && lerr.Code == libvirt.ERR_NO_DOMAIN {
			return nil
		}
		return fmt.Errorf("focus events on %s: %w", name, err)
	}
	defer func() { _ = dom.Free() }()
	return c.reregisterLocked(dom, name)
}

// UnfocusEvents registers the callbacks for every domain again.
func (c *Connection) UnfocusEvents() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.focus = ""
	if c.conn == nil || c.events == nil || c.focusedOn == "" {
		return nil
	}
	return c.reregisterLocked(nil, "")
}

// reregisterLocked replaces the callbacks with ones for dom (nil: every
// domain). The new ones are registered before the old ones go, so no
// event falls between them; one may come twice, which costs a status
// read.
func (c *Connection) reregisterLocked(dom *libvirt.Domain, name string) error {
	ids, err := c.register(c.conn, dom)
	if err != nil {
		return err
	}
	for _, id := range c.callbackIDs {
		_ = c.conn.DomainEventDeregister(id)
	}
	c.callbackIDs, c.focusedOn = ids, name
	return nil
}

// lost is libvirt's close callback (on the event-loop goroutine): drop the
// connection and reconnect elsewhere.
func (c *Connection) lost(conn *libvirt.Connect, reason libvirt.ConnectCloseReason) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn != conn || c.closed {
		return
	}
	c.log.Warn("libvirt connection lost; reconnecting", "reason", int(reason))
	c.startReconnectLocked()
}

// startReconnectLocked forgets the current connection and starts the
// reconnect loop once.
func (c *Connection) startReconnectLocked() {
	old, oldIDs := c.conn, c.callbackIDs
	c.conn, c.callbackIDs, c.focusedOn = nil, nil, ""
	if c.reconnecting || c.closed {
		return
	}
	c.reconnecting = true
	go c.reconnect(old, oldIDs)
}

func (c *Connection) reconnect(old *libvirt.Connect, oldIDs []int) {
	if old != nil {
		// Best effort: the daemon side is gone already.
		for _, id := range oldIDs {
			_ = old.DomainEventDeregister(id)
		}
		_ = old.UnregisterCloseCallback()
		_, _ = old.Close()
	}
	backoff := 250 * time.Millisecond
	for attempt := 1; ; attempt++ {
		select {
		case <-c.done:
			return
		case <-time.After(backoff):
		}
		c.mu.Lock()
		focus := c.focus
		c.mu.Unlock()
		conn, ids, focusedOn, err := c.dial(focus)
		if err == nil {
			c.mu.Lock()
			if c.closed {
				c.mu.Unlock()
				_, _ = conn.Close()
				return
			}
			c.conn, c.callbackIDs, c.reconnecting = conn, ids, false
			c.focusedOn = focusedOn
			c.mu.Unlock()
			c.log.Info("libvirt connection re-established", "attempts", attempt)
			if c.events != nil {
				c.events(driver.Event{Kind: driver.EventReconnected})
			}
			return
		}
		if attempt == 1 || attempt%20 == 0 {
			c.log.Warn("reconnect to libvirt failed", "attempt", attempt, "error", err)
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

// current returns the live connection with a reference taken, or
// driver.ErrNotConnected. The caller releases it with release: the
// reference keeps the C object valid if a reconnect closes the connection
// meanwhile.
func (c *Connection) current() (*libvirt.Connect, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn == nil {
		return nil, fmt.Errorf("%s: %w", c.uri, driver.ErrNotConnected)
	}
	if err := c.conn.Ref(); err != nil {
		return nil, fmt.Errorf("%s: %w: %v", c.uri, driver.ErrNotConnected, err)
	}
	return c.conn, nil
}

func release(conn *libvirt.Connect) { _, _ = conn.Close() }

// Close closes the connection and stops reconnecting.
func (c *Connection) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	close(c.done)
	conn, ids := c.conn, c.callbackIDs
	c.conn, c.callbackIDs = nil, nil
	c.mu.Unlock()
	if conn == nil {
		return nil
	}
	for _, id := range ids {
		_ = conn.DomainEventDeregister(id)
	}
	_ = conn.UnregisterCloseCallback()
	if _, err := conn.Close(); err != nil {
		return fmt.Errorf("close libvirt connection: %w", err)
	}
	return nil
}

// wrap translates libvirt errors into the driver's sentinels. Errors that
// mean the daemon is gone also start a reconnect, for the cases the close
// callback misses.
func (c *Connection) wrap(conn *libvirt.Connect, err error) error {
	if err == nil {
		return nil
	}
	var lerr libvirt.Error
	if !errors.As(err, &lerr) {
		return err
	}
	switch lerr.Code {
	case libvirt.ERR_NO_DOMAIN:
		return fmt.Errorf("%w: %s", driver.ErrNoDomain, lerr.Message)
	case libvirt.ERR_NO_DOMAIN_METADATA:
		return fmt.Errorf("%w: %s", driver.ErrNoMetadata, lerr.Message)
	case libvirt.ERR_SYSTEM_ERROR, libvirt.ERR_RPC, libvirt.ERR_NO_CONNECT, libvirt.ERR_INVALID_CONN, libvirt.ERR_INTERNAL_ERROR:
		if alive, aerr := conn.IsAlive(); aerr != nil || !alive {
			c.mu.Lock()
			if c.conn == conn {
				c.log.Warn("libvirt connection is dead; reconnecting", "error", lerr.Message)
				c.startReconnectLocked()
			}
			c.mu.Unlock()
			return fmt.Errorf("%w: %s", driver.ErrNotConnected, lerr.Message)
		}
	}
	return &libvirtError{lerr}
}

// libvirtError prints just libvirt's message and keeps the libvirt.Error
// for errors.As.
type libvirtError struct{ err libvirt.Error }

func (e *libvirtError) Error() string { return e.err.Message }
func (e *libvirtError) Unwrap() error { return e.err }

// LookupDomainByName implements driver.Conn.
func (c *Connection) LookupDomainByName(name string) (driver.Domain, error) {
	return c.domainFrom(func(conn *libvirt.Connect) (*libvirt.Domain, error) { return conn.LookupDomainByName(name) })
}

// DomainDefineXML implements driver.Conn.
func (c *Connection) DomainDefineXML(xml string) (driver.Domain, error) {
	return c.domainFrom(func(conn *libvirt.Connect) (*libvirt.Domain, error) { return conn.DomainDefineXML(xml) })
}

// domainFrom is the domain get returns on the current connection.
func (c *Connection) domainFrom(get func(*libvirt.Connect) (*libvirt.Domain, error)) (driver.Domain, error) {
	conn, err := c.current()
	if err != nil {
		return nil, err
	}
	defer release(conn)
	d, err := get(conn)
	if err != nil {
		return nil, c.wrap(conn, err)
	}
	return &domain{c: c, conn: conn, d: d}, nil
}

// ListAllDomains returns every domain, active or not.
func (c *Connection) ListAllDomains() ([]driver.Domain, error) {
	conn, err := c.current()
	if err != nil {
		return nil, err
	}
	defer release(conn)
	ds, err := conn.ListAllDomains(0)
	if err != nil {
		return nil, c.wrap(conn, err)
	}
	out := make([]driver.Domain, len(ds))
	for i := range ds {
		out[i] = &domain{c: c, conn: conn, d: &ds[i]}
	}
	return out, nil
}
