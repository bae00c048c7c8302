//go:build libvirt

package virt

import "github.com/virtplane/terraform-provider-virtplane/launcher/internal/driver"

var (
	_ driver.PersistentDomain = (*domain)(nil)
	_ driver.StatefulDomain   = (*domain)(nil)
)

// IsPersistent reports whether the domain is defined (virsh define), not
// transient (virsh create): only a defined domain keeps the metadata a
// take-over writes into its persistent definition.
func (d *domain) IsPersistent() (bool, error) {
	p, err := d.d.IsPersistent()
	return p, d.wrap(err)
}

// SavedState counts the domain's libvirt snapshots and checkpoints and
// says whether it has a managed save image: state libvirt keeps beside
// the definition, which the launcher's undefine refuses to drop.
func (d *domain) SavedState() (snapshots, checkpoints int, managedSave bool, err error) {
	if snapshots, err = d.d.SnapshotNum(0); err != nil {
		return 0, 0, false, d.wrap(err)
	}
	cps, err := d.d.ListAllCheckpoints(0)
	if err != nil {
		return 0, 0, false, d.wrap(err)
	}
	for i := range cps {
		_ = cps[i].Free()
	}
	if managedSave, err = d.d.HasManagedSaveImage(0); err != nil {
		return 0, 0, false, d.wrap(err)
	}
	return snapshots, len(cps), managedSave, nil
}
