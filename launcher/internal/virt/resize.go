//go:build libvirt

package virt

import (
	"libvirt.org/go/libvirt"

	"github.com/virtplane/terraform-provider-virtplane/launcher/internal/driver"
)

var _ driver.ResizingDomain = (*domain)(nil)

// BlockCapacity is virDomainGetBlockInfo's capacity: the disk's size as
// the guest sees it (a qcow2's virtual size).
func (d *domain) BlockCapacity(disk string) (uint64, error) {
	info, err := d.d.GetBlockInfo(disk, 0)
	if err != nil {
		return 0, d.wrap(err)
	}
	return info.Capacity, nil
}

// BlockResize grows disk to bytes: QEMU's block_resize through libvirt,
// which rounds a qcow2's size up to whole sectors.
func (d *domain) BlockResize(disk string, bytes uint64) error {
	return d.wrap(d.d.BlockResize(disk, bytes, libvirt.DOMAIN_BLOCK_RESIZE_BYTES))
}
