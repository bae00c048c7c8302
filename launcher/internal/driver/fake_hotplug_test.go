package driver

import (
	"errors"
	"fmt"

	"libvirt.org/go/libvirtxml"
)

// The fake libvirt's hotplug: devices go into and out of the domain's
// XML; an unplugged disk leaves when the fake guest releases it, at once
// (the default, with libvirt's device-removed event) or when the test
// says (holdUnplugs, then release).

var _ HotplugDomain = (*fakeDomain)(nil)

// holdUnplugs makes the fake guest keep unplugged disks until release.
func (c *fakeConn) holdUnplugs(hold bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.unplugHold = hold
}

// release has the fake guest let go of the disk of alias: it leaves the
// domain and libvirt's event says so.
func (c *fakeConn) release(name, alias string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.doms[name]
	if !ok {
		return ErrNoDomain
	}
	if err := editDevices(s, func(dl *libvirtxml.DomainDeviceList) error {
		for i, d := range dl.Disks {
			if d.Alias != nil && d.Alias.Name == alias {
				dl.Disks = append(dl.Disks[:i], dl.Disks[i+1:]...)
				return nil
			}
		}
		return fmt.Errorf("no disk %s", alias)
	}); err != nil {
		return err
	}
	c.events <- Event{Kind: EventDeviceRemoved, Domain: name, Alias: alias}
	return nil
}

func editDevices(s *fakeState, fn func(*libvirtxml.DomainDeviceList) error) error {
	var def libvirtxml.Domain
	if err := def.Unmarshal(s.xml); err != nil {
		return err
	}
	if def.Devices == nil {
		def.Devices = &libvirtxml.DomainDeviceList{}
	}
	if err := fn(def.Devices); err != nil {
		return err
	}
	x, err := def.Marshal()
	if err != nil {
		return err
	}
	s.xml = x
	return nil
}

func (d *fakeDomain) AttachDevice(x string) error {
	return d.with("AttachDevice", func(s *fakeState) error {
		if !s.state.Active() {
			return errors.New("domain is not running")
		}
		return editDevices(s, func(dl *libvirtxml.DomainDeviceList) error {
			var disk libvirtxml.DomainDisk
			if err := disk.Unmarshal(x); err == nil && disk.Target != nil {
				for _, have := range dl.Disks {
					if have.Target != nil && have.Target.Dev == disk.Target.Dev {
						return fmt.Errorf("target %s already exists", disk.Target.Dev)
					}
				}
				dl.Disks = append(dl.Disks, disk)
				return nil
			}
			var c libvirtxml.DomainController
			if err := c.Unmarshal(x); err != nil {
				return fmt.Errorf("neither a disk nor a controller: %w", err)
			}
			dl.Controllers = append(dl.Controllers, c)
			return nil
		})
	})
}

// PersistentXML is the domain's XML: the fake keeps one definition.
func (d *fakeDomain) PersistentXML() (string, error) { return d.GetXMLDesc() }

func (d *fakeDomain) DetachDevice(x string, _ bool) error {
	var disk libvirtxml.DomainDisk
	if err := disk.Unmarshal(x); err != nil || disk.Alias == nil {
		return fmt.Errorf("detach: not a disk with an alias: %s", x)
	}
	hold := false
	err := d.with("DetachDevice "+disk.Alias.Name, func(s *fakeState) error {
		if !s.state.Active() {
			return errors.New("domain is not running")
		}
		hold = d.c.unplugHold
		return nil
	})
	if err != nil || hold {
		return err
	}
	return d.c.release(d.name, disk.Alias.Name)
}
