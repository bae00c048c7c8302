//go:build libvirt

package virt

import (
	"libvirt.org/go/libvirt"

	"github.com/virtplane/terraform-provider-virtplane/launcher/internal/driver"
)

var _ driver.HotplugDomain = (*domain)(nil)

// liveAndConfig is where a plugged device goes: the running domain and
// its persistent definition, so that a domain defined again from the
// latter (libvirt's restart of a crashed QEMU, a redefinition) keeps it.
const liveAndConfig = libvirt.DOMAIN_DEVICE_MODIFY_LIVE | libvirt.DOMAIN_DEVICE_MODIFY_CONFIG

// AttachDevice is virDomainAttachDeviceFlags, live and persistent.
func (d *domain) AttachDevice(xml string) error {
	return d.wrap(d.d.AttachDeviceFlags(xml, liveAndConfig))
}

// DetachDevice is virDomainDetachDeviceFlags, live and, with config,
// persistent: the persistent definition loses the device at once, the
// live domain when the guest releases it (libvirt waits a few seconds for
// that itself, then answers; the device-removed event says when it
// happened).
func (d *domain) DetachDevice(xml string, config bool) error {
	flags := libvirt.DOMAIN_DEVICE_MODIFY_LIVE
	if config {
		flags = liveAndConfig
	}
	return d.wrap(d.d.DetachDeviceFlags(xml, flags))
}

// PersistentXML is the persistent definition.
func (d *domain) PersistentXML() (string, error) {
	x, err := d.d.GetXMLDesc(libvirt.DOMAIN_XML_INACTIVE)
	return x, d.wrap(err)
}
