//go:build libvirt

package virt

import (
	"fmt"
	"testing"
	"time"

	"libvirt.org/go/libvirtxml"

	"github.com/virtplane/terraform-provider-virtplane/launcher/internal/driver"
)

// defineTestDomain defines a minimal domain on the test driver.
func defineTestDomain(t *testing.T, c *Connection, name string) driver.Domain {
	t.Helper()
	x, err := (&libvirtxml.Domain{
		Type: "test", Name: name,
		Memory: &libvirtxml.DomainMemory{Value: 64, Unit: "MiB"},
		OS:     &libvirtxml.DomainOS{Type: &libvirtxml.DomainOSType{Type: "hvm"}},
	}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	dom, err := c.DomainDefineXML(x)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = dom.Destroy(false)
		_ = dom.Undefine()
	})
	return dom
}

// nextEventOf waits for a lifecycle event of want and returns the
// domains of every lifecycle event seen up to it.
func nextEventOf(t *testing.T, events chan driver.Event, want string) []string {
	t.Helper()
	var seen []string
	deadline := time.After(10 * time.Second)
	for {
		select {
		case ev := <-events:
			if ev.Kind != driver.EventLifecycle {
				continue
			}
			seen = append(seen, ev.Domain)
			if ev.Domain == want {
				return seen
			}
		case <-deadline:
			t.Fatalf("no event of %s; saw %v", want, seen)
		}
	}
}

// TestFocusEvents: focused on a domain, the connection receives that
// domain's events only; before the domain exists focusing changes
// nothing; unfocused, it receives every domain's again.
func TestFocusEvents(t *testing.T) {
	requireLibvirt(t)
	conn, events := openWithEvents(t, testURI)
	base := fmt.Sprintf("vp-focus-%d", time.Now().UnixNano())
	mine, other := base+"-mine", base+"-other"

	// Not defined yet: every domain's events still come.
	if err := conn.FocusEvents(mine); err != nil {
		t.Fatalf("FocusEvents before the domain exists: %v", err)
	}
	o := defineTestDomain(t, conn, other)
	nextEventOf(t, events, other)

	m := defineTestDomain(t, conn, mine)
	nextEventOf(t, events, mine)
	if err := conn.FocusEvents(mine); err != nil {
		t.Fatal(err)
	}
	if err := o.Create(false); err != nil {
		t.Fatal(err)
	}
	if err := m.Create(false); err != nil {
		t.Fatal(err)
	}
	// Events of one connection arrive in order: the other domain's start
	// came first, so it would be among these.
	if seen := nextEventOf(t, events, mine); len(seen) != 1 {
		t.Errorf("focused on %s, events of %v", mine, seen)
	}

	if err := conn.UnfocusEvents(); err != nil {
		t.Fatal(err)
	}
	if err := o.Destroy(false); err != nil {
		t.Fatal(err)
	}
	nextEventOf(t, events, other)
}
