package driver

import (
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
	"github.com/virtplane/terraform-provider-virtplane/launcher/internal/domxml"
)

// Disks that grow under a running guest: the node agent gives each disk
// the size it must have (DiskSource.size_bytes), and Sync grows a disk
// whose capacity is below it with libvirt's block resize. QEMU announces
// the new capacity to the guest (a virtio-blk config change; SCSI and
// SATA disks report a capacity change), whose kernel reads it: the guest
// sees the new size without a restart. A disk is never shrunk and one
// large enough is left alone, so that Sync stays idempotent. A stopped
// guest's disks are grown before it starts, by whoever owns the volume.

// ResizingDomain is what growing a running domain's disks needs of
// libvirt (launcher/internal/virt implements it; tests use a fake).
type ResizingDomain interface {
	// BlockCapacity is the size in bytes the guest sees of disk (a
	// target name, vda): virDomainGetBlockInfo's capacity.
	BlockCapacity(disk string) (uint64, error)
	// BlockResize grows disk to bytes (virDomainBlockResize, in bytes).
	BlockResize(disk string, bytes uint64) error
}

// growDisks grows each disk of the live domain whose capacity is below
// its size_bytes. A domain that is not running is left alone (its disks
// are grown before it starts), and so is one that migrates: its target
// made the disks at their old sizes, and the next Sync grows them.
func (d *Driver) growDisks(dom Domain, disks []*launcherpb.DiskSource) error {
	want := map[string]*launcherpb.DiskSource{} // by domain disk alias
	for _, s := range disks {
		if s.GetSizeBytes() <= 0 || s.GetReadOnly() {
			continue
		}
		if a := domxml.DiskAlias(s.GetName()); a != "" {
			want[a] = s
		}
	}
	if len(want) == 0 {
		return nil
	}
	st, _, err := dom.GetState()
	if err != nil {
		return grpcError(fmt.Errorf("get domain state: %w", err))
	}
	if st != StateRunning && st != StateBlocked && st != StatePaused {
		return nil
	}
	if d.migrating() {
		d.log.Info("not growing disks while the domain migrates")
		return nil
	}
	rdom, ok := dom.(ResizingDomain)
	if !ok {
		return status.Error(codes.Unimplemented, "grow disks: the libvirt domain cannot resize disks")
	}
	_, live, err := liveDisks(dom)
	if err != nil {
		return err
	}
	for _, disk := range live {
		if disk.Alias == nil || disk.Target == nil || disk.Target.Dev == "" {
			continue
		}
		src, ok := want[disk.Alias.Name]
		if !ok {
			continue
		}
		dev, name, size := disk.Target.Dev, src.GetName(), uint64(src.GetSizeBytes())
		capacity, err := rdom.BlockCapacity(dev)
		if err != nil {
			return grpcError(fmt.Errorf("disk %q (%s): reading its capacity: %w", name, dev, err))
		}
		if capacity >= size {
			continue
		}
		if err := rdom.BlockResize(dev, size); err != nil {
			return grpcError(fmt.Errorf("disk %q (%s): growing it from %d to %d bytes: %w", name, dev, capacity, size, err))
		}
		d.log.Info("grew disk under the running guest", "disk", name, "dev", dev, "from_bytes", capacity, "to_bytes", size)
	}
	return nil
}
