//go:build libvirt

package virt

import "github.com/virtplane/terraform-provider-virtplane/launcher/internal/driver"

var _ driver.PersistentDomain = (*domain)(nil)

// IsPersistent reports whether the domain is defined (virsh define), not
// transient (virsh create): only a defined domain keeps the metadata a
// take-over writes into its persistent definition.
func (d *domain) IsPersistent() (bool, error) {
	p, err := d.d.IsPersistent()
	return p, d.wrap(err)
}
