//go:build libvirt

package virt

import (
	"errors"
	"fmt"

	"libvirt.org/go/libvirt"
	"libvirt.org/go/libvirtxml"
)

// SetCephSecret makes libvirt hold value as the ceph secret usage: a
// private secret (its value is never read back through the API) that is
// ephemeral (never written to libvirt's disk), defined if missing, its
// value set every time (a class's key may have changed). Launchers of the
// node's domains share it by usage name; the disks refer to it by that.
func (c *Connection) SetCephSecret(usage string, value []byte) error {
	conn, err := c.current()
	if err != nil {
		return err
	}
	defer release(conn)
	sec, err := conn.LookupSecretByUsage(libvirt.SECRET_USAGE_TYPE_CEPH, usage)
	var lerr libvirt.Error
	if errors.As(err, &lerr) && lerr.Code == libvirt.ERR_NO_SECRET {
		def := libvirtxml.Secret{Ephemeral: "yes", Private: "yes", Description: "virtplane storage class key",
			Usage: &libvirtxml.SecretUsage{Type: "ceph", Name: usage}}
		x, merr := def.Marshal()
		if merr != nil {
			return fmt.Errorf("secret %s: %w", usage, merr)
		}
		sec, err = conn.SecretDefineXML(x, 0)
		if errors.As(err, &lerr) && lerr.Code == libvirt.ERR_OPERATION_FAILED {
			// Another launcher defined it meanwhile.
			sec, err = conn.LookupSecretByUsage(libvirt.SECRET_USAGE_TYPE_CEPH, usage)
		}
	}
	if err != nil {
		return c.wrap(conn, fmt.Errorf("secret %s: %w", usage, err))
	}
	defer func() { _ = sec.Free() }()
	if err := sec.SetValue(value, 0); err != nil {
		return c.wrap(conn, fmt.Errorf("secret %s: setting its value: %w", usage, err))
	}
	return nil
}
