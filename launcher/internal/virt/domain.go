//go:build libvirt

package virt

import (
	"errors"

	"libvirt.org/go/libvirt"

	"github.com/virtplane/terraform-provider-virtplane/launcher/internal/driver"
)

// domain implements driver.Domain. It is tied to the connection it came
// from; after a reconnect the driver looks domains up again.
type domain struct {
	c    *Connection
	conn *libvirt.Connect
	d    *libvirt.Domain
}

var _ driver.Domain = (*domain)(nil)

func (d *domain) wrap(err error) error { return d.c.wrap(d.conn, err) }

func (d *domain) GetName() (string, error) {
	n, err := d.d.GetName()
	return n, d.wrap(err)
}

func (d *domain) GetUUIDString() (string, error) {
	u, err := d.d.GetUUIDString()
	return u, d.wrap(err)
}

func (d *domain) GetState() (driver.State, int, error) {
	st, reason, err := d.d.GetState()
	return driver.State(st), reason, d.wrap(err)
}

func (d *domain) GetXMLDesc() (string, error) {
	x, err := d.d.GetXMLDesc(0)
	return x, d.wrap(err)
}

// GetMetadata reads the live copy of a running domain and the persistent
// one otherwise (AFFECT_CURRENT); SetMetadata keeps both equal.
func (d *domain) GetMetadata(uri string) (string, error) {
	m, err := d.d.GetMetadata(libvirt.DOMAIN_METADATA_ELEMENT, uri, libvirt.DOMAIN_AFFECT_CURRENT)
	return m, d.wrap(err)
}

// SetMetadata writes the persistent definition, and the live one too when
// the domain runs, so that the value survives both a launcher restart and
// the domain's next boot.
func (d *domain) SetMetadata(element, key, uri string) error {
	flags := libvirt.DOMAIN_AFFECT_CONFIG
	if active, err := d.d.IsActive(); err != nil {
		return d.wrap(err)
	} else if active {
		flags |= libvirt.DOMAIN_AFFECT_LIVE
	}
	return d.wrap(d.d.SetMetadata(libvirt.DOMAIN_METADATA_ELEMENT, element, key, uri, flags))
}

func (d *domain) Create(paused bool) error {
	flags := libvirt.DOMAIN_NONE
	if paused {
		flags = libvirt.DOMAIN_START_PAUSED
	}
	return d.wrap(d.d.CreateWithFlags(flags))
}

func (d *domain) Shutdown() error {
	return d.wrap(d.d.ShutdownFlags(libvirt.DOMAIN_SHUTDOWN_DEFAULT))
}

func (d *domain) Destroy(graceful bool) error {
	flags := libvirt.DOMAIN_DESTROY_DEFAULT
	if graceful {
		flags = libvirt.DOMAIN_DESTROY_GRACEFUL
	}
	return d.wrap(d.d.DestroyFlags(flags))
}

// Undefine keeps NVRAM and TPM state: they belong to the VM, which may
// start again, not to this instance. Drivers without those flags (the
// test driver) get a plain undefine, which refuses rather than deletes
// when such state exists.
func (d *domain) Undefine() error {
	err := d.d.UndefineFlags(libvirt.DOMAIN_UNDEFINE_KEEP_NVRAM | libvirt.DOMAIN_UNDEFINE_KEEP_TPM)
	var lerr libvirt.Error
	if errors.As(err, &lerr) && (lerr.Code == libvirt.ERR_INVALID_ARG || lerr.Code == libvirt.ERR_NO_SUPPORT) {
		err = d.d.UndefineFlags(0)
	}
	return d.wrap(err)
}

func (d *domain) Suspend() error { return d.wrap(d.d.Suspend()) }

func (d *domain) Resume() error { return d.wrap(d.d.Resume()) }

func (d *domain) Free() { _ = d.d.Free() }
