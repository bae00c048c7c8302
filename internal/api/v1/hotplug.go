package apiv1

// Volume hotplug (KubeVirt's addvolume/removevolume and volumeStatus):
// the domain rules every layer shares. docs/hotplug.md describes the flow.

// Hotplug volume phases (VolumeStatus.phase), KubeVirt's VolumePhase
// values that apply here.
const (
	// VolumePending: the node has not made the volume yet (an image to
	// pull, a class to reach), or could not.
	VolumePending = "Pending"
	// VolumeAttachedToNode: the volume is made and reachable on the node
	// (a file, an rbd image), not in the guest yet.
	VolumeAttachedToNode = "AttachedToNode"
	// VolumeReady: the disk is in the running domain.
	VolumeReady = "Ready"
	// VolumeDetaching: the disk was removed from the spec and the guest
	// was asked to release it; it has not yet.
	VolumeDetaching = "Detaching"
)

// VolumeStatus reasons.
const (
	// ReasonAttachFailed: libvirt refused to plug the disk (or the node
	// could not make the volume); the node tries again.
	ReasonAttachFailed = "AttachFailed"
	// ReasonDetachPending: the guest was asked to release the disk and
	// has not yet, within the node's detach timeout.
	ReasonDetachPending = "DetachPending"
	// ReasonDetachTimeout: the guest has not released the disk for longer
	// than the node's detach timeout. It stays in the guest until the
	// guest lets it go or the VM restarts.
	ReasonDetachTimeout = "DetachTimeout"
)

// HotplugDiskBuses are the buses a hotpluggable disk may use: virtio (a
// PCIe device in a spare root port) and scsi (a unit on the virtio-scsi
// controller). SATA cannot be plugged (q35's AHCI has no hotplug) and a
// CD-ROM is not a volume one plugs.
func HotplugDiskBuses() []string { return []string{DiskBusVirtio, DiskBusSCSI} }

// Hotpluggable reports whether v is a hotpluggable persistent volume.
func Hotpluggable(v *Volume) bool { return v.GetPersistent().GetHotpluggable() }

// HotpluggableVolumes is the set of the names of spec's hotpluggable
// volumes (so, of their disks: a disk names its volume).
func HotpluggableVolumes(spec *VirtualMachineInstanceSpec) map[string]bool {
	out := map[string]bool{}
	for _, v := range spec.GetVolumes() {
		if Hotpluggable(v) {
			out[v.GetName()] = true
		}
	}
	return out
}

// FindVolumeStatus returns the status of volume name, or nil.
func FindVolumeStatus(st []*VolumeStatus, name string) *VolumeStatus {
	for _, s := range st {
		if s.GetName() == name {
			return s
		}
	}
	return nil
}
