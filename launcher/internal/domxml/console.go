package domxml

import (
	"fmt"

	"libvirt.org/go/libvirtxml"
)

// SerialPty returns the host pty of the guest's serial console from the
// live XML of a running domain (libvirt fills in the path when QEMU has
// opened it); "" when there is none.
func SerialPty(domainXML string) (string, error) {
	var d libvirtxml.Domain
	if err := d.Unmarshal(domainXML); err != nil {
		return "", fmt.Errorf("parsing domain XML: %w", err)
	}
	if d.Devices == nil {
		return "", nil
	}
	for _, s := range d.Devices.Serials {
		if s.Source != nil && s.Source.Pty != nil && s.Source.Pty.Path != "" {
			return s.Source.Pty.Path, nil
		}
	}
	// The console that aliases the serial port carries the same pty.
	for _, c := range d.Devices.Consoles {
		if c.Source != nil && c.Source.Pty != nil && c.Source.Pty.Path != "" {
			return c.Source.Pty.Path, nil
		}
		if c.TTY != "" {
			return c.TTY, nil
		}
	}
	return "", nil
}
